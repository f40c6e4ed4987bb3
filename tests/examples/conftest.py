"""Make the example packages importable as a user's installed packages would be (no framework edits)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PACKAGES = [str(EXAMPLES / name) for name in ("planar_pusher", "rover_nav", "pooled_pixels_policy")]
for package in PACKAGES:
    if package not in sys.path:
        sys.path.insert(0, package)
# ...and in the processes they start (Ray workers, `vla-rl` subprocesses inherit the environment, not sys.path).
os.environ["PYTHONPATH"] = os.pathsep.join([*PACKAGES, *(p for p in [os.environ.get("PYTHONPATH", "")] if p)])

