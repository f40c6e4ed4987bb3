"""Every named experiment composes, validates, runs with any env, and its rollout window shows the learner
whole episodes."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from envs.registry import resolve
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import config_dir, load_config, validate_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.config import TrainerConfig, section
from vla_rl.stages.rl.experiment import rollout_window, with_rollout_window

EXPERIMENTS = sorted(path.stem for path in (config_dir() / "experiment").glob("*.yaml") if path.stem != "base")
#: Experiments named for one env may pin its settings; every other one must run on any env.
ENV_SPECIFIC = ("robosuite_lift", "metaworld_mt10", "metaworld_mt10_30min")


def _experiment(name: str, *overrides: str):
    cfg = load_config([f"experiment={name}", *overrides])
    validate_config(cfg)
    return cfg


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_named_experiment_composes_and_validates(name):
    cfg = _experiment(name)
    assert cfg.experiment.stages, f"experiment {name} runs no stage"
    assert set(cfg.experiment.stages) <= {"collect", "sft", "rl", "eval"}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_rollout_window_covers_the_longest_episode(name):
    """A PPO iteration resets every env and runs trainer.rollout_steps chunks: an episode longer than that
    never shows its end (nor its success reward) to the learner; a GRPO rollout must hold a whole episode."""
    cfg = _experiment(name)
    if "rl" not in cfg.experiment.stages:
        pytest.skip(f"experiment {name} has no RL stage")
    if name == "robosuite_lift":
        pytest.importorskip("robosuite")
    entry, _ = resolve(str(cfg.env.id))
    kwargs = env_kwargs(cfg.env)
    tasks = tuple(resolve_tasks(cfg.env, entry.tasks))
    longest = max(env_io_spec(entry.name, task, kwargs)["max_episode_steps"] for task in tasks)
    chunk_size = int(cfg.policy.chunk_size)
    steps = cfg.trainer.rollout_steps or rollout_window(longest, chunk_size)  # null: what with_rollout_window sets
    window = steps * chunk_size
    assert window >= longest, (
        f"experiment {name}: trainer.rollout_steps={steps} chunks of {chunk_size} "
        f"= {window} env steps, shorter than the longest episode ({longest} steps)"
    )


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if n not in ENV_SPECIFIC])
def test_an_experiment_takes_any_env_with_its_tasks_and_window(name):
    """`env.id=` replaces the experiment's env wholesale: no tabletop task or option comes along, and the
    derived window follows the point env's 20-step episodes (5 chunks of 4)."""
    cfg = _experiment(name, "env.id=point_env:make", "env.kwargs.image_size=16")
    assert dict(cfg.env) == {"id": "point_env:make", "tasks": "all", "kwargs": {"image_size": 16}}
    if cfg.trainer.rollout_steps is None:
        trainer = with_rollout_window(section(cfg, "trainer", TrainerConfig), "point_env:make",
                                      ("reach_red", "reach_blue"), {"image_size": 16}, int(cfg.policy.chunk_size))  # fmt: skip
        assert trainer.rollout_steps == 5 == rollout_window(20, 4)
    assert rollout_window(40, 4) == 10 and rollout_window(41, 4) == 11 and rollout_window(3, 4) == 1


def test_metaworld_mt10_30min_is_metaworld_mt10_with_its_budget_moved_to_rl():
    """The 30-minute recipe's results were measured as ``experiment=metaworld_mt10`` with these overrides: the named
    experiment must compose to the same config (its name aside), demonstrations' folder included."""
    overrides = ["sft.max_steps=5000", "sft.num_threads=2", "sft.valid_every=500", "trainer.max_env_steps=475000",
                 "trainer.actor_torch_threads=2", "eval.num_workers=2", "run_dir=x"]  # fmt: skip
    measured = OmegaConf.to_container(_experiment("metaworld_mt10", *overrides), resolve=True)
    named = OmegaConf.to_container(_experiment("metaworld_mt10_30min", "run_dir=x"), resolve=True)
    assert named["experiment"].pop("name") == "metaworld_mt10_30min"
    measured["experiment"].pop("name")
    assert named == measured


@pytest.mark.parametrize("iterations", [7, 100])
def test_a_cosine_schedule_spans_the_optimiser_steps_of_the_iterations_asked_for(iterations):
    """Every experiment with a cosine rate reaches its floor at the end of the run, however many iterations."""
    overrides = (f"trainer.iterations={iterations}", "algo.update.epochs=3", "algo.update.num_minibatches=2")
    cosine = [name for name in EXPERIMENTS if _experiment(name).algo.optim.schedule == "cosine"]
    assert cosine, "no experiment has a cosine schedule: nothing to check"
    for name in cosine:
        assert _experiment(name, *overrides).algo.optim.total_steps == iterations * 3 * 2, name
