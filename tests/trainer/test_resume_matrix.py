"""Every named experiment resumes: stopped after its first checkpoint and resumed, it logs what an
uninterrupted run logs (same seeds, same numbers), and one run survives ``kill -9`` of its driver.

Experiments that warm the critic up first write their first checkpoint at the end of the warm-up, before
the policy has had a gradient: the case that failed with "Missing key in checkpoint state_dict:
optim.state..." before every parameter had Adam state from the start.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from omegaconf import DictConfig, OmegaConf

from envs.registry import resolve
from vla_rl.cli import main
from vla_rl.config import REPO_ROOT, env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.config.tiny import TINY, tiny_overrides  # noqa: F401
from vla_rl.runtime.checkpoint import complete_checkpoints
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import policy_spec_from_config


def distinct_experiments() -> dict[str, DictConfig]:
    """Every file of configs/experiment/ with its composed config, once per composed config (default.yaml only
    names another one), except ``default``: the SIGKILL test below resumes it past a corrupt checkpoint."""
    seen, configs = set(), {}
    for path in sorted((REPO_ROOT / "configs" / "experiment").glob("*.yaml")):
        cfg = load_config([f"experiment={path.stem}", "run_dir=x"])
        composed = OmegaConf.to_yaml(cfg)
        if composed not in seen:
            seen.add(composed)
            configs[path.stem] = cfg
    return {name: cfg for name, cfg in configs.items() if name != "default"}


#: The composed config of each experiment (test_resume_property picks the tabletop ones from them)
EXPERIMENT_CONFIGS = distinct_experiments()
EXPERIMENTS = list(EXPERIMENT_CONFIGS)
VOLATILE = ("time", "timing/", "memory/")  # wall clock and resident memory vary run to run

def metrics_of(rl_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (rl_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(VOLATILE)} for row in rows]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_resumed_past_a_corrupt_checkpoint_equals_an_uninterrupted_run(
    ray_session, tmp_path, experiment
):
    overrides = [*tiny_overrides(experiment), "trainer.iterations=2", "trainer.time_limit_minutes=null"]
    full = tmp_path / "full"
    assert main(["train", *overrides, f"run_dir={full}"]) == 0
    # The same run as if it had crashed while writing its second checkpoint: the latest does not load.
    crashed = tmp_path / "crashed"
    shutil.copytree(full, crashed)
    (crashed / "rl" / "checkpoints" / "iter_000002" / "model_optim" / ".metadata").write_bytes(b"cut short")
    assert main(["train", *overrides, f"run_dir={crashed}", "trainer.resume=true"]) == 0
    checkpoints = crashed / "rl" / "checkpoints"
    assert (checkpoints / "latest").read_text() == "iter_000002"
    assert (checkpoints / "iter_000002.corrupt" / "model_optim" / ".metadata").read_bytes() == b"cut short"
    resumed = metrics_of(crashed / "rl")
    assert [row["step"] for row in resumed] == [1, 2]
    assert resumed == metrics_of(full / "rl")


def saved_policy(overrides: list[str], folder: Path) -> Path:
    """The experiment's policy with seeded random weights, saved as an SFT stage saves its policy."""
    cfg = load_config(overrides)
    entry, _ = resolve(str(cfg.env.id))
    io_spec = env_io_spec(entry.name, resolve_tasks(cfg.env, entry.tasks)[0], env_kwargs(cfg.env))
    policy_spec_from_config(cfg, io_spec, None).build("cpu").save_pretrained(folder)
    return folder


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.end_to_end  # `make test` leaves it out; CI runs it after (`pytest -m end_to_end`)
def test_default_experiment_killed_by_sigkill_past_a_corrupt_checkpoint_resumes_to_equal_an_uninterrupted_run(
    ray_session, tmp_path
):
    """A driver killed with ``kill -9`` while its last checkpoint was being written (a corrupt checkpoint:
    its metadata cut short) takes its Ray processes with it; resumed, the run falls back to the checkpoint
    before and logs what an uninterrupted run logs. RL starts from a saved policy, as after an SFT stage."""
    overrides = [*tiny_overrides("default"), "trainer.iterations=4", "trainer.time_limit_minutes=null"]
    overrides.append(f"trainer.init_policy={saved_policy(overrides, tmp_path / 'init')}")
    assert main(["train", *overrides, f"run_dir={tmp_path / 'full'}"]) == 0

    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "vla_rl.cli", "train", *overrides, f"run_dir={killed}"]
    driver = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    checkpoints = killed / "rl" / "checkpoints"
    deadline = time.monotonic() + 240
    while not (checkpoints / "iter_000002").is_dir() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert driver.poll() is None, "the run ended before it could be killed"
    ray_children = [
        p
        for p in psutil.Process(driver.pid).children(recursive=True)
        if "reaper" not in " ".join(p.cmdline())
    ]
    assert any("raylet" in " ".join(p.cmdline()) for p in ray_children)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in ray_children) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p.name() for p in ray_children if alive(p)], "Ray processes of the killed driver still run"

    newest = complete_checkpoints(checkpoints)[0].name
    assert newest >= "iter_000002"
    (checkpoints / newest / "model_optim" / ".metadata").write_bytes(b"cut short")
    assert main(["train", *overrides, f"run_dir={killed}", "trainer.resume=true"]) == 0
    assert (checkpoints / f"{newest}.corrupt" / "model_optim" / ".metadata").read_bytes() == b"cut short"
    assert (checkpoints / "latest").read_text() == "iter_000004"
    assert metrics_of(killed / "rl") == metrics_of(tmp_path / "full" / "rl")
