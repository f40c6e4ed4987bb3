"""Writing a file so that a crash never leaves half of it: a temporary name in the same folder, then a rename."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_json_atomic(path: str | Path, document: Any, *, sort_keys: bool = False,
                      default: Callable[[Any], Any] | None = None) -> Path:  # fmt: skip
    """Write ``document`` as JSON (indent 2) to ``path``, creating its folder; returns ``path``.

    ``default``: how to write values JSON has no type for (``json.dumps``'s); without it they raise TypeError.
    """
    text = json.dumps(document, indent=2, sort_keys=sort_keys, default=default)
    return write_atomic(path, lambda staging: staging.write_text(text))


def write_atomic(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """``write(staging)`` writes the file at a temporary name beside ``path`` (its folder created), which then
    replaces ``path``; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.parent / f".{path.name}.tmp-{os.getpid()}"
    write(staging)
    os.replace(staging, path)
    return path
