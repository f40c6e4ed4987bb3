"""Two arms of a study (e.g. replay off and on, several seeds each) compared on their pooled evaluations.

    python scripts/compare_arms.py --a docs/results/mt10_success_replay/off_seed* \\
        --b docs/results/mt10_success_replay/on_seed* [--task drawer-open-v3] [--policy final]
    python scripts/compare_arms.py --a docs/results/mt10_success_replay/off_seed* \\
        --b docs/results/mt10_success_replay/off_seed* --policy sft final --names SFT final --task drawer-open-v3

Each arm's successes are summed over its runs (``summary.json``: per task, the success rate times the episodes),
over every task or only ``--task``. Printed: each arm's successes/episodes with its Wilson 95% interval, the
difference B - A with Newcombe's 95% interval, and Fisher's exact p one-sided each way ("B more than A", "B less
than A") and two-sided; then, per task, the successes of SFT and of the compared policy in each arm. ``--policy``
names the compared policy of both arms, or of A then B: the same runs as both arms with ``--policy sft final``
compare the final policy with the SFT policy of those runs. Which p-value a study's plan named is for the reader
to say (planned or post hoc); the script computes them all.
"""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

from vla_rl.stages.evaluation.metrics import (
    fisher_exact_p,
    fisher_exact_p_greater,
    newcombe_difference_interval,
    wilson_interval,
)


def task_counts(run_dir: Path, summary: dict, policy: str) -> dict[str, tuple[int, int]]:
    """``{task: (successes, episodes)}`` of ``policy`` ("sft" or "final") in ``summary`` (``run_dir``'s).

    Raises:
        ValueError: the run has no evaluation of ``policy``.
    """
    evaluation = summary["policies"].get(policy)
    if not evaluation:
        raise ValueError(f"{run_dir / 'summary.json'} has no evaluation of the {policy!r} policy")
    episodes = evaluation["episodes_per_task"]
    return {
        task: (round(rate * episodes[task]), episodes[task]) for task, rate in evaluation["tasks"].items()
    }


def evaluation_split(run_dirs: list[Path]) -> str:
    """The evaluation split of every run in ``run_dirs`` (runs before splits existed: ``dev``).

    Raises:
        ValueError: the runs were evaluated on different splits.
    """
    splits = {json.loads((run / "summary.json").read_text()).get("eval_split") or "dev" for run in run_dirs}
    if len(splits) != 1:
        raise ValueError(
            f"the runs were evaluated on different splits ({', '.join(sorted(splits))}); pool one split"
        )
    return splits.pop()


def pooled_counts(run_dirs: list[Path], policy: str) -> dict[str, tuple[int, int]]:
    """Per task, ``(successes, episodes)`` summed over ``run_dirs`` (their split is checked by the callers).

    Raises:
        ValueError: the runs were evaluated on different tasks.
    """
    summaries = [json.loads((run / "summary.json").read_text()) for run in run_dirs]
    total: dict[str, tuple[int, int]] = {}
    for run, summary in zip(run_dirs, summaries, strict=True):
        counts = task_counts(run, summary, policy)
        if total and set(counts) != set(total):
            raise ValueError(f"{run} was evaluated on other tasks than the runs before it: {sorted(counts)}")
        for task, (successes, episodes) in counts.items():
            before = total.get(task, (0, 0))
            total[task] = (before[0] + successes, before[1] + episodes)
    return total


def select(counts: dict[str, tuple[int, int]], task: str | None) -> tuple[int, int]:
    """The successes and episodes of ``task``, or of every task when ``task`` is None."""
    if task is not None:
        if task not in counts:
            raise ValueError(f"--task {task!r} is not among the evaluated tasks: {', '.join(sorted(counts))}")
        return counts[task]
    return sum(s for s, _ in counts.values()), sum(n for _, n in counts.values())


