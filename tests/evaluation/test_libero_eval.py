"""`vla-rl eval env=libero_spatial eval.policy=expert`: the official init states in order, per-suite success,
videos. Skipped when LIBERO is not installed (`make libero`)."""

from __future__ import annotations

import json

import pytest

# As in test_eval_command.py: torchvision before any EGL rendering in this process.
import torchvision  # noqa: F401

try:
    import envs.libero  # noqa: F401
except ImportError as error:
    pytest.skip(f"LIBERO is not installed ({error}); `make libero` installs it", allow_module_level=True)

from vla_rl.cli import main


def test_libero_protocol_runs_the_official_init_states_in_order(tmp_path, capsys):
    output = tmp_path / "eval"
    code = main([
        "eval", "env=libero_spatial", "env.tasks=[libero_spatial/0]", "env.kwargs.image_size=64",
        "eval.policy=expert", "eval.episodes_per_task=2", "eval.num_envs=1", "eval.video.episodes_per_task=1",
        "eval.video.grid_envs=0", f"eval.output={output}", f"run_dir={tmp_path}",
    ])  # fmt: skip
    assert code == 0
    info = json.loads((output / "eval_info.json").read_text())
    assert info["settings"]["protocol"] == "libero"
    episodes = info["tasks"]["libero_spatial/0"]["episode_results"]
    assert [e["init_state"] for e in episodes] == [0, 1]
    assert all(e["success"] for e in episodes)  # the scripted expert on these two init states
    suite = info["suites"]["libero_spatial"]
    assert (suite["successes"], suite["episodes"]) == (2, 2)
    assert "suite libero_spatial: success 1.000" in capsys.readouterr().out
    video = output / episodes[0]["video"]
    assert video.is_file() and video.stat().st_size > 1000
