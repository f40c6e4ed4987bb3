"""Remote env clients: a protocol env (:class:`envs.base.RobotEnv`) whose simulator runs in an env server.

:class:`RemoteEnv` forwards ``reset``, ``step``, ``observe`` and ``close`` to a session of an env server
(:mod:`envs.remote.server`). Every request that simulates (reset, step, observe) first takes a token from
the process's :class:`~envs.remote.rate_limit.TokenBucket` for that server, so that all the envs of a process
together stay within ``rate`` requests per second. A request that fails because the server is unreachable or
slow (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``RESOURCE_EXHAUSTED``) is retried ``retries`` times with
exponential backoff (each attempt waits up to ``timeout_s`` for the channel to connect and the reply to come), with the same sequence number (the server answers a repeat from its stored reply). gRPC
reconnects the channel by itself. A server that lost the session (it restarted) or stays unreachable raises
:class:`RemoteEnvLost`: to the trainer that is an env crash, and the env worker is replaced (its new envs
wait up to ``connect_timeout_s`` for the server to come back).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from envs.base import EnvSpec, InvalidActionError, RobotEnv, make_observation_space
from envs.remote.protocol import CHANNEL_OPTIONS, METHODS, SERVICE
from envs.remote.rate_limit import TokenBucket
from envs.remote.wire import decode, encode


class RemoteEnvError(RuntimeError):
    """The remote env raised, or refused a request; the message is the server's."""


class RemoteEnvLost(RemoteEnvError):
    """The server is gone or forgot the session: the env must be made again (an env crash to the trainer)."""


@dataclass(frozen=True)
class RemoteEnvConfig:
    """Where the env server is and how to talk to it (``env.remote*`` in the config).

    Attributes:
        address: ``HOST:PORT`` of a ``vla-rl env-server``.
        rate: requests (reset, step, observe) per second allowed to this process; None: no limit.
        burst: requests that may go at once from a full bucket.
        timeout_s: deadline of one request.
        retries: how often a request that found the server unreachable or slow is sent again.
        connect_timeout_s: how long making an env waits for the server to answer.
    """

    address: str
    rate: float | None = None
    burst: int = 1
    timeout_s: float = 30.0
    retries: int = 3
    connect_timeout_s: float = 60.0

    def __post_init__(self):
        host, sep, port = self.address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"remote env address {self.address!r} must look like HOST:PORT, e.g. 127.0.0.1:50051")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(f"remote env rate must be > 0 requests per second or None, got {self.rate}")
        if self.burst < 1 or self.retries < 0 or not self.timeout_s > 0 or not self.connect_timeout_s > 0:
            raise ValueError(f"remote env settings out of range: burst {self.burst} >= 1, retries {self.retries} >= 0, "
                             f"timeout_s {self.timeout_s} > 0, connect_timeout_s {self.connect_timeout_s} > 0")  # fmt: skip


RETRIED_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED")


class RemoteConnection:
    """One channel to an env server, shared by the envs of a process, with the process's token bucket."""

    def __init__(self, config: RemoteEnvConfig):
        import grpc

        self.config = config
        options = [*CHANNEL_OPTIONS, ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                   ("grpc.max_reconnect_backoff_ms", 1000)]  # fmt: skip
        self.channel = grpc.insecure_channel(config.address, options=options)
        self._calls = {method: self.channel.unary_unary(f"/{SERVICE}/{method}") for method in METHODS}
        self.bucket = TokenBucket(config.rate, config.burst) if config.rate else None
        self.requests = 0
        self.retried = 0
        self.server_seconds = 0.0  # time the server spent in the env, summed over the replies

    def call(self, method: str, request: dict[str, Any], paced: bool = False, retries: int | None = None,
             timeout_s: float | None = None) -> dict[str, Any]:  # fmt: skip
        """Send one request and return the decoded reply.

        Raises:
            RemoteEnvLost: the server is unreachable after the retries, or lost the session.
            InvalidActionError: the env refused the action.
            RemoteEnvError: the env raised (the server's message).
        """
        import grpc

        body = encode(request)
        retries = self.config.retries if retries is None else retries
        for attempt in range(retries + 1):
            if paced and self.bucket is not None:
                self.bucket.acquire()
            self.requests += 1
            try:
                # wait_for_ready: a call waits (within its deadline) for the channel to (re)connect instead of
                # failing at once while gRPC backs off between connection attempts.
                reply = decode(self._calls[method](body, timeout=timeout_s or self.config.timeout_s, wait_for_ready=True))
                self.server_seconds += float(reply.pop("server_s", 0.0))
                return reply
            except grpc.RpcError as error:
                code, details = error.code(), error.details() or ""
                if code.name in RETRIED_CODES and attempt < retries:
                    self.retried += 1
                    time.sleep(min(2.0, 0.1 * 2**attempt))
                    continue
                where = f"env server {self.config.address}, {method}"
                if code.name in RETRIED_CODES:
                    raise RemoteEnvLost(f"{where}: {code.name} after {retries + 1} attempts: {details}") from None
                if code == grpc.StatusCode.NOT_FOUND:
                    raise RemoteEnvLost(f"{where}: {details}") from None
                if code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("InvalidActionError"):
                    raise InvalidActionError(details.partition(": ")[2]) from None
                raise RemoteEnvError(f"{where}: {code.name}: {details}") from None
        raise AssertionError("unreachable")

    def wait_for_server(self) -> dict[str, Any]:
        """Ping until the server answers, for at most ``connect_timeout_s``; returns its reply.

        Raises:
            RemoteEnvLost: no answer in time.
        """
        deadline = time.monotonic() + self.config.connect_timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                return self.call("Ping", {}, retries=0, timeout_s=max(0.1, min(left, 5.0)))
            except RemoteEnvLost as error:
                if time.monotonic() + 0.2 >= deadline:
                    raise RemoteEnvLost(f"no env server answered at {self.config.address} within "
                                        f"{self.config.connect_timeout_s:g} s: {error}. Start one with `vla-rl "
                                        "env-server --env NAME --port PORT`") from None  # fmt: skip
                time.sleep(0.2)

    def close(self) -> None:
        self.channel.close()


