"""What the command modules share."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vla_rl.stages.run_plan import RunPlan

OVERRIDES_HELP = "Hydra config overrides, e.g. env.tasks=[lift] seed=3 (see configs/)"
CONFIG_DIR_HELP = (
    "a folder of your own config groups (DIR/env/my_env.yaml is env=my_env, DIR/experiment/x.yaml is "
    "experiment=x), searched after vla-rl's configs/; repeatable. The environment variable VLA_RL_CONFIG_PATH "
    "(folders separated by ':') does the same"
)


def add_config_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--config-dir DIR`` (repeatable): every command takes it, as the README says."""
    parser.add_argument("--config-dir", action="append", default=[], metavar="DIR", help=CONFIG_DIR_HELP)


def add_config_arguments(parser: argparse.ArgumentParser, overrides_help: str = OVERRIDES_HELP) -> None:
    """The Hydra overrides (positional) and ``--config-dir`` of a command that composes the config."""
    add_config_dir_argument(parser)
    parser.add_argument("overrides", nargs="*", help=overrides_help)


@contextlib.contextmanager
def recording(args: argparse.Namespace, cfg: Any, run: RunPlan, command: str, resume: bool = False) -> Iterator[Any]:
    """``run.json`` in the command's run folder (:class:`~vla_rl.runtime.run_record.RunRecord`): written before
    the work (after the ``record.plan`` check), updated by the block, finished when it ends or fails. ``cfg``: the
    composed config, recorded; ``run``: the same as a run plan."""
    from vla_rl.runtime.run_record import RunRecord

    record = RunRecord(command, list(getattr(args, "argv", None) or []), cfg, run.seeds)
    existed = record.folder.exists()
    record.start(resume=resume, evaluation=evaluation_protocol(run, command))
    print(f"run record: {record.path}")
    try:
        yield record
    except BaseException as error:
        if [p.name for p in record.folder.iterdir()] == [record.path.name] and not resume:
            # Refused before writing anything (e.g. no demonstrations): no run to record, leave no folder.
            record.path.unlink()
            if not existed:
                record.folder.rmdir()
        else:
            record.finish(error)
        raise
    record.finish()


def evaluation_protocol(run: RunPlan, command: str) -> dict[str, Any] | None:
    """How the command evaluates (split, base seed, episodes per task, deterministic, tasks, every reset seed);
    None for a command that does not evaluate."""
    stages = list(run.experiment.stages) if run.experiment else []
    if command not in ("train", "eval") or (command == "train" and "eval" not in stages and "rl" not in stages):
        return None
    from vla_rl.stages.evaluation.metrics import evaluation_seed

    run.require("eval")
    tasks, config = run.env.tasks, run.eval
    split, episodes, seed = config.split, config.episodes_per_task, run.seed
    protocol: dict[str, Any] = {
        "final": command == "eval" or "eval" in stages,
        "split": split, "seed": seed, "episodes_per_task": episodes, "deterministic": config.deterministic,
        "policy": config.policy if command == "eval" else "the sft and final policies of the run",
        "tasks": list(tasks),
        "seeds": {task: [evaluation_seed(seed, task, k, split) for k in range(episodes)] for task in tasks},
    }  # fmt: skip
    if command == "train" and "rl" in stages:
        run.require("trainer")
        protocol["periodic"] = {"split": "dev", "every": run.trainer.eval_every,
                                "episodes_per_task": run.trainer.eval_episodes_per_task}  # fmt: skip
    return protocol
