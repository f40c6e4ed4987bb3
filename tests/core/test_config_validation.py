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
]


@pytest.mark.parametrize(("override", "message"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_bad_value_is_one_config_error_line_with_status_2_before_any_stage(
    tmp_path, capsys, override, message
):
    run_dir = tmp_path / "run"
    assert main(["train", override, f"run_dir={run_dir}"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("config error: ") and "\n" not in error, error
    assert message in error
    assert not run_dir.exists()


def test_resume_with_nothing_to_resume_says_so(tmp_path, capsys):
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    assert main(["train", "experiment=rl_only", f"run_dir={run_dir}", "trainer.resume=true"]) == 2
    error = capsys.readouterr().err
    assert "'trainer.resume'=true" in error and "holds nothing to resume" in error and str(run_dir) in error
    assert list(run_dir.iterdir()) == []
