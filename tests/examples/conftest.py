"""Make the example package importable as a user's installed package would be (no framework edits)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "planar_pusher")
if EXAMPLE not in sys.path:
    sys.path.insert(0, EXAMPLE)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (EXAMPLE, os.environ.get("PYTHONPATH", "")) if p)
