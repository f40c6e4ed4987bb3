"""Every bad config value is one `config error:` line naming the key, with exit status 2, before any work.

The run folder is never created: nothing (collect, SFT, Ray) started before the error.
"""

from __future__ import annotations

import pytest

from vla_rl.cli import main

BAD_VALUES = [
    ("trainer.iterations=abc", "'trainer.iterations'='abc': must be int"),
    ("trainer.iterations=-3", "'trainer.iterations'=-3: must be >= 1"),
    ("trainer.envs_per_stage=0", "'trainer.envs_per_stage'=0: must be >= 1"),
    ("trainer.actor_torch_threads=0", "'trainer.actor_torch_threads'=0: must be >= 1"),
    ("trainer.time_limit_minutes=0", "'trainer.time_limit_minutes'=0: must be > 0"),
    ("trainer.device=tpu", "'trainer.device'='tpu': allowed: auto, cpu, cuda, cuda:N"),
    ("trainer.trackers=[jsonl,foo]", "'trainer.trackers'=['jsonl', 'foo']: allowed: console, jsonl"),
    (
        "trainer.init_policy=/no/such/folder",
        "'trainer.init_policy'='/no/such/folder': must be a save_pretrained",
    ),
    (
        "trainer.sharding.param_dtype=int8",
        "'trainer.sharding.param_dtype'='int8': allowed: float32, bfloat16",
    ),
    ("algo.update.clip_low=-0.1", "'algo.update.clip_low'=-0.1: must be > 0"),
    ("algo.update.dual_clip_c=0.5", "'algo.update.dual_clip_c'=0.5: must be > 1"),
    ("algo.update.epochs=0", "'algo.update.epochs'=0: must be >= 1"),
    ("algo.update.entropy_coef=-1", "'algo.update.entropy_coef'=-1: must be >= 0"),
    ("algo.update.policy_loss=nope", "'algo.update.policy_loss'='nope': allowed: ppo_clip"),
    ("algo.optim.lr=0", "'algo.optim.lr'=0: must be > 0"),
    ("+algo.update.clip_lo=0.1", "'algo.update.clip_lo'=0.1: unknown key; allowed: clip_low, clip_high"),
    ("sft.warmup_steps=-1", "'sft.warmup_steps'=-1: must be >= 0"),
    ("algo.optim.schedule=linear", "'algo.optim.schedule'='linear': allowed: constant, cosine"),
    ("algo.optim.schedule=cosine", "'algo.optim.total_steps'=0: a cosine schedule needs more optimiser steps than "
     "its warmup (0)"),
    ("algo.max_success_rate=1.5", "'algo.max_success_rate'=1.5: must be >= 0 and <= 1"),
    ("algo.advantage_estimator=magic", "'algo.advantage_estimator'='magic': allowed:"),
    ("algo.name=sac", "'algo.name'='sac': allowed: grpo, ppo"),
    ("policy.head.name=nohead", "'policy': unknown action head 'nohead'"),
    ("+policy.head.options.no_such_option=1", "unknown option(s) ['no_such_option'] for action head 'residual'"),
    ("policy.factory=no_such_pkg.mod:make", "'policy.factory'='no_such_pkg.mod:make': cannot import module"),
    ("eval.num_envs=0", "'eval.num_envs'=0: must be >= 1"),
    ("eval.video.size=[128]", "'eval.video.size'=[128]: must be [height, width] of positive integers"),
    ("collect.episodes_per_task=0", "'collect.episodes_per_task'=0: must be >= 1"),
    ("collect.valid_fraction=1.0", "'collect.valid_fraction'=1.0: must be >= 0 and < 1"),
    ("env.tasks=[fly]", "'env.tasks': env 'tabletop' has no task 'fly'"),
    # options that are not implemented (or are ignored) with these settings: refused before any work
    ("algo.filter_groups=true", "'algo.filter_groups'=True: needs groups of envs that share an initial state, which "
     "algo.name='ppo' does not collect; use algo=grpo or set it to false"),
    ("algo.dynamic_sampling=true", "'algo.dynamic_sampling'=True: needs groups of envs that share an initial state"),
    ("trainer.task_sampling.mode=failure trainer.task_sampling.min_envs_per_task=11",
     "'trainer.task_sampling.min_envs_per_task'=11: 32 envs cannot give each of the 3 tasks that many"),
    ("algo.advantage_estimator=rloo", "'algo.group_size'=1: advantage_estimator='rloo' compares envs within a group: "
     "set algo.group_size >= 2"),
]


