"""Training against a remote env: `vla-rl env-server` on loopback, env workers with env.remote=HOST:PORT paced by
the rate limit; the server is killed (SIGKILL) in the second iteration and started again, and the run goes on:
the lost envs are an env crash, their worker is replaced and reconnects."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tiny_training import TINY_TRAINING

from vla_rl.cli import main
from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "vla_rl.cli", "env-server", "--env", "tabletop", "--port", str(port),
                                "--log-every", "4"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)  # fmt: skip
    line = process.stdout.readline()
    assert "serving env 'tabletop'" in line, line + process.stdout.read()
    return process


def test_remote_env_keys_are_checked_before_any_work():
    cfg = load_config(["env.remote=127.0.0.1:5000", "env.remote_rate=50", "env.remote_burst=5"])
    from vla_rl.config import remote_env_config

    remote = remote_env_config(cfg.env)
    assert (remote.address, remote.rate, remote.burst, remote.retries) == ("127.0.0.1:5000", 50, 5, 3)
    assert remote_env_config(load_config([]).env) is None
    with pytest.raises(ConfigError, match=r"unknown config key 'env.remote_rat'; remote env keys: env.remote, env.remote_rate"):
        load_config(["env.remote=127.0.0.1:5000", "env.remote_rat=5"])
    with pytest.raises(ConfigError, match=r"env.remote_rate set without 'env.remote=HOST:PORT'"):
        load_config(["env.remote_rate=5"])
    with pytest.raises(ConfigError, match=r"'localhost' must look like HOST:PORT"):
        load_config(["env.remote=localhost"])
    with pytest.raises(ConfigError, match=r"rate must be > 0"):
        load_config(["env.remote=127.0.0.1:1", "env.remote_rate=0"])


def test_two_iterations_against_a_rate_limited_server_that_is_killed(ray_session, tmp_path):
    port = free_port()
    servers = [serve(port)]
    killed = threading.Event()

    def kill_in_the_second_iteration() -> None:
        """The first iteration steps at most 2 stages x 2 envs x 3 chunks x 4 actions = 48 times."""
        for line in servers[0].stdout:
            if line.startswith("served ") and int(line.split()[1]) >= 60:
                os.kill(servers[0].pid, signal.SIGKILL)
                servers[0].wait(timeout=30)
                killed.set()
                servers.append(serve(port))
                return

    watcher = threading.Thread(target=kill_in_the_second_iteration, daemon=True)
    watcher.start()
    run_dir = tmp_path / "run"
    try:
        code = main(["train", *TINY_TRAINING, f"run_dir={run_dir}", "trainer.iterations=2", f"env.remote=127.0.0.1:{port}",
                     "env.remote_rate=150", "env.remote_burst=4", "env.remote_timeout_s=3", "env.remote_retries=1"])  # fmt: skip
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)
    assert code == 0 and killed.is_set()
    rows = [json.loads(line) for line in (run_dir / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert rows[0]["train/env_restarts"] == 0.0 and rows[1]["train/env_restarts"] >= 1.0
    assert all(row["train/env_steps"] > 0 for row in rows)