_CONNECTIONS: dict[RemoteEnvConfig, RemoteConnection] = {}
_CONNECTIONS_LOCK = threading.Lock()


def connection_to(config: RemoteEnvConfig) -> RemoteConnection:
    """The process's connection (and token bucket) for ``config``, made on first use."""
    with _CONNECTIONS_LOCK:
        if config not in _CONNECTIONS:
            _CONNECTIONS[config] = RemoteConnection(config)
        return _CONNECTIONS[config]


class RemoteEnv(RobotEnv):
    """A protocol env whose simulation runs in a session of an env server."""

    def __init__(self, connection: RemoteConnection, env_id: str, kwargs: dict[str, Any] | None = None):
        self.connection = connection
        self.env_id = env_id
        connection.wait_for_server()
        reply = connection.call("Make", {"env": env_id, "kwargs": dict(kwargs or {})})
        self.session = reply["session"]
        spec = dict(reply["spec"])
        for key in ("tasks", "camera_names", "image_size", "action_low", "action_high", "action_names"):
            spec[key] = tuple(spec[key])
        self.env_spec = EnvSpec(**spec)
        self.observation_space = make_observation_space(self.env_spec.camera_names, self.env_spec.image_size,
                                                        self.env_spec.state_dim)  # fmt: skip
        low, high = np.asarray(reply["action_low"]), np.asarray(reply["action_high"])
        self.action_space = gym.spaces.Box(low, high, dtype=low.dtype)
        self.supports_skipping_images = bool(reply["supports_skipping_images"])
        self.skip_images = False
        self._seq = 0
        self._closed = False

    @property
    def tasks(self) -> tuple[str, ...]:
        return self.env_spec.tasks

    def _sequenced(self, method: str, request: dict[str, Any]) -> dict[str, Any]:
        self._seq += 1
        return self.connection.call(method, {"session": self.session, "seq": self._seq, **request}, paced=True)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        reply = self._sequenced("Reset", {"seed": seed, "options": dict(options or {})})
        if options and options.get("task"):
            self.env_spec = EnvSpec(**{**self.env_spec.__dict__, "task": str(options["task"])})
        return reply["observation"], reply["info"]

    def step(self, action: Any):
        reply = self._sequenced("Step", {"action": np.asarray(action), "skip_images": bool(self.skip_images)})
        return reply["observation"], reply["reward"], reply["terminated"], reply["truncated"], reply["info"]

    def observe(self) -> dict[str, Any]:
        return self.connection.call("Observe", {"session": self.session}, paced=True)["observation"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:  # a server that is gone has closed the session already
            self.connection.call("Close", {"session": self.session}, retries=0, timeout_s=2.0)
        except RemoteEnvError:
            pass


#: The import path env workers build remote envs with (:func:`worker_factory`).
REMOTE_ENV_FACTORY = "envs.remote.client:make_remote_env"


def make_remote_env(env_id: str, remote: RemoteEnvConfig | dict[str, Any], **kwargs: Any) -> RemoteEnv:
    """``make(env_id, **kwargs)`` on the env server of ``remote`` (the signature of :func:`envs.registry.make`)."""
    config = remote if isinstance(remote, RemoteEnvConfig) else RemoteEnvConfig(**remote)
    return RemoteEnv(connection_to(config), env_id, kwargs)


def worker_factory(remote: RemoteEnvConfig | None, default: str, processes: int = 1) -> tuple[str, dict[str, Any]]:
    """``(env factory import path, options)`` for env processes: ``default`` without a remote, else the remote
    factory with ``remote``'s settings, its rate shared among ``processes`` (each has its own token bucket)."""
    if remote is None:
        return default, {}
    settings = asdict(remote)
    if remote.rate is not None:
        settings["rate"] = remote.rate / max(1, processes)
    return REMOTE_ENV_FACTORY, {"remote": settings}
