"""planar_pusher: an external robot env for vla-rl (a 2-link planar arm pushing a puck).

Use it by import path: ``planar_pusher.env:make``. See docs/new_env_guide.md in vla-rl.
"""
