"""SFT trains a policy of one's own whose config is a plain dict, and names a save_pretrained that returns nothing."""

from __future__ import annotations

import json

import pytest
from conftest import ENV_KWARGS

from policies.factory import PolicyProtocolError
from policies.hub import load_pretrained
from vla_rl.stages.sft.training import SFTConfig, run_sft

CONFIG = SFTConfig(max_steps=4, batch_size=8, learning_rate=1e-3, warmup_steps=1, valid_every=2, log_every=2,
                   show_progress=False, num_threads=1)  # fmt: skip


def test_a_dict_config_policy_trains_through_sft_and_saves_its_dict(tiny_dataset, tmp_path):
    result = run_sft({"factory": "dict_policy:make", "chunk_size": 3}, "tabletop", ENV_KWARGS, tiny_dataset, tmp_path,
                     CONFIG, seed=0)  # fmt: skip
    assert result.num_steps == 4 and all(loss == loss for loss in result.train_losses)
    saved = json.loads((result.best_dir / "config.json").read_text())
    assert saved["factory"] == "dict_policy:make" and saved["policy"] == {"chunk_size": 3, "hidden_dim": 16}
    policy = load_pretrained(result.policy_dir)
    assert type(policy).__name__ == "DictConfigPolicy" and isinstance(policy.config, dict)


def test_a_save_pretrained_that_returns_none_is_named_where_sft_saves(tiny_dataset, tmp_path):
    with pytest.raises(PolicyProtocolError, match=r"SavesWithoutReturning.save_pretrained\('.*/best'\) returned None; "
                                                  r"it must return the folder it wrote"):  # fmt: skip
        run_sft({"factory": "dict_policy:make_saving_without_return", "chunk_size": 2}, "tabletop", ENV_KWARGS, tiny_dataset, tmp_path,
                CONFIG, seed=0)  # fmt: skip
