"""rover_nav: an external robot env for vla-rl (a differential-drive rover driving to a coloured pad).

Use it by import path: ``rover_nav.env:make``. See docs/new_env_guide.md in vla-rl.
"""
