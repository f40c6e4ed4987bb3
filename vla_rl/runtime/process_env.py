"""Process-wide defaults that must be set before simulators or hubs are imported."""

from __future__ import annotations

import ctypes
import os

DEFAULTS = {
    # Headless rendering (PLATFORM_NOTES.md: EGL works here, osmesa is not installed).
    "MUJOCO_GL": "egl",
    "PYOPENGL_PLATFORM": "egl",
    # Never hang on a model hub that cannot be reached; local paths and packages still load.
    "HF_HUB_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "RAY_AUTH_MODE": "disabled",
    # glibc malloc arenas: see limit_malloc_arenas (the worker processes Ray starts read it from here).
    "MALLOC_ARENA_MAX": "2",
}

#: glibc's mallopt parameter number of M_ARENA_MAX (malloc.h).
M_ARENA_MAX = -8


def apply_runtime_defaults() -> None:
    """Set each default unless the user already chose a value."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)


def limit_malloc_arenas() -> bool:
    """Cap this process's glibc malloc arenas at ``MALLOC_ARENA_MAX`` (2 unless set), as the variable would
    have at start-up; False where the C library is not glibc.

    Why: glibc gives threads arenas of their own (up to 8 per core), and with ``MALLOC_TRIM_THRESHOLD_`` set
    high (PLATFORM_NOTES.md) none of them ever returns memory. The driver's in-training evaluation starts a
    video-writer thread each time, and its RSS grew 10-13 MiB per evaluation without a cap, about 1 MiB with
    it (docs/results.md). Call it before threads start: glibc fixes the cap once it makes its ninth arena.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, int(os.environ.get("MALLOC_ARENA_MAX", "2"))))
