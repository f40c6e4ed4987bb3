"""`pip install -e examples/planar_pusher examples/pooled_pixels_policy` alone makes `env=planar_pusher` and
`policy=pooled_pixels` work: the packages are installed into a fresh venv (which sees the test venv's packages
through a .pth file, so nothing is downloaded), and `vla-rl` runs there without the packages on PYTHONPATH and
without --config-dir. PYTHONPATH holds only this checkout of vla-rl itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory) -> Path:
    """The python of a venv in which the two example packages are pip-installed (editable, no dependencies)."""
    root = tmp_path_factory.mktemp("plugin_venv")
    venv.EnvBuilder(with_pip=False).create(root)
    site = next((root / "lib").glob("python3*/site-packages"))
    shared = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_vla_rl_test_venv.pth").write_text("\n".join(sorted(shared)) + "\n")
    python = root / "bin" / "python"
    for package in ("planar_pusher", "pooled_pixels_policy"):
        subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e",
                        str(EXAMPLES / package)], check=True, capture_output=True, timeout=300)  # fmt: skip
    return python


def run_cli(python: Path, *arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VLA_RL_CONFIG_PATH")}
    environment["PYTHONPATH"] = str(REPO)  # vla-rl itself (this checkout); the plug-ins come from the venv
    return subprocess.run([python, "-m", "vla_rl.cli", *arguments], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=500)  # fmt: skip


def test_the_installed_examples_are_listed_with_their_package(plugin_python, tmp_path):
    assert sys.executable != str(plugin_python)
    envs = run_cli(plugin_python, "envs", "list", cwd=tmp_path)
    assert envs.returncode == 0, envs.stderr
    assert "planar_pusher [planar-pusher 0.1.0]:" in envs.stdout and "  planar_pusher/reach" in envs.stdout
    policies = run_cli(plugin_python, "policies", "list", cwd=tmp_path)
    assert policies.returncode == 0, policies.stderr
    assert "  pooled_pixels [pooled-pixels-policy 0.1.0]" in policies.stdout
    assert "  pooled_pixels = pooled_pixels_policy.policy:make [pooled-pixels-policy 0.1.0]" in policies.stdout


def test_env_and_policy_by_name_train_after_pip_install_alone(plugin_python, tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(
        plugin_python, "train", "env=planar_pusher", "env.kwargs.image_size=16", "experiment=gaussian_ppo",
        "policy=pooled_pixels", "policy.hidden_dims=[32]", f"run_dir={run_dir}", f"collect.output={tmp_path / 'demos'}",
        "experiment.stages=[collect,sft,rl]", "collect.episodes_per_task=2", "sft.max_steps=2", "sft.valid_every=2",
        "sft.show_progress=false", "trainer.iterations=1", "trainer.envs_per_stage=2", "trainer.num_stages=1",
        "trainer.rollout_steps=3", "trainer.trackers=[jsonl]", "trainer.checkpoint_every=1",
        "algo.critic_warmup_iterations=0", "algo.update.epochs=1", "algo.update.num_minibatches=1", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    config = (run_dir / "config.yaml").read_text()
    assert "id: planar_pusher.env:make" in config and "factory: pooled_pixels_policy.policy:make" in config
    policy = run_dir / "rl" / "checkpoints" / "iter_000001" / "policy"
    assert json.loads((policy / "config.json").read_text())["factory"] == "pooled_pixels_policy.policy:make"
