"""Seeds derived from named parts, so that every random draw of a run follows from the run seed and where
the draw happens (iteration, attempt, env, episode), never from how many draws came before in a process."""

from __future__ import annotations

import hashlib
from typing import Any


def derived_seed(*parts: Any) -> int:
    """A 31-bit seed from any parts (stable across processes and Python versions)."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF
