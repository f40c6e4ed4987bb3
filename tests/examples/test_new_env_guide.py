"""docs/new_env_guide.md runs as written: every command of its `bash` blocks, verbatim and in order, on
examples/planar_pusher (at the toy sizes of the guide's own QUICK overrides). Fails when the guide drifts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "new_env_guide.md"
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def guide_blocks() -> list[str]:
    return BASH_BLOCK.findall(GUIDE.read_text())


def test_the_guide_walks_the_whole_path():
    """write -> check -> collect -> SFT -> RL from SFT -> eval with videos, each a command of a bash block."""
    commands = "\n".join(guide_blocks())
    for step in ("vla-rl envs check planar_pusher.env:make", "eval.policy=expert", "vla-rl collect", "vla-rl sft",
                 "trainer.init_policy=", "vla-rl eval env=planar_pusher eval.policy=outputs/", "vla-rl plot"):  # fmt: skip
        assert step in commands, f"the guide's commands lack {step!r}"


@pytest.mark.end_to_end  # `make test` leaves it out; CI runs it after (`pytest -m end_to_end`)
def test_every_command_of_the_guide_runs_verbatim(tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")  # the guide runs from the root of a clone
    script = "set -euo pipefail\n" + "\n".join(
        f"echo '>>> guide block {number}'\n{block}" for number, block in enumerate(guide_blocks())
    )
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VLA_RL_CONFIG_PATH")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # `vla-rl` as an activated venv has it
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "all checks passed" in result.stdout
    assert "[rl] trainer.rollout_steps=20: the longest episode (80 env steps) in chunks of 4 actions" in result.stdout
    expert = json.loads((tmp_path / "outputs/pusher/expert/eval_info.json").read_text())
    assert expert["policy"]["kind"] == "expert" and expert["overall"]["success_rate"] == 1.0
    assert (tmp_path / "data/pusher/demos.hdf5").is_file() and (tmp_path / "outputs/pusher/sft/best/config.json").is_file()
    final = json.loads((tmp_path / "outputs/pusher/final/eval_info.json").read_text())
    assert "outputs/pusher_rl/rl/checkpoints/iter_000002/policy" in final["policy"]["resolved_path"]
    assert (tmp_path / "outputs/pusher/final" / final["tasks"]["push"]["videos"]["episodes"][0]).is_file()
    assert (tmp_path / "outputs/pusher_rl/rl/plots/success.png").is_file()
