"""The env server: any registered env (or factory import path) served over gRPC to remote env clients.

Protocol (gRPC service ``vla_rl.RemoteEnv``, unary calls whose request and reply bodies are messages of
:mod:`envs.remote.wire`, no protobuf schema):

============  ========================================================  ==========================================
method        request                                                   reply
============  ========================================================  ==========================================
``Ping``      ``{}``                                                    ``{"env": served env, "sessions": n}``
``Make``      ``{"env": "NAME[/TASK]", "kwargs": {...}}``               ``{"session", "spec", "action_low",
                                                                        "action_high", "supports_skipping_images"}``
``Reset``     ``{"session", "seq", "seed", "options"}``                 ``{"observation", "info"}``
``Step``      ``{"session", "seq", "action", "skip_images"}``           ``{"observation", "reward", "terminated",
                                                                        "truncated", "info"}``
``Observe``   ``{"session"}``                                           ``{"observation"}``
``Close``     ``{"session"}``                                           ``{}``
============  ========================================================  ==========================================

Every reply also holds ``server_s``, the seconds the server spent in the env for it.
``seq`` numbers a session's resets and steps: a request that repeats the last ``seq`` (a client retrying after
a lost reply) gets the stored reply instead of stepping twice. Errors are gRPC status codes with the error as
details: ``NOT_FOUND`` (unknown session: the server restarted), ``PERMISSION_DENIED`` (an env this server
does not serve), ``INVALID_ARGUMENT`` (a bad message or an ``InvalidActionError``), ``INTERNAL`` (the env raised).
Every env call runs on one thread, the one that built the env (renderers are bound to their thread).
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent import futures
from dataclasses import asdict, dataclass
from typing import Any

import grpc
import numpy as np

from envs.base import InvalidActionError
from envs.registry import make, resolve
from envs.remote.protocol import CHANNEL_OPTIONS, METHODS, SERVICE
from envs.remote.wire import WireError, decode, encode


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


@dataclass
class _Session:
    env: Any
    last_seq: int = -1
    last_reply: bytes = b""


class EnvServer:
    """Serves the env ``env_id`` (a registry name or a factory import path; clients choose task and kwargs)."""

    def __init__(self, env_id: str, max_sessions: int = 256, log_every: int = 0):
        entry, _ = resolve(env_id)  # raises for an unknown env, before the port opens
        self.env_name = entry.name
        self.max_sessions = max_sessions
        self.sessions: dict[str, _Session] = {}
        self._ids = itertools.count(1)
        self.steps = 0
        self.log_every = log_every  # print "served N steps" every that many steps (0: never)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ one method per RPC
    def ping(self, request: dict) -> dict:
        return {"env": self.env_name, "sessions": len(self.sessions)}

    def make(self, request: dict) -> dict:
        env_id = str(request.get("env", ""))
        name = env_id.partition("/")[0]
        if name != self.env_name:
            raise _Abort(grpc.StatusCode.PERMISSION_DENIED, f"this server serves env {self.env_name!r}, not {name!r}")
        if len(self.sessions) >= self.max_sessions:
            raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.max_sessions} sessions are open; close some")
        env = make(env_id, **dict(request.get("kwargs") or {}))
        base = env.unwrapped
        session = f"s{next(self._ids)}"
        self.sessions[session] = _Session(env)
        return {
            "session": session,
            "spec": asdict(base.env_spec),
            "action_low": np.asarray(env.action_space.low),
            "action_high": np.asarray(env.action_space.high),
            "supports_skipping_images": bool(getattr(base, "supports_skipping_images", False)),
        }

    def reset(self, request: dict) -> dict:
        env = self._session(request).env
        observation, info = env.reset(seed=request.get("seed"), options=request.get("options") or None)
        return {"observation": observation, "info": info}

    def step(self, request: dict) -> dict:
        env = self._session(request).env
        base = env.unwrapped
        skipping = bool(request.get("skip_images")) and getattr(base, "supports_skipping_images", False)
        base.skip_images = skipping
        try:
            observation, reward, terminated, truncated, info = env.step(np.asarray(request["action"]))
        finally:
            if skipping:
                base.skip_images = False
        self.steps += 1
        if self.log_every and self.steps % self.log_every == 0:
            print(f"served {self.steps} steps, {len(self.sessions)} sessions open", flush=True)
        return {"observation": observation, "reward": float(reward), "terminated": bool(terminated),
                "truncated": bool(truncated), "info": info}  # fmt: skip

    def observe(self, request: dict) -> dict:
        return {"observation": self._session(request).env.unwrapped.observe()}

    def close(self, request: dict) -> dict:
        session = self.sessions.pop(str(request.get("session")), None)
        if session is not None:
            session.env.close()
        return {}

    def close_all(self) -> None:
        for session in list(self.sessions):
            self.close({"session": session})

    def _session(self, request: dict) -> _Session:
        session = self.sessions.get(str(request.get("session")))
        if session is None:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"unknown session {request.get('session')!r} (the server restarted "
                         "or the session was closed); make the env again")  # fmt: skip
        return session

    # ------------------------------------------------------------------ dispatch
    def handle(self, method: str, body: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:  # one env call at a time, whatever gRPC's thread pool does
            try:
                request = decode(body)
                if not isinstance(request, dict):
                    raise WireError("a request must be a dict")
                sequenced = method in ("Reset", "Step")
                if sequenced:
                    session = self._session(request)
                    if int(request.get("seq", -2)) == session.last_seq:
                        return session.last_reply  # a retry of a request already served
                started = time.perf_counter()
                reply = getattr(self, method.lower())(request)
                reply["server_s"] = time.perf_counter() - started  # the env's share of the request's latency
                reply = encode(reply)
                if sequenced:
                    session.last_seq, session.last_reply = int(request.get("seq", -1)), reply
                return reply
            except _Abort as abort:
                context.abort(abort.code, abort.details)
            except (WireError, InvalidActionError, KeyError) as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{type(error).__name__}: {error}")
            except Exception as error:  # noqa: BLE001 - the env's own failure goes back to the client
                context.abort(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")
        raise AssertionError("unreachable: context.abort raises")


def start_server(env_id: str, host: str = "127.0.0.1", port: int = 0, max_sessions: int = 256,
                 log_every: int = 0) -> tuple[grpc.Server, EnvServer, int]:  # fmt: skip
    """Start serving ``env_id`` on ``host:port`` (0: a free port); returns the gRPC server, the env server and the port.

    Raises:
        RuntimeError: the port cannot be bound.
    """
    service = EnvServer(env_id, max_sessions, log_every)
    # One worker thread: every env is built and stepped on the same thread (see the module docstring).
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), options=CHANNEL_OPTIONS)
    handlers = {
        method: grpc.unary_unary_rpc_method_handler(
            lambda body, context, method=method: service.handle(method, body, context)
        )
        for method in METHODS
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as error:
        raise RuntimeError(f"cannot listen on {host}:{port}: {error}") from None
    if bound == 0:
        raise RuntimeError(f"cannot listen on {host}:{port} (in use?)")
    server.start()
    return server, service, bound