def comparison(runs_a: list[Path], runs_b: list[Path], policy: str | tuple[str, str] = "final",
               task: str | None = None, names: tuple[str, str] = ("A", "B")) -> str:  # fmt: skip
    """The statistics of arm B against arm A on the pooled evaluations of ``policy`` (see the module's text):
    one policy for both arms, or ``(A's, B's)``."""
    name_a, name_b = names
    policy_a, policy_b = (policy, policy) if isinstance(policy, str) else policy
    split = evaluation_split([*runs_a, *runs_b])
    (a, n), (b, m) = (
        select(pooled_counts(runs_a, policy_a), task),
        select(pooled_counts(runs_b, policy_b), task),
    )
    (low_a, high_a), (low_b, high_b) = wilson_interval(a, n), wilson_interval(b, m)
    low, high = newcombe_difference_interval(b, m, a, n)
    scope = task or "all tasks"
    compared = f"{policy_a} policy" if policy_a == policy_b else f"{policy_a} against {policy_b} policy"
    return (f"{compared}, {scope}, {split} split: {name_a} {a}/{n} = {a / n:.3f} (95% {low_a:.3f}-{high_a:.3f}), "
            f"{name_b} {b}/{m} = {b / m:.3f} (95% {low_b:.3f}-{high_b:.3f}); {name_b} - {name_a} = {b / m - a / n:+.3f} "
            f"(Newcombe 95% {low:+.3f} to {high:+.3f}); Fisher's exact p: {name_b} more than {name_a} "
            f"{fisher_exact_p_greater(b, m, a, n):.2g}, {name_b} less than {name_a} {fisher_exact_p_greater(a, n, b, m):.2g}, "
            f"two-sided {fisher_exact_p(b, m, a, n):.2g}.")  # fmt: skip


def per_task_table(runs_a: list[Path], runs_b: list[Path], policy: str | tuple[str, str] = "final",
                   names: tuple[str, str] = ("A", "B")) -> str:  # fmt: skip
    """Markdown: per task, the pooled successes/episodes of SFT and of the compared policy in each arm (``policy``:
    one for both arms, or ``(A's, B's)``); a column that would repeat another is left out."""
    policies = (policy, policy) if isinstance(policy, str) else policy
    evaluation_split([*runs_a, *runs_b])
    columns: dict[str, dict[str, tuple[int, int]]] = {}
    shown: set[tuple[tuple[Path, ...], str]] = set()
    for runs, name, compared in zip((runs_a, runs_b), names, policies, strict=True):
        for column in dict.fromkeys(("sft", compared)):
            if (tuple(runs), column) not in shown:
                shown.add((tuple(runs), column))
                label = "SFT" if column == "sft" else column
                columns[label if label.lower() == name.lower() else f"{label} ({name})"] = pooled_counts(
                    runs, column
                )
    lines = ["| task | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for task in next(iter(columns.values())):
        lines.append(
            f"| {task} | " + " | ".join(f"{c[task][0]}/{c[task][1]}" for c in columns.values()) + " |"
        )
    totals = [select(c, None) for c in columns.values()]
    lines.append("| **all** | " + " | ".join(f"**{s}/{n}**" for s, n in totals) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--a", nargs="+", type=Path, required=True, help="the runs of arm A (e.g. the control)"
    )
    parser.add_argument(
        "--b", nargs="+", type=Path, required=True, help="the runs of arm B (e.g. the treatment)"
    )
    parser.add_argument("--names", nargs=2, default=("A", "B"), metavar=("NAME_A", "NAME_B"))
    parser.add_argument("--policy", nargs="+", default=["final"], metavar="POLICY",
                        help="the policy compared, final (default) or sft: one for both arms, or A's then B's")  # fmt: skip
    parser.add_argument("--task", action="append", default=None,
                        help="compare on this task only (repeatable: one line each); default all tasks")  # fmt: skip
    args = parser.parse_args()
    names = tuple(args.names)
    if len(args.policy) > 2:
        parser.error(f"--policy takes one policy for both arms or two (A's, B's), not {len(args.policy)}")
    policy = args.policy[0] if len(args.policy) == 1 else tuple(args.policy)
    for task in [None, *(args.task or [])]:
        print(comparison(args.a, args.b, policy, task, names))
    print()
    print(per_task_table(args.a, args.b, policy, names))


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... | head` ends it quietly, as it would a shell tool
    main()
