"""An experiment that chooses a policy chooses its head: `policy=P` on the command line keeps that head or names the
one to train, so that the head a run prints and trains is the one its experiment's name says."""

from __future__ import annotations

import pytest

from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config

VLM = ["policy=vlm", "policy.backbone.source=/tmp/any_vlm_folder"]


def test_a_policy_file_that_brings_another_head_is_refused_naming_both():
    with pytest.raises(ConfigError) as error:
        load_config(["experiment=gaussian_ppo", *VLM])
    assert str(error.value) == (
        "experiment=gaussian_ppo trains the head 'gaussian' (its policy=gaussian), but policy=vlm brings the head "
        "'flow': the run would train 'flow' under gaussian_ppo's name and settings. Say which head to train: "
        "policy.head.name=gaussian (the experiment's), or policy.head.name=flow"
    )


@pytest.mark.parametrize("head", ["gaussian", "flow"])
def test_naming_the_head_trains_that_head_under_the_experiment(head):
    cfg = load_config(["experiment=gaussian_ppo", *VLM, f"policy.head.name={head}"])
    assert cfg.policy.head.name == head and cfg.policy.factory == "policies.backbones.vlm_policy:build_policy"
    assert cfg.experiment.name == "gaussian_ppo" and cfg.policy.value.detach_input  # the experiment's policy keys


@pytest.mark.parametrize(
    ("overrides", "head"),
    [
        (["experiment=rl_only", "policy=flow_residual"], "residual"),  # rl_only chooses no policy: policy= does
        (["experiment=flow_sde_ppo", "policy=flow_noise"], "flow"),  # the same head, other options: a comparison
        (["experiment=gaussian_ppo", "policy=gaussian"], "gaussian"),
        (["experiment=gaussian_ppo"], "gaussian"),
    ],
)
def test_policy_choices_that_keep_the_head_or_where_the_experiment_chooses_none_compose(overrides, head):
    assert load_config(overrides).policy.head.name == head
