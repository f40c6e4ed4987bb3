"""A token bucket: at most ``rate`` requests per second on average, ``burst`` at once.

The bucket holds up to ``burst`` tokens and gains ``rate`` tokens per second; a request takes one token and
waits until there is one. From a full bucket, ``n >= burst`` requests sent as fast as allowed finish
after ``(n - burst) / rate`` seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """Thread-safe token bucket; ``clock`` and ``sleep`` are replaceable for tests."""

    def __init__(self, rate: float, burst: int = 1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):  # fmt: skip
        if not rate > 0:
            raise ValueError(f"rate must be > 0 requests per second, got {rate}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._updated = clock()
        self._lock = threading.Lock()
        self.waited_s = 0.0  # total time requests spent waiting for a token

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def acquire(self) -> float:
        """Take one token, waiting for it if the bucket is empty; returns the seconds waited."""
        with self._lock:
            now = self._clock()
            self._refill(now)
            self._tokens -= 1.0  # may go negative: the debt is this request's wait, queued behind earlier ones
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
            self.waited_s += wait
        if wait > 0:
            self._sleep(wait)
        return wait
