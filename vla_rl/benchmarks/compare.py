"""`vla-rl bench rollout|update --compare KEY=V1,V2` or `--variants "OVERRIDES" "OVERRIDES"`: settings side by side.

A setting's speed depends on the machine's load as much as on the setting (docs/results.md), so the variants
are measured in alternating rounds: round r runs the benchmark once for every variant, in turn, each on
freshly started worker groups. A variant is a set of config overrides (``--compare KEY=V1,V2`` is shorthand
for the variants ``KEY=V1`` and ``KEY=V2``). Per variant the JSON gives the median and range over rounds of
the benchmark's headline figure and, for every variant after the first, the ratio to the first variant's
figure of the same round (median and range): the figure a comparison should quote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vla_rl.config import ConfigError

HEADLINE_FIGURES = {"rollout": "rollout_env_steps_per_s", "update": "samples_per_s"}


class CompareError(ConfigError):
    """A ``--compare`` / ``--variants`` argument that cannot be run; the message says what to write instead."""


def parse_compare(text: str) -> list[str]:
    """``"trainer.torch_threads=1,2"`` -> the variants ``["trainer.torch_threads=1", "trainer.torch_threads=2"]``."""
    key, sep, values = text.partition("=")
    choices = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not key.strip() or " " in key.strip() or len(choices) < 2:
        raise CompareError(
            f"--compare {text!r}: expected KEY=V1,V2[,...] with at least two values, e.g. --compare "
            "trainer.num_env_workers=1,2 (for settings of several keys: --variants \"A=1 B=2\" \"A=2 B=1\")"
        )
    return check_variants([f"{key.strip()}={choice}" for choice in choices])


def check_variants(variants: list[str]) -> list[str]:
    """Each variant's overrides normalised to single spaces; at least two, none repeated."""
    variants = [" ".join(v.split()) for v in variants]
    if len(variants) < 2 or any(not v for v in variants):
        raise CompareError(f"variants {variants}: give at least two non-empty sets of overrides")
    if len(set(variants)) != len(variants):
        raise CompareError(f"variants {variants}: a variant is repeated; give each once")
    return variants


def variant_keys(variant: str) -> set[str]:
    """The config keys a variant overrides: ``"+a.b=1 c=2"`` -> ``{"a.b", "c"}``."""
    return {item.lstrip("+~").partition("=")[0] for item in variant.split()}


def spread(values: list[float]) -> dict[str, float]:
    """Median and range, rounded to 3 decimals."""
    return {"median": round(float(np.median(values)), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def compare_variants(
    run: Callable[[list[str]], dict[str, Any]], variants: list[str], rounds: int, figure: str,
) -> dict[str, Any]:  # fmt: skip
    """Run ``run(overrides)`` for every variant in each of ``rounds`` rounds; figures and same-round ratios.

    ``run`` takes a variant's overrides (a list) and returns a benchmark's JSON dict holding ``figure``.
    Returns ``{"figure": figure, "rounds": rounds, "order": [variants in the order run], "variants":
    {variant: {figure: spread, "ratio_to_first": spread (not for the first), "results": [each round's
    JSON]}}}``.
    """
    if rounds < 1:
        raise CompareError(f"rounds={rounds} must be >= 1")
    results: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    order = []
    for _ in range(rounds):
        for variant in variants:
            outcome = run(variant.split())
            if figure not in outcome:
                raise CompareError(f"the benchmark's JSON has no {figure!r} (keys: {sorted(outcome)})")
            results[variant].append(outcome)
            order.append(variant)
    per_variant: dict[str, Any] = {}
    first = [float(r[figure]) for r in results[variants[0]]]
    for variant in variants:
        figures = [float(r[figure]) for r in results[variant]]
        entry: dict[str, Any] = {figure: spread(figures)}
        if variant != variants[0]:
            entry["ratio_to_first"] = spread([f / b for f, b in zip(figures, first, strict=True)])
        entry["results"] = results[variant]
        per_variant[variant] = entry
    return {"figure": figure, "rounds": rounds, "order": order, "variants": per_variant}
