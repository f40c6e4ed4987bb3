"""Whether two runs of the same command gave the same numbers (`vla-rl reproduce`, scripts/compare_runs.py).

What is compared, per command (wall-clock values never: ``time``, ``timing/*``, ``memory/*``, ``*wall_time_s``,
``*_per_s``, and the file's creation time and host):

- ``train``: ``summary.json`` (env steps, RL iterations, the policies' success, the split, Fisher's test) and
  every row of ``rl/metrics.jsonl``.
- ``eval``: ``eval_info.json`` (the split, every episode's seed, success, return and length, the summaries).
- ``sft``: every row of ``sft_metrics.jsonl`` (losses, learning rates, gradient norms).
- ``collect``: ``stats.json`` and ``collection.json``.

Paths inside a run folder are compared with the folder's own path replaced by ``<run>``, so that a rerun
into another folder can agree.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUN_FOLDER = "<run>"


class RunFolderError(ValueError):
    """A run folder lacks the file that its command writes; the message names it."""


def is_wall_clock(key: str) -> bool:
    """``time``, ``timing/*``, ``memory/*`` and the per-task ``.../wall_time_s`` and throughput (``..._per_s``) keys."""
    return key == "time" or key.startswith(("timing/", "memory/")) or key.endswith(("wall_time_s", "_per_s"))


def _without_wall_clock(value: Any, folder: Path) -> Any:
    """``value`` without wall-clock keys (at any depth), with ``folder``'s path in strings as :data:`RUN_FOLDER`."""
    if isinstance(value, dict):
        return {k: _without_wall_clock(v, folder) for k, v in value.items() if not is_wall_clock(str(k))}
    if isinstance(value, list):
        return [_without_wall_clock(v, folder) for v in value]
    if isinstance(value, str):
        for form in (str(folder.resolve()), str(folder)):
            if form not in (".", ""):
                value = value.replace(form, RUN_FOLDER)
    return value


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise RunFolderError(f"{path} does not exist")
    return json.loads(path.read_text())


def _read_rows(path: Path, folder: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [_without_wall_clock(row, folder) for row in rows]


def comparable_summary(run_dir: Path) -> dict:
    summary = _read_json(run_dir / "summary.json")
    keys = ("env_steps", "rl_iterations", "eval_split", "policies", "final_vs_sft")
    return _without_wall_clock({k: summary.get(k) for k in keys}, run_dir)


def comparable_metrics(run_dir: Path) -> list[dict]:
    """The rows of ``rl/metrics.jsonl`` without wall-clock keys (empty without RL)."""
    return _read_rows(run_dir / "rl" / "metrics.jsonl", run_dir)


def comparable_eval_info(folder: Path) -> dict:
    document = _read_json(folder / "eval_info.json")
    kept = {"settings": document["settings"], "seeds": document["seeds"], "tasks": document["tasks"],
            "overall": document["overall"], "policy": {"deterministic": document["policy"].get("deterministic")}}  # fmt: skip
    return _without_wall_clock(kept, folder)


def _row_differences(name: str, rows_a: list[dict], rows_b: list[dict], found: list[str], limit: int) -> None:
    if len(rows_a) != len(rows_b):
        found.append(f"{name}: {len(rows_a)} rows != {len(rows_b)} rows")
    for row_a, row_b in zip(rows_a, rows_b, strict=False):
        for key in sorted(set(row_a) | set(row_b)):
            if row_a.get(key) != row_b.get(key):
                found.append(f"{name} step {row_a.get('step')}: {key} {row_a.get(key)} != {row_b.get(key)}")
        if len(found) >= limit:
            return


def _dict_differences(name: str, a: Any, b: Any, found: list[str], limit: int, path: str = "") -> None:
    """Each leaf where ``a`` and ``b`` differ, as ``name: key.path old != new``."""
    if len(found) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _dict_differences(name, a.get(key), b.get(key), found, limit, f"{path}.{key}" if path else str(key))
    elif a != b:
        found.append(f"{name}: {path or '(whole)'} {json.dumps(a)[:200]} != {json.dumps(b)[:200]}")


def _train_differences(a: Path, b: Path, limit: int) -> list[str]:
    found: list[str] = []
    _dict_differences("summary.json", comparable_summary(a), comparable_summary(b), found, limit)
    _row_differences("rl/metrics.jsonl", comparable_metrics(a), comparable_metrics(b), found, limit)
    return found


def _eval_differences(a: Path, b: Path, limit: int) -> list[str]:
    found: list[str] = []
    _dict_differences("eval_info.json", comparable_eval_info(a), comparable_eval_info(b), found, limit)
    return found


def _sft_differences(a: Path, b: Path, limit: int) -> list[str]:
    rows_a, rows_b = (_read_rows(f / "sft_metrics.jsonl", f) for f in (a, b))
    if not rows_a:
        raise RunFolderError(f"{a / 'sft_metrics.jsonl'} does not exist or is empty")
    found: list[str] = []
    _row_differences("sft_metrics.jsonl", rows_a, rows_b, found, limit)
    return found


def _collect_differences(a: Path, b: Path, limit: int) -> list[str]:
    found: list[str] = []
    for name in ("stats.json", "collection.json"):
        _dict_differences(name, _without_wall_clock(_read_json(a / name), a),
                          _without_wall_clock(_read_json(b / name), b), found, limit)  # fmt: skip
    return found


COMPARISONS: dict[str, Callable[[Path, Path, int], list[str]]] = {
    "train": _train_differences,
    "eval": _eval_differences,
    "sft": _sft_differences,
    "collect": _collect_differences,
}
#: What the "identical" line of each command says was compared.
COMPARED = {
    "train": "summary.json (success, episodes, split, Fisher's test, env steps) and every RL metric",
    "eval": "eval_info.json (split, seeds, every episode's success, return and length)",
    "sft": "every row of sft_metrics.jsonl",
    "collect": "stats.json and collection.json",
}


def differences(run_a: Path, run_b: Path, command: str = "train", limit: int = 20) -> list[str]:
    """The first ``limit`` differences between two run folders of ``command``; empty when they agree.

    Raises:
        RunFolderError: a folder lacks a file the command writes.
    """
    if command not in COMPARISONS:
        raise ValueError(f"cannot compare runs of {command!r}; comparable: {', '.join(COMPARISONS)}")
    return COMPARISONS[command](Path(run_a), Path(run_b), limit)[:limit]
