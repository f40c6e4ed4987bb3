"""Memory does not grow across soft resets (robosuite's hard reset leaks 1.4-2.1 GB per 20)."""

from __future__ import annotations

from pathlib import Path

from envs.registry import make


def _resident_megabytes() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096 / 2**20


def test_rss_is_flat_over_200_resets_with_a_camera():
    env = make("robosuite/Lift", image_size=32, cameras=("agentview",))
    try:
        for seed in range(20):  # warm up: renderer, numba, allocator pools
            env.reset(seed=seed)
            env.step(env.action_space.sample())
        before = _resident_megabytes()
        for seed in range(200):  # each reset renders the camera and rebuilds the controllers
            env.reset(seed=seed)
        growth = _resident_megabytes() - before
    finally:
        env.close()
    # One leaked model, data or GL context per reset would add several MB each: 200 of them, GBs.
    assert growth < 20.0, f"RSS grew by {growth:.1f} MB over 200 resets"
