"""Remote envs: the wire format, the token bucket against its closed form, and an env server on loopback
(a deliberately slow one, a killed one) with the client's retries and reconnection."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from envs.base import InvalidActionError
from envs.registry import make
from envs.remote.client import RemoteConnection, RemoteEnv, RemoteEnvConfig, RemoteEnvError, RemoteEnvLost
from envs.remote.rate_limit import TokenBucket
from envs.remote.server import start_server
from envs.remote.wire import WireError, decode, encode

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------- wire format
def test_the_wire_carries_arrays_as_raw_bytes_with_dtype_and_shape():
    value = {
        "images": {"front": np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)},
        "state": np.array([1.5, -2.0], np.float32),
        "big_endian": np.array([1.0, 2.0], ">f8"),
        "flags": np.array([True, False]),
        "instruction": "pick the red block",
        "nested": [1, 2.5, None, (3, "x")],
        "odd": [float("nan"), float("inf")],
        "scalar": np.float32(0.25),
    }
    message = encode(value)
    (length,) = struct.unpack_from("<I", message)
    header = message[4 : 4 + length].decode()
    assert '"dtype":"|u1","shape":[2,3,3]' in header and '"dtype":">f8"' in header
    assert len(message) == 4 + length + 18 + 8 + 16 + 2  # the arrays' bytes follow the header, nothing else
    assert message[4 + length : 4 + length + 18] == bytes(range(18))
    back = decode(message)
    for key in ("state", "big_endian", "flags"):
        assert back[key].dtype == value[key].dtype and np.array_equal(back[key], value[key])
    assert back["images"]["front"].shape == (2, 3, 3) and np.array_equal(back["images"]["front"], value["images"]["front"])
    back["state"][0] = 7.0  # decoded arrays are writable copies
    assert back["nested"] == [1, 2.5, None, [3, "x"]] and back["scalar"] == 0.25
    assert np.isnan(back["odd"][0]) and back["odd"][1] == float("inf")


def test_the_wire_refuses_what_it_cannot_carry():
    with pytest.raises(WireError, match=r"info\.when: a set cannot travel"):
        encode({"info": {"when": {1, 2}}})
    with pytest.raises(WireError, match=r"a\[1\]: arrays of Python objects"):
        encode({"a": [0, np.array([object()])]})
    with pytest.raises(WireError, match="keys must be strings"):
        encode({1: 2})
    with pytest.raises(WireError, match="header claims"):
        decode(encode({"x": 1})[:-3])


# ---------------------------------------------------------------------------------------------- token bucket
def test_the_token_bucket_waits_as_its_closed_form_says():
    """From a full bucket, request k (0-based) of requests sent at once waits max(0, (k - burst + 1) / rate)."""
    now = [0.0]
    slept = []
    bucket = TokenBucket(rate=10.0, burst=3, clock=lambda: now[0], sleep=slept.append)
    waits = [bucket.acquire() for _ in range(8)]
    np.testing.assert_allclose(waits, [max(0.0, (k - 3 + 1) / 10.0) for k in range(8)])
    assert slept == [w for w in waits if w > 0]
    now[0] = 10.0  # long idle: the bucket refills to its burst, not beyond
    assert [bucket.acquire() for _ in range(3)] == [0.0, 0.0, 0.0] and bucket.acquire() == pytest.approx(0.1)
    with pytest.raises(ValueError, match="rate must be > 0"):
        TokenBucket(0.0)


# ---------------------------------------------------------------------------------------------- a live server
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(env: str, port: int) -> subprocess.Popen:
    """`vla-rl env-server` in its own process, returned once it listens."""
    process = subprocess.Popen([sys.executable, "-m", "vla_rl.cli", "env-server", "--env", env, "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)  # fmt: skip
    line = process.stdout.readline()
    assert "serving env" in line, line + process.stdout.read()
    return process


@pytest.fixture
def in_process_server():
    server, service, port = start_server("tabletop", port=0)
    yield service, port
    server.stop(0)
    service.close_all()


def test_a_served_env_gives_what_the_env_in_this_process_gives(in_process_server):
    service, port = in_process_server
    config = RemoteEnvConfig(f"127.0.0.1:{port}")
    remote = RemoteEnv(RemoteConnection(config), "tabletop/lift", {"image_size": 16, "cameras": ["front"]})
    local = make("tabletop/lift", image_size=16, cameras=("front",))
    try:
        assert remote.env_spec == local.unwrapped.env_spec and remote.action_space == local.action_space
        (obs, info), (local_obs, local_info) = remote.reset(seed=5), local.reset(seed=5)
        assert info["init_state"] == local_info["init_state"]
        rng = np.random.default_rng(0)
        for _ in range(4):
            action = rng.uniform(local.action_space.low, local.action_space.high).astype(np.float32)
            (obs, reward, term, trunc, info), local_step = remote.step(action), local.step(action)
            local_obs = local_step[0]
            assert (reward, term, trunc, info["is_success"]) == tuple(local_step[1:4]) + (local_step[4]["is_success"],)
            assert np.array_equal(obs["images"]["front"], local_obs["images"]["front"]) and obs["state"].dtype == np.float32
            np.testing.assert_array_equal(obs["state"], local_obs["state"])
        with pytest.raises(InvalidActionError, match="NaN"):
            remote.step(np.full(4, np.nan, np.float32))
        with pytest.raises(RemoteEnvError, match="serves env 'tabletop', not 'metaworld'"):
            RemoteEnv(remote.connection, "metaworld/reach-v3")
        assert len(service.sessions) == 1
    finally:
        remote.close()
        local.close()
    assert service.sessions == {}


def test_a_retried_step_is_answered_from_the_stored_reply(in_process_server):
    """A request repeated with the same sequence number (a lost reply) does not step the env twice."""
    service, port = in_process_server
    remote = RemoteEnv(RemoteConnection(RemoteEnvConfig(f"127.0.0.1:{port}")), "tabletop/reach", {"image_size": 8})
    remote.reset(seed=0)
    action = np.full(4, 0.05, np.float32)
    first = remote.connection.call("Step", {"session": remote.session, "seq": 2, "action": action})
    again = remote.connection.call("Step", {"session": remote.session, "seq": 2, "action": action})
    assert service.steps == 1 and np.array_equal(first["observation"]["state"], again["observation"]["state"])
    remote.close()


def test_the_rate_limit_paces_a_slow_server_as_the_closed_form_says():
    """Sequential steps from a full bucket: n steps take (n - burst) / rate + one step's latency when the server is
    faster than the rate, and n x its delay when it is slower (the bucket never waits then)."""
    port = free_port()
    process = serve("slow_point_env:make", port)
    try:
        rate, burst, steps = 40.0, 4, 44
        paced = RemoteConnection(RemoteEnvConfig(f"127.0.0.1:{port}", rate=rate, burst=burst))
        env = RemoteEnv(paced, "slow_point_env:make/reach_red", {"delay_s": 0.005})
        env.reset(seed=0)  # takes a token; the bucket refills while the session warms up
        time.sleep(burst / rate + 0.05)
        action = np.zeros(2, np.float32)
        started = time.perf_counter()
        for _ in range(steps):
            env.step(action)
        elapsed = time.perf_counter() - started
        latency = (elapsed - paced.bucket.waited_s) / steps  # the server's time and the wire's, per step
        predicted = (steps - burst) / rate + latency
        assert abs(elapsed - predicted) / predicted < 0.15, (elapsed, predicted, latency)
        assert elapsed >= (steps - burst) / rate  # the bucket is a hard limit
        assert steps / elapsed == pytest.approx(rate * steps / (steps - burst + rate * latency), rel=0.15)
        slow = RemoteEnv(RemoteConnection(RemoteEnvConfig(f"127.0.0.1:{port}", rate=100.0, burst=1)),
                         "slow_point_env:make/reach_red", {"delay_s": 0.03})  # fmt: skip
        slow.reset(seed=0)
        started = time.perf_counter()
        for _ in range(20):
            slow.step(action)
        elapsed = time.perf_counter() - started
        assert elapsed >= 20 * 0.03 and slow.connection.bucket.waited_s < 0.05, (elapsed, slow.connection.bucket.waited_s)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_killed_server_is_an_env_loss_and_a_restarted_one_is_reconnected():
    port = free_port()
    process = serve("slow_point_env:make", port)
    config = RemoteEnvConfig(f"127.0.0.1:{port}", retries=2, timeout_s=2.0, connect_timeout_s=20.0)
    connection = RemoteConnection(config)
    env = RemoteEnv(connection, "slow_point_env:make/reach_red")
    env.reset(seed=0)
    env.step(np.zeros(2, np.float32))
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    started = time.perf_counter()
    with pytest.raises(RemoteEnvLost, match=r"(UNAVAILABLE|DEADLINE_EXCEEDED) after 3 attempts"):
        env.step(np.zeros(2, np.float32))
    assert time.perf_counter() - started < 3 * 2.0 + 3 and connection.retried == 2
    restarted = serve("slow_point_env:make", port)
    try:
        with pytest.raises(RemoteEnvLost, match="unknown session"):  # the new server never saw it
            env.step(np.zeros(2, np.float32))
        again = RemoteEnv(connection, "slow_point_env:make/reach_red")  # the same channel reconnects
        observation, _ = again.reset(seed=0)
        assert observation["state"].shape == (2,)
        again.close()
    finally:
        restarted.terminate()
        restarted.wait(timeout=30)
    with pytest.raises(RemoteEnvLost, match="no env server answered"):
        RemoteEnv(RemoteConnection(RemoteEnvConfig(f"127.0.0.1:{port}", connect_timeout_s=1.0)), "slow_point_env:make")


def test_bench_env_remote_reports_the_overhead_per_step(in_process_server, capsys):
    from vla_rl.cli import main

    _, port = in_process_server
    assert main(["bench", "env", "--task", "tabletop/reach", "--remote", f"127.0.0.1:{port}", "--steps", "20",
                 "--repeats", "2", "--image-size", "16"]) == 0  # fmt: skip
    import json

    result = json.loads(capsys.readouterr().out)
    assert result["env"] == "tabletop" and result["kwargs"] == {"image_size": 16} and result["repeats"] == 2
    remote, in_env, overhead = (result[k]["median"] for k in ("remote_step_ms", "server_in_env_ms", "overhead_ms_per_step"))
    assert overhead == pytest.approx(remote - in_env, abs=0.01) and overhead > 0 and in_env > 0
    # 2 cameras at 16x16 (1536 bytes of pixels), the state and the rest of the reply
    assert 1536 < result["step_reply_bytes"] < 1536 + 2000


def test_evaluation_envs_in_this_process_step_through_the_server(in_process_server):
    """make_eval_envs(remote=...) builds sessions on the server: the same chunked rollout as local envs."""
    from vla_rl.stages.evaluation import make_eval_envs

    service, port = in_process_server
    kwargs = {"image_size": 16, "cameras": ("front",)}
    remote = make_eval_envs("tabletop", kwargs, ["reach"], 2, seed=3, remote=RemoteEnvConfig(f"127.0.0.1:{port}"))
    local = make_eval_envs("tabletop", kwargs, ["reach"], 2, seed=3)
    try:
        assert all(isinstance(env, RemoteEnv) for env in remote.envs) and len(service.sessions) == 2
        first, local_first = remote.reset(), local.reset()
        np.testing.assert_array_equal(first["images"]["front"], local_first["images"]["front"])
        chunks = np.tile(np.array([0.02, 0.0, -0.01, 1.0], np.float32), (2, 3, 1))
        result, local_result = remote.step(chunks), local.step(chunks)
        np.testing.assert_array_equal(result.observation["state"], local_result.observation["state"])
        np.testing.assert_array_equal(result.steps_executed, local_result.steps_executed)
        assert service.steps == int(result.steps_executed.sum())
    finally:
        remote.close()
        local.close()
