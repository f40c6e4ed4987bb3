"""Markdown result tables (and learning-curve plots) from finished experiment runs.

    python scripts/results_table.py outputs/flow_sde_ppo outputs/gaussian_ppo ... --plots docs/results

For each run folder (written by `vla-rl train experiment=NAME`): per task and average, the success of
the SFT policy and of the final policy (eval stage, `eval.episodes_per_task` seeded episodes per task),
the overall successes/episodes with Wilson 95% intervals and Fisher's exact p of the difference, the RL env
steps and the wall-clock time per stage, from `summary.json`; the RL learning curves are
drawn from `rl/metrics.jsonl` into `--plots/<experiment>/`. ``--pooled``: the runs' (e.g. a study's seeds)
successes summed first, with the same statistics; runs of different evaluation splits are refused.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
from pathlib import Path

from vla_rl.logging.plotting import plot_run
from vla_rl.stages.evaluation.metrics import fisher_exact_p, fisher_exact_p_greater, wilson_interval


def table(run_dir: Path) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    policies = summary["policies"]
    sft, final = policies.get("sft", {}), policies.get("final", {})
    tasks = list((final or sft).get("tasks", {}))
    episodes = (final or sft).get("episodes_per_task", {})
    split = summary.get("eval_split") or "dev"  # summaries before evaluation splits existed: the dev episodes
    record = f"; record `{run_dir / summary['run_record']}`" if summary.get("run_record") else "; no run record"
    lines = [f"**{summary['experiment']}** (seed {summary['seed']}; {split} split{record}; `{run_dir}`)", "",
             "| task | SFT success | after RL | episodes |", "|---|---|---|---|"]  # fmt: skip
    for task in tasks:
        lines.append(f"| {task} | {sft.get('tasks', {}).get(task, float('nan')):.2f} | "
                     f"{final.get('tasks', {}).get(task, float('nan')):.2f} | {episodes.get(task, '')} |")  # fmt: skip
    lines.append(f"| **average** | **{sft.get('overall', float('nan')):.2f}** | **{final.get('overall', float('nan')):.2f}** | |")
    if sft and final:
        lines += ["", overall_statistics(sft, final)]
    seconds = summary["stage_seconds"]
    timing = ", ".join(f"{stage} {value / 60:.1f} min" for stage, value in seconds.items())
    iterations = f" in {summary['rl_iterations']} iterations" if summary.get("rl_iterations") else ""
    lines += ["", f"RL env steps: {summary.get('env_steps')}{iterations}; wall clock: {sum(seconds.values()) / 60:.1f} min "
              f"({timing})."]  # fmt: skip
    return "\n".join(lines)


def successes_and_episodes(policy: dict) -> tuple[int, int]:
    episodes = sum(policy["episodes_per_task"].values())
    return round(policy["overall"] * episodes), episodes


def overall_statistics(sft: dict, final: dict) -> str:
    """Successes/episodes with Wilson 95% intervals, and Fisher's exact p of the SFT -> RL difference."""
    (a, n), (b, m) = successes_and_episodes(sft), successes_and_episodes(final)
    (sft_low, sft_high), (rl_low, rl_high) = wilson_interval(a, n), wilson_interval(b, m)
    return (f"SFT {a}/{n} = {a / n:.3f} (95% {sft_low:.3f}-{sft_high:.3f}) -> RL {b}/{m} = {b / m:.3f} "
            f"(95% {rl_low:.3f}-{rl_high:.3f}); Fisher's exact p = {fisher_exact_p(a, n, b, m):.2g} (two-sided), "
            f"{fisher_exact_p_greater(b, m, a, n):.2g} (one-sided, RL improved it).")  # fmt: skip


def pooled(run_dirs: list[Path]) -> str:
    """The SFT and final successes of several runs (e.g. the seeds of a study) summed, with Wilson intervals and
    Fisher's exact p (two-sided, and one-sided: RL improved it), and the split and record of each run.

    Raises:
        ValueError: the runs were evaluated on different splits, or a run lacks an SFT or final evaluation.
    """
    summaries = [json.loads((run / "summary.json").read_text()) for run in run_dirs]
    splits = {s.get("eval_split") or "dev" for s in summaries}
    if len(splits) != 1:
        raise ValueError(f"the runs were evaluated on different splits ({', '.join(sorted(splits))}); pool one split")
    sft = final = sft_n = final_n = 0
    for run, summary in zip(run_dirs, summaries, strict=True):
        policies = summary["policies"]
        if "sft" not in policies or "final" not in policies:
            raise ValueError(f"{run / 'summary.json'} lacks the SFT or final policy's evaluation")
        (a, n), (b, m) = successes_and_episodes(policies["sft"]), successes_and_episodes(policies["final"])
        sft, sft_n, final, final_n = sft + a, sft_n + n, final + b, final_n + m
    records = ", ".join(str(run / s["run_record"]) if s.get("run_record") else f"{run} (no record)"
                        for run, s in zip(run_dirs, summaries, strict=True))  # fmt: skip
    return (f"pooled over {len(run_dirs)} runs, {splits.pop()} split: "
            + overall_statistics({"overall": sft / sft_n, "episodes_per_task": {"all": sft_n}},
                                 {"overall": final / final_n, "episodes_per_task": {"all": final_n}})
            + f" Records: {records}.")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--plots", type=Path, default=None, help="copy learning curves to PLOTS/<experiment>/")
    parser.add_argument("--pooled", action="store_true",
                        help="also the runs' SFT and final successes summed, with Wilson intervals and Fisher's p")  # fmt: skip
    args = parser.parse_args()
    if args.pooled:
        print(pooled(args.runs) + "\n")
    for run_dir in args.runs:
        print(table(run_dir) + "\n")
        if args.plots is not None and (run_dir / "rl" / "metrics.jsonl").is_file():
            name = json.loads((run_dir / "summary.json").read_text())["experiment"]
            target = args.plots / name
            target.mkdir(parents=True, exist_ok=True)
            for path in plot_run(run_dir / "rl", target):
                print(f"plot: {path}")
            shutil.copy(run_dir / "summary.json", target / "summary.json")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends it quietly, as it would a shell tool
    main()
