"""The run plan: the composed config read once into typed sections (:func:`read_run_plan`), and the plan of each
stage taken from it (:meth:`RunPlan.collect_plan`, :meth:`RunPlan.sft_plan`, :meth:`RunPlan.eval_plan`; RL's in
:func:`vla_rl.stages.rl.experiment.rl_plan`, which builds the env's io spec and the policy spec).

Commands and the pipeline read the config through this module only: no stage reads a ``DictConfig`` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from vla_rl.config import ConfigError, EnvConfig, read_env_section, read_section
from vla_rl.stages.collect import CollectConfig, CollectPlan
from vla_rl.stages.evaluation.config import EvalConfig
from vla_rl.stages.evaluation.from_config import EvalPlan
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig, validate_rl_sections
from vla_rl.stages.sft.config import SFTConfig, SFTPlan, read_sft_section


@dataclass(frozen=True)
class ExperimentConfig:
    """The ``experiment`` section: its ``name`` (what the summary and the log lines say) and the ``stages`` that
    `vla-rl train` runs in order."""

    name: str
    stages: tuple[str, ...]


@dataclass(frozen=True)
class PolicySection:
    """The ``policy`` section, checked by its factory's module (``validate_policy_config``) in ``load_config``:
    ``factory``, the import path that builds the policy, and ``config``, the rest, which the factory reads into its
    own config class."""

    factory: str
    config: dict[str, Any]

    @property
    def head(self) -> str | None:
        """The head's name, or None for a policy of one's own without a ``head`` section."""
        head = self.config.get("head")
        return head.get("name") if isinstance(head, dict) else None


@dataclass(frozen=True)
class SFTSection:
    """The ``sft`` section: ``dataset`` (the demonstrations), ``output`` (the folder SFT writes) and the knobs."""

    dataset: str
    output: str
    sft: SFTConfig


@dataclass(frozen=True)
class RunPlan:
    """Every section of the composed config, typed, read once after ``load_config`` (:func:`read_run_plan`).

    Sections that a config may lack (a config composed for one command) are None: ``policy``, ``sft``, ``algo``
    and ``trainer`` (both or neither), ``eval`` and ``experiment``. ``config`` is the resolved config, for
    ``config.yaml``, the trackers and ``eval_info.json``.
    """

    seed: int
    run_dir: Path
    env: EnvConfig
    collect: CollectConfig
    policy: PolicySection | None
    sft: SFTSection | None
    algo: AlgoConfig | None
    trainer: TrainerConfig | None
    eval: EvalConfig | None
    experiment: ExperimentConfig | None
    config: dict[str, Any]

    def require(self, *sections: str) -> None:
        """Raises ConfigError naming the first of ``sections`` that the config lacks."""
        for name in sections:
            if getattr(self, name) is None:
                raise ConfigError(f"config lacks the section '{name}'")

    def collect_plan(self) -> CollectPlan:
        return CollectPlan(self.env, self.collect)

    def sft_plan(self) -> SFTPlan:
        self.require("policy", "sft")
        policy_section = {"factory": self.policy.factory, **self.policy.config}
        return SFTPlan(policy_section, self.env, self.sft.dataset, self.sft.output, self.sft.sft, self.seed)

    def eval_plan(self, run_record: Path | None = None) -> EvalPlan:
        self.require("eval")
        return EvalPlan(self.env, self.eval, self.seed, self.config, run_record)

    @property
    def seeds(self) -> dict[str, int]:
        """The seeds the run record lists: the run's and the demonstrations' (``collect.seed``)."""
        return {"seed": self.seed, "collect.seed": self.collect.seed}


def read_policy_section(cfg: DictConfig) -> PolicySection:
    """The ``policy`` section of ``cfg`` as a :class:`PolicySection`."""
    if "policy" not in cfg:
        raise ConfigError("config lacks the section 'policy'")
    config = OmegaConf.to_container(cfg.policy, resolve=True)
    return PolicySection(str(config.pop("factory")), config)


def read_run_plan(cfg: DictConfig) -> RunPlan:
    """``cfg`` (composed and validated by ``load_config``) as a :class:`RunPlan`.

    Raises:
        ConfigError: a wrong key or value (for a config that ``load_config`` did not compose).
    """
    env = read_env_section(cfg)
    sft = None
    if "sft" in cfg:
        section = OmegaConf.to_container(cfg.sft, resolve=True)
        sft = SFTSection(str(section["dataset"]), str(section["output"]), read_sft_section(section))
    algo = trainer = None
    if "algo" in cfg and "trainer" in cfg:
        algo, trainer = validate_rl_sections(cfg, len(env.tasks or (None,)))
    experiment = None
    if "experiment" in cfg:
        experiment = ExperimentConfig(str(cfg.experiment.name), tuple(str(s) for s in cfg.experiment.stages))
    return RunPlan(
        seed=int(cfg.seed), run_dir=Path(str(cfg.run_dir)), env=env, collect=read_section(cfg, "collect", CollectConfig),
        policy=read_policy_section(cfg) if "policy" in cfg else None, sft=sft, algo=algo, trainer=trainer,
        eval=read_section(cfg, "eval", EvalConfig) if "eval" in cfg else None, experiment=experiment,
        config=OmegaConf.to_container(cfg, resolve=True),
    )  # fmt: skip
