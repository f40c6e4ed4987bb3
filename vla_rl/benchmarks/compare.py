"""`vla-rl bench rollout|update --compare KEY=V1,V2,...`: settings of one config key, side by side.

A setting's speed depends on the machine's load as much as on the setting (docs/results.md), so the values
are measured in alternating rounds: round r runs the benchmark once for every value, in turn, each on
freshly started worker groups. Per value the JSON gives the median and range over rounds of the
benchmark's headline figure; per value after the first, the ratio to the first value's figure of the same
round (median and range), which is what a comparison should quote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vla_rl.config import ConfigError

HEADLINE_FIGURES = {"rollout": "rollout_env_steps_per_s", "update": "samples_per_s"}


class CompareError(ConfigError):
    """A ``--compare`` argument that cannot be run; the message says what to write instead."""


def parse_compare(text: str) -> tuple[str, list[str]]:
    """``"trainer.torch_threads=1,2"`` -> ``("trainer.torch_threads", ["1", "2"])``."""
    key, sep, values = text.partition("=")
    choices = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not key.strip() or len(choices) < 2:
        raise CompareError(
            f"--compare {text!r}: expected KEY=V1,V2[,...] with at least two values, "
            "e.g. --compare trainer.num_env_workers=1,2"
        )
    if len(set(choices)) != len(choices):
        raise CompareError(f"--compare {text!r}: a value is repeated; give each value once")
    return key.strip(), choices


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(float(np.median(values)), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def compare_settings(
    run: Callable[[str], dict[str, Any]], key: str, values: list[str], rounds: int, figure: str,
) -> dict[str, Any]:  # fmt: skip
    """Run ``run(value)`` for every value in each of ``rounds`` rounds; figures and same-round ratios.

    ``run(value)`` returns a benchmark's JSON dict holding ``figure``. Returns ``{"compare": key,
    "figure": figure, "rounds": rounds, "order": [values in the order run], "values": {value: {figure:
    spread, "ratio_to_first": spread (not for the first), "results": [each round's full JSON]}}}``.
    """
    if rounds < 1:
        raise CompareError(f"rounds={rounds} must be >= 1")
    results: dict[str, list[dict[str, Any]]] = {value: [] for value in values}
    order = []
    for _ in range(rounds):
        for value in values:
            outcome = run(value)
            if figure not in outcome:
                raise CompareError(f"the benchmark's JSON has no {figure!r} (keys: {sorted(outcome)})")
            results[value].append(outcome)
            order.append(value)
    per_value: dict[str, Any] = {}
    first = [float(r[figure]) for r in results[values[0]]]
    for value in values:
        figures = [float(r[figure]) for r in results[value]]
        entry: dict[str, Any] = {figure: spread(figures)}
        if value != values[0]:
            entry["ratio_to_first"] = spread([f / b for f, b in zip(figures, first, strict=True)])
        entry["results"] = results[value]
        per_value[value] = entry
    return {"compare": key, "figure": figure, "rounds": rounds, "order": order, "values": per_value}
