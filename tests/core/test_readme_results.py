"""Every figure of the README's results names its run record and is the record's: successes/episodes, Wilson
intervals, per-task counts and Fisher's p are recomputed here from the linked records' ``summary.json``."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
from scipy.stats import fisher_exact  # scipy comes with robosuite, a dependency

REPO = Path(__file__).resolve().parents[2]
RECORD_LINK = re.compile(r"\]\((docs/results/[^)\s]+/run\.json)\)")
FRACTION = re.compile(r"\b\d+/\d+\b")
ENTRY_START = re.compile(r"\*\*[^*]+\*\* \(`")  # a paragraph's entry: **Name** (`experiment ...`


def results_section() -> str:
    text = (REPO / "README.md").read_text()
    return text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]


def table_rows(section: str) -> tuple[list[str], list[list[str]]]:
    """The results table's header cells and the cells of each row."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    return split[0], split[2:]


def paragraph_entries(section: str) -> list[str]:
    """The entries written as paragraphs under the table, one string each."""
    text = "\n".join(line for line in section.splitlines() if not line.startswith("|"))
    starts = [m.start() for m in ENTRY_START.finditer(text)]
    assert starts and not FRACTION.findall(text[: starts[0]]), "a figure outside the table and the named entries"
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def summaries(entry: str) -> list[dict]:
    links = RECORD_LINK.findall(entry)
    assert links, f"a README result names no run record: {entry[:120]!r}"
    out = []
    for link in links:
        assert (REPO / link).is_file(), link
        summary = json.loads((REPO / link).with_name("summary.json").read_text())
        assert summary["eval_split"] == "test", f"{link}: measured on the {summary['eval_split']!r} split"
        out.append(summary)
    return out


def counts(summary: dict, policy: str, task: str | None = None) -> tuple[int, int]:
    evaluation = summary["policies"][policy]
    if task is None:
        return evaluation["successes"], evaluation["episodes"]
    episodes = evaluation["episodes_per_task"][task]
    return round(evaluation["tasks"][task] * episodes), episodes


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def one_sided_p(sft: tuple[int, int], final: tuple[int, int]) -> float:
    (a, n), (b, m) = sft, final
    return fisher_exact([[b, m - b], [a, n - a]], alternative="greater")[1]


def same_p(printed: str, p: float) -> bool:
    """``printed`` is ``p`` to one or two significant digits."""
    return any(math.isclose(float(printed), float(f"{p:.{digits}g}")) for digits in (1, 2))


def check_figures(entry: str, records: list[dict]) -> None:
    """The SFT and final successes/episodes of the records, pooled or one by one, appear in ``entry``; where
    written as ``k/n = rate (low-high)``, the rate and the Wilson interval are the record's; a ``p = x`` is the
    one-sided Fisher p of the pooled counts."""
    policies = [policy for policy in ("sft", "final") if all(policy in r["policies"] for r in records)]
    assert "final" in policies
    pooled = {}
    for policy in policies:
        each = [counts(r, policy) for r in records]
        pooled[policy] = (sum(s for s, _ in each), sum(n for _, n in each))
        shown = [f"{s}/{n}" for s, n in each]
        fractions = FRACTION.findall(entry)
        if f"{pooled[policy][0]}/{pooled[policy][1]}" not in fractions:
            assert all(f in fractions for f in shown), f"{policy} {shown} (or pooled) not in {entry[:160]!r}"
    for s, n, rate, low, high in re.findall(r"\b(\d+)/(\d+) = (\d\.\d+) \((\d\.\d+)-(\d\.\d+)\)", entry):
        s, n = int(s), int(n)
        assert (s, n) in pooled.values(), f"{s}/{n} is neither the SFT nor the final figure of its records"
        digits = len(rate.split(".")[1])
        expected_low, expected_high = wilson(s, n)
        assert (rate, low, high) == (
            f"{s / n:.{digits}f}",
            f"{expected_low:.{digits}f}",
            f"{expected_high:.{digits}f}",
        )
    printed = re.findall(r"\bp = ([0-9.e-]+)", entry)
    if printed and "sft" in pooled:
        assert same_p(printed[0], one_sided_p(pooled["sft"], pooled["final"])), printed[0]


def test_the_results_table_is_its_records():
    header, rows = table_rows(results_section())
    tasks = header[1 : header.index("all")]
    assert rows and tasks == ["reach", "lift", "open_drawer"]
    for row in rows:
        (summary,) = summaries(row[-1])
        for task, cell in zip(tasks, row[1 : 1 + len(tasks)], strict=True):
            sft, final = counts(summary, "sft", task)[0], counts(summary, "final", task)[0]
            assert cell == f"{sft} -> {final}", (row[0], task, cell)
        check_figures(row[header.index("all")], [summary])
        p = row[header.index("p")]
        assert same_p(p, one_sided_p(counts(summary, "sft"), counts(summary, "final"))), (row[0], p)


def test_every_paragraph_result_is_its_records():
    entries = paragraph_entries(results_section())
    assert len(entries) >= 3
    for entry in entries:
        check_figures(entry, summaries(entry))


MISTAKES = {"144/150": "145/150", "0.92-0.98": "0.91-0.98", "-> 47 |": "-> 48 |", "| 5e-16 |": "| 6e-16 |",
            "2596/3000": "2597/3000", "p = 1e-11": "p = 2e-11", "47/50": "46/50",
            "917/1000": "918/1000", "p = 2e-4": "p = 3e-4", "995/1050": "996/1050", "p = 3e-19": "p = 4e-19",
            "(0.93-0.96)": "(0.93-0.97)"}  # fmt: skip


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_figure_changed_in_the_readme_fails(mistake, monkeypatch):
    wrong = MISTAKES[mistake]
    text = results_section()
    assert mistake in text
    monkeypatch.setattr(sys.modules[__name__], "results_section", lambda: text.replace(mistake, wrong, 1))
    with pytest.raises(AssertionError):
        test_the_results_table_is_its_records()
        test_every_paragraph_result_is_its_records()
