"""Robot environments of vla-rl, behind one protocol (envs.base) and one registry (envs.registry)."""

import os

# mujoco picks its GL backend when first imported; headless EGL unless the user chose another.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
