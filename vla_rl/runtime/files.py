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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.parent / f".{path.name}.tmp-{os.getpid()}"
    staging.write_text(json.dumps(document, indent=2, sort_keys=sort_keys, default=default))
    os.replace(staging, path)
    return path
