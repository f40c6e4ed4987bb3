"""Start-up of every Python process the tests start with tests/support on its path: Ray workers (the tests'
Ray instance forwards PYTHONPATH), ``vla-rl`` subprocesses, env servers.

The cyclic garbage collector is off for the first seconds, while the process imports torch, timm and the
policies, and comes back after them with what the imports left frozen (``gc.freeze``): collections during
the imports scan the growing heap again and again, a third of the CPU time of importing a worker's modules.
"""

from __future__ import annotations

import gc
import threading

#: Seconds after start-up when the collector comes back (a worker's imports take a few seconds on 2 busy cores).
IMPORTS_S = 30.0


def _collect_from_now_on() -> None:
    gc.collect()
    gc.freeze()
    gc.enable()


gc.disable()
_timer = threading.Timer(IMPORTS_S, _collect_from_now_on)
_timer.daemon = True
_timer.start()
