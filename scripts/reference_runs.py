"""Tiny runs of named experiments, to check that a refactoring changes no number.

    python scripts/reference_runs.py run outputs/ref_before      # before the change
    python scripts/reference_runs.py run outputs/ref_after       # after it
    python scripts/reference_runs.py compare outputs/ref_before outputs/ref_after

``run`` trains each experiment of :data:`EXPERIMENTS` for two RL iterations at the tiny sizes of
:mod:`vla_rl.config.tiny` (one folder each), and the default experiment through every stage
(collect, SFT, RL, eval) at tiny sizes (folder ``pipeline``). ``compare`` checks, folder by folder, what
``scripts/compare_runs.py`` checks (summary.json success rates, every RL metric but wall-clock ones), and
the SFT metrics (``sft/sft_metrics.jsonl`` but wall-clock keys); exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

#: One per head / algorithm / vision branch: residual + pixels (the default), GRPO, gaussian, diffusion,
#: the steered flow and Flow-Noise of the flow itself.
EXPERIMENTS = ["default", "flow_grpo", "gaussian_ppo", "diffusion_ppo", "flow_steered_ppo", "flow_noise_pixels_ppo"]
PIPELINE = [
    "experiment=default",
    "experiment.stages=[collect,sft,rl,eval]",
    "env.tasks=[reach]",
    "env.kwargs.image_size=32",
    "collect.episodes_per_task=4",
    "collect.valid_fraction=0.25",
    "sft.max_steps=6",
    "sft.warmup_steps=2",
    "sft.valid_every=3",
    "sft.log_every=1",
    "sft.batch_size=8",
    "sft.show_progress=false",
    "trainer.iterations=2",
    "trainer.envs_per_stage=2",
    "trainer.rollout_steps=2",
    "trainer.trackers=[jsonl]",
    "algo.update.epochs=1",
    "algo.update.num_minibatches=2",
    "algo.update.micro_batch_size=4",
    "algo.critic_warmup_iterations=1",
    "eval.episodes_per_task=2",
    "eval.num_envs=2",
    "eval.trackers=[]",
    "eval.video.episodes_per_task=0",
    "eval.video.grid_envs=0",
]


def run(out: Path, only: list[str]) -> None:
    import policies  # noqa: F401  (before any rendering: docs/platform.md)
    from vla_rl.cli import main
    from vla_rl.config.tiny import tiny_overrides
    from vla_rl.runtime.ray_cluster import init_ray

    init_ray(num_cpus=6)
    for name in only or [*EXPERIMENTS, "pipeline"]:
        folder = (out / name).resolve()
        if name == "pipeline":
            overrides = [*PIPELINE, f"collect.output={folder / 'demos'}"]
        else:
            overrides = [*tiny_overrides(name), "trainer.iterations=2", "trainer.time_limit_minutes=null"]
        code = main(["train", *overrides, f"run_dir={folder}"])
        print(f"== {name}: exit {code}", flush=True)
        if code != 0:
            raise SystemExit(code)


def wall_clock(key: str) -> bool:
    """Keys that differ between identical runs: times, throughputs, and the dataset's path (run_dir)."""
    return key in ("time", "seconds", "dataset") or key.startswith("timing/") or key.endswith(("wall_time_s", "_per_s"))


def episodes(run_dir: Path) -> dict[str, list]:
    """Seed, success, return and length of every evaluation episode, by evaluated policy and task."""
    found = {}
    for path in sorted((run_dir / "eval").glob("*/eval_info.json")):
        tasks = json.loads(path.read_text())["tasks"]
        found[path.parent.name] = {
            task: [(e["seed"], e["success"], e["return"], e["length"]) for e in summary["episode_results"]]
            for task, summary in tasks.items()
        }
    return found


def rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    found = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if not wall_clock(k)} for row in found]


def compare(before: Path, after: Path) -> int:
    from compare_runs import differences

    failed = False
    for folder in sorted(p for p in before.iterdir() if p.is_dir()):
        other = after / folder.name
        if not other.is_dir():
            print(f"{folder.name}: missing in {after}")
            failed = True
            continue
        found = differences(folder, other)
        sft_a, sft_b = rows(folder / "sft" / "sft_metrics.jsonl"), rows(other / "sft" / "sft_metrics.jsonl")
        if sft_a != sft_b:
            found.append(f"sft/sft_metrics.jsonl differs ({len(sft_a)} vs {len(sft_b)} rows)")
        if episodes(folder) != episodes(other):
            found.append("eval/*/eval_info.json: the episodes differ")
        metrics = len(rows(folder / "rl" / "metrics.jsonl"))
        print(f"{folder.name}: " + ("; ".join(found) if found else f"identical ({metrics} RL rows, {len(sft_a)} SFT rows, "
                                           f"{sum(len(e) for p in episodes(folder).values() for e in p.values())} eval episodes)"))
        failed = failed or bool(found)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("out", type=Path)
    run_parser.add_argument("--only", nargs="*", default=[])
    compare_parser = sub.add_parser("compare")
    compare_parser.add_argument("before", type=Path)
    compare_parser.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
