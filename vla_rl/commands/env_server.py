"""`vla-rl env-server --env NAME --port PORT`: serve a registered env to remote env workers (docs/remote_envs.md)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from vla_rl.commands.common import add_config_dir_argument


def cmd_env_server(args: argparse.Namespace) -> int:
    from envs.registry import UnknownEnvError
    from envs.remote.server import start_server

    try:
        server, service, port = start_server(args.env, args.host, args.port, args.max_sessions, args.log_every)
    except (UnknownEnvError, ImportError, ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    stopped = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stopped.set())
    print(f"serving env {service.env_name!r} on {args.host}:{port} (clients: env.remote={args.host}:{port})", flush=True)
    stopped.wait()
    server.stop(grace=1.0).wait()
    service.close_all()
    print(f"stopped after {service.steps} steps", flush=True)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "env-server",
        help="serve an env over gRPC to env workers that run with env.remote=HOST:PORT",
        description="Serve a registered env (or a factory import path) to remote clients: each client makes its own "
        "env sessions (task and env.kwargs come from the client). The wire protocol is in docs/remote_envs.md.",
    )
    parser.add_argument("--env", required=True, help="the env to serve: a registered name (vla-rl envs list) or "
                        "package.module:function")  # fmt: skip
    parser.add_argument("--port", type=int, required=True, help="TCP port (0: any free one, printed)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: all)")
    parser.add_argument("--max-sessions", type=int, default=256, help="most envs open at once (default 256)")
    parser.add_argument("--log-every", type=int, default=0, help="print the steps served every N steps (0: never)")
    add_config_dir_argument(parser)
    parser.set_defaults(func=cmd_env_server)
