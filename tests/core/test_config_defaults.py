"""One source per default: the algo, trainer, sft, collect, eval and policy sections take their defaults from
their dataclasses, and the yaml files only override (no value there repeats a default)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from policies.config import PolicyConfig
from vla_rl.config import REPO_ROOT
from vla_rl.config.defaults import policy_defaults, section_defaults
from vla_rl.config.loading import load_config
from vla_rl.stages.collect import CollectConfig
from vla_rl.stages.evaluation.config import EvalConfig
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig, section
from vla_rl.stages.sft.config import SECTION_PATH_KEYS


def leaves(tree: dict, prefix: str = "") -> dict:
    found = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            found.update(leaves(value, f"{prefix}{key}."))
        else:
            found[f"{prefix}{key}"] = value
    return found


GROUP_FILES = sorted(p for group in ("algo", "trainer", "sft", "eval")
                     for p in (REPO_ROOT / "configs" / group).glob("*.yaml"))  # fmt: skip


@pytest.mark.parametrize("path", GROUP_FILES, ids=[f"{p.parent.name}/{p.name}" for p in GROUP_FILES])
def test_group_files_only_override_the_dataclass_defaults(path):
    defaults = leaves(section_defaults()[path.parent.name])
    values = leaves(yaml.safe_load(path.read_text()) or {})
    repeated = {key: value for key, value in values.items() if key in defaults and defaults[key] == value}
    assert not repeated, f"{path} repeats dataclass defaults: {repeated}"
    # advantage_options holds the estimator's keyword arguments (its default is empty); sft names two folders.
    unknown = [k for k in values if k not in defaults and k not in SECTION_PATH_KEYS and "advantage_options." not in k]
    assert not unknown, f"{path}: keys that are no field of the section's dataclass: {unknown}"


def test_every_field_is_in_the_composed_config_and_overridable_without_a_plus():
    cfg = load_config(["algo.update.log_ratio_clamp=10", "trainer.sharding.cpu_offload=true", "sft.valid_every=7"])
    for key, cls in (("algo", AlgoConfig), ("trainer", TrainerConfig), ("collect", CollectConfig), ("eval", EvalConfig)):
        assert set(cfg[key]) == {f.name for f in dataclasses.fields(cls)}
    assert "collect" not in yaml.safe_load((REPO_ROOT / "configs" / "config.yaml").read_text())
    algo, trainer = section(cfg, "algo", AlgoConfig), section(cfg, "trainer", TrainerConfig)
    assert algo.update.log_ratio_clamp == 10 and trainer.sharding.cpu_offload is True and cfg.sft.valid_every == 7
    # The defaults the yaml files used to repeat are the dataclasses' own.
    assert (algo.update.clip_low, algo.update.clip_high, algo.optim.lr) == (0.2, 0.28, 1e-4)
    assert algo.advantage_options == {"gamma": 0.99, "lam": 0.95, "whiten": True}  # ppo.yaml's override
    # A '+' that an older command needed to add such a key now sets it.
    assert load_config(["+algo.update.kl_estimator=k2"]).algo["update"].kl_estimator == "k2"


POLICY_FILES = sorted((REPO_ROOT / "configs" / "policy").glob("*.yaml"))


@pytest.mark.parametrize("path", POLICY_FILES, ids=[p.name for p in POLICY_FILES])
def test_policy_files_only_override_their_policy_dataclass_defaults(path):
    data = yaml.safe_load(path.read_text()) or {}
    node = next((d for d in data.get("defaults", []) if str(d).endswith("_defaults")), "vla_defaults")
    defaults = leaves(policy_defaults()[node])
    if "default" in data.get("defaults", []):  # it starts from default.yaml, which overrides the node already
        parent = yaml.safe_load((path.parent / "default.yaml").read_text())
        defaults.update(leaves({key: value for key, value in parent.items() if key != "defaults"}))
    values = leaves({key: value for key, value in data.items() if key != "defaults"})
    repeated = {key: value for key, value in values.items() if key in defaults and defaults[key] == value}
    assert not repeated, f"{path} repeats dataclass defaults: {repeated}"
    # head.options (flow for the expert VLA) holds the head's own config fields (checked when the head is built)
    unknown = [key for key in values if key not in defaults and not key.startswith(("head.options.", "flow."))]
    assert not unknown, f"{path}: keys that are no field of the policy's dataclass: {unknown}"


def test_every_policy_field_is_in_the_composed_config_and_overridable_without_a_plus():
    cfg = load_config(["policy.rl_vision.feature_dim=32", "policy.normalization.state=min_max"])
    assert set(cfg.policy) == {"factory", *(f.name for f in dataclasses.fields(PolicyConfig))}
    assert (cfg.policy.rl_vision.feature_dim, cfg.policy.normalization.state) == (32, "min_max")
    assert cfg.policy.head.name == "flow"  # default.yaml's override of HeadConfig's gaussian


def test_the_actors_take_torch_threads_unless_given_their_own():
    assert TrainerConfig(torch_threads=3).actor_threads == 3
    assert TrainerConfig(torch_threads=1, actor_torch_threads=2).actor_threads == 2


def test_chunk_size_has_one_default_and_one_check_for_every_built_in_policy():
    from policies.backbones.config import VLMPolicyConfig
    from policies.backbones.expert_vla import ExpertVLAConfig
    from policies.backbones.token_vla import TokenVLAConfig
    from policies.config import ActionChunkConfig

    default = ActionChunkConfig().chunk_size
    for cls in (PolicyConfig, VLMPolicyConfig, TokenVLAConfig, ExpertVLAConfig):
        assert issubclass(cls, ActionChunkConfig)
        assert next(f for f in dataclasses.fields(cls) if f.name == "chunk_size").default == default
        assert "chunk_size" not in cls.__dict__.get("__annotations__", {}), f"{cls.__name__} writes chunk_size again"
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match=f"^chunk_size={bad!r} must be a positive integer$"):
            PolicyConfig(chunk_size=bad)


def test_the_vla_families_declare_the_sections_they_share_once():
    from policies.backbones.config import PrefixedVLAConfig
    from policies.backbones.expert_vla import ExpertVLAConfig
    from policies.backbones.token_vla import TokenVLAConfig

    shared = {f.name for f in dataclasses.fields(PrefixedVLAConfig)}
    assert {"backbone", "value", "normalization", "use_state", "batch_invariant"} <= shared
    for cls in (TokenVLAConfig, ExpertVLAConfig):
        assert issubclass(cls, PrefixedVLAConfig)
        again = shared & set(cls.__dict__.get("__annotations__", {}))
        assert not again, f"{cls.__name__} declares {sorted(again)} again"


def test_the_run_reads_chunk_size_once_from_the_policy_section():
    from vla_rl.config import ConfigError
    from vla_rl.workers.policy_factory import PolicySpec

    cfg = load_config(["policy.chunk_size=3"])
    config = {key: value for key, value in dict(cfg.policy).items() if key != "factory"}
    assert PolicySpec(config, {}, None, str(cfg.policy.factory)).chunk_size == 3
    without = {key: value for key, value in config.items() if key != "chunk_size"}
    with pytest.raises(ValueError, match=r"^'policy.chunk_size'=None: every policy config holds chunk_size"):
        PolicySpec(without, {}, None)
    # a factory of one's own whose yaml forgets chunk_size: refused before any work, not read as some default
    with pytest.raises(ConfigError, match=r"^'policy.chunk_size'=None: every policy config holds chunk_size"):
        load_config(["~policy.chunk_size", f"policy.factory={__name__}:build_any_policy"])


def build_any_policy(config, io_spec, stats):
    """A policy factory without ``validate_policy_config`` (only its import path is checked)."""
    raise AssertionError("not built by the config check")


def test_no_product_code_reads_a_section_raw_with_a_default_of_its_own():
    """A knob's default lives in its dataclass only: no ``cfg.trainer.get("x", default)``-style reads of the typed
    sections, and no second default for ``chunk_size`` (the core reads ``PolicySpec.chunk_size``)."""
    import re

    raw = re.compile(r"\bcfg\.(algo|trainer|sft|collect|eval|record)\.get\(|\.get\(\s*[\"']chunk_size[\"']\s*,")
    found = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
             for package in ("vla_rl", "contract", "policies", "envs", "scripts")
             for path in sorted((REPO_ROOT / package).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if raw.search(line)]  # fmt: skip
    assert not found, found