@pytest.fixture
def no_experiment(monkeypatch):
    """A config the check lets through would start the experiment (minutes of collect, SFT and RL, until
    pytest's timeout): it fails at once instead, so a check that stops refusing a value fails fast."""
    import vla_rl.stages.pipeline as pipeline

    def accepted(cfg):
        raise AssertionError("the config check accepted the config: the experiment started")

    monkeypatch.setattr(pipeline, "run_experiment", accepted)


@pytest.mark.parametrize(("override", "message"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_bad_value_is_one_config_error_line_with_status_2_before_any_stage(
    tmp_path, capsys, no_experiment, override, message
):
    run_dir = tmp_path / "run"
    assert main(["train", *override.split(), f"run_dir={run_dir}"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("config error: ") and "\n" not in error, error
    assert message in error
    assert not run_dir.exists()


@pytest.fixture
def no_stage(monkeypatch):
    """As ``no_experiment``, for checks that run_experiment makes before its first stage."""
    import vla_rl.stages.pipeline as pipeline

    def started(cfg, run_dir, state):
        raise AssertionError("a stage started: the check let the run through")

    for name in pipeline.STAGES:
        monkeypatch.setitem(pipeline.STAGES, name, started)


def test_resume_with_nothing_to_resume_says_so(tmp_path, capsys, no_stage):
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    assert main(["train", "experiment=rl_only", f"run_dir={run_dir}", "trainer.resume=true"]) == 2
    error = capsys.readouterr().err
    assert "'trainer.resume'=true" in error and "holds nothing to resume" in error and str(run_dir) in error
    assert list(run_dir.iterdir()) == []


@pytest.mark.parametrize(("override", "good", "message"), [
    ("algo.optim.lr=0", "algo.optim.lr=1e-4", "'algo.optim.lr'=0: must be > 0"),
    ("algo.optim.critic_lr=-1e-3", "algo.optim.critic_lr=1e-3", "'algo.optim.critic_lr'=-0.001: must be > 0"),
    ("algo.group_size=0", "algo.group_size=1", "'algo.group_size'=0: must be >= 1"),
])  # fmt: skip
def test_the_config_check_itself_refuses_values_that_cannot_train(override, good, message):
    """The check `vla-rl train` runs before any work (``load_config``), called directly: fast whatever it says."""
    from vla_rl.config import ConfigError
    from vla_rl.config.loading import load_config

    with pytest.raises(ConfigError) as refused:
        load_config(["experiment=default", override])
    assert message in str(refused.value)
    assert load_config(["experiment=default", good]).algo  # the same key with a good value passes


def test_a_section_read_into_its_dataclass_holds_the_annotated_types():
    """yaml's ``0`` for a float field arrives as ``0.0`` (its readers need no casts); ints, bools and optional
    floats keep what they are, and a wrong type is still refused."""
    from vla_rl.config import ConfigError, read_section
    from vla_rl.config.loading import load_config
    from vla_rl.stages.collect import CollectConfig
    from vla_rl.stages.evaluation.config import EvalConfig

    cfg = load_config(["collect.noise_std=0", "collect.valid_fraction=0", "eval.expert_noise_std=1"])
    collect = read_section(cfg, "collect", CollectConfig)
    assert (collect.noise_std, collect.valid_fraction, collect.seed) == (0.0, 0.0, 0)
    assert [type(v) for v in (collect.noise_std, collect.valid_fraction, collect.seed, collect.keep_failed)] == [
        float, float, int, bool]
    assert type(read_section(cfg, "eval", EvalConfig).expert_noise_std) is float
    with pytest.raises(ConfigError, match=r"^'collect.noise_std'=True: must be float$"):
        load_config(["collect.noise_std=true"])
