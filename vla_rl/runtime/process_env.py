"""Process-wide defaults that must be set before simulators or hubs are imported."""

from __future__ import annotations

import os

DEFAULTS = {
    # Headless rendering (PLATFORM_NOTES.md: EGL works here, osmesa is not installed).
    "MUJOCO_GL": "egl",
    "PYOPENGL_PLATFORM": "egl",
    # Never hang on a model hub that cannot be reached; local paths and packages still load.
    "HF_HUB_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "RAY_AUTH_MODE": "disabled",
}


def apply_runtime_defaults() -> None:
    """Set each default unless the user already chose a value."""
    for key, value in DEFAULTS.items():
        os.environ.setdefault(key, value)
