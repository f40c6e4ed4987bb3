"""The built-in policies pass the policy conformance kit through their factory, and saved folders name it."""

from __future__ import annotations

import json

import pytest

from policies.checks import run_checks, synthetic_io_spec, synthetic_stats
from policies.factory import DEFAULT_POLICY_FACTORY, import_factory
from policies.hub import load_pretrained

SMALL = {"embedding_dim": 32, "vision": {"backbone_kwargs": {"channels": [8, 8, 8, 8], "stem_width": 8,
                                                             "norm_layer": "groupnorm1"}}}  # fmt: skip


@pytest.mark.parametrize("head", ["gaussian", "flow"])
def test_builtin_heads_pass_the_kit(head):
    options = {"hidden_dim": 32, "num_blocks": 1} if head == "flow" else {}
    run_checks(DEFAULT_POLICY_FACTORY, {**SMALL, "head": {"name": head, "options": options}})


def test_a_folder_saved_before_factories_loads_as_the_default_policy(tmp_path):
    io_spec = synthetic_io_spec(16)
    policy = import_factory(DEFAULT_POLICY_FACTORY)(SMALL, io_spec, synthetic_stats(io_spec))
    folder = policy.save_pretrained(tmp_path / "policy")
    config = json.loads((folder / "config.json").read_text())
    assert config["factory"] == DEFAULT_POLICY_FACTORY
    del config["factory"]
    (folder / "config.json").write_text(json.dumps(config))
    assert type(load_pretrained(folder)).__name__ == "VLAPolicy"


def test_a_bad_factory_is_named():
    with pytest.raises(ValueError, match="must look like 'package.module:function'"):
        import_factory("policies.vla.build_policy")
    with pytest.raises(ImportError, match="has no attribute 'nope'"):
        import_factory("policies.vla:nope")
