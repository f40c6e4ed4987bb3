"""`vla-rl bench env | policy [--vlm] | rollout | update | alignment`: benchmarks that print one JSON object.

``policy --vlm`` measures, beside the compact policy, the policies with a VLM under the actions: the pooled VLM
(frozen, LoRA, full), the action-token VLA (parallel and autoregressive decoding) and the action-expert VLA, each
with act and PPO-update throughput and the bytes a weight sync carries (``--families`` picks among them; the keys
are listed in ``vla_rl/benchmarks/vlm_policies.py``). The VLM is a tiny random one unless ``--vlm-source DIR`` names a
model folder, e.g. ``--vlm-source assets/tabletop_vlm``.

``rollout`` and ``update`` build the trainer's worker groups from the config `vla-rl train` would compose
(the default experiment unless an ``experiment=`` is given) and take Hydra overrides after the target, e.g.
``vla-rl bench rollout trainer.envs_per_stage=8``. ``alignment``
(not a speed: the cosine between a head's PPO gradient and the gradient of its evaluated policy's objective,
``vla_rl/benchmarks/alignment.py``) takes them too, e.g. ``vla-rl bench alignment experiment=flow_sde_ppo``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

from vla_rl.benchmarks.compare import (
    HEADLINE_FIGURES,
    CompareError,
    check_variants,
    compare_variants,
    parse_compare,
    variant_keys,
)
from vla_rl.commands.common import OVERRIDES_HELP, add_config_arguments

TARGETS_WITH_OVERRIDES = ("rollout", "update", "alignment")
#: ``--families`` of ``bench policy --vlm``: the keys of ``vla_rl.benchmarks.vlm_policies.FAMILIES`` (tested equal; not
#: imported, so that the parser builds without torch).
VLM_FAMILIES = ("pooled", "tokens", "expert")
VLM_OPTIONS = ("families", "vlm_source", "vlm_architecture", "vlm_hidden_size")


def cmd_bench(args: argparse.Namespace) -> int:
    if args.overrides and args.target not in TARGETS_WITH_OVERRIDES:
        print(f"vla-rl bench {args.target}: takes no config overrides (got {' '.join(args.overrides)}); "
              f"overrides are for {' and '.join(TARGETS_WITH_OVERRIDES)}; use the --options instead", file=sys.stderr)  # fmt: skip
        return 2
    vlm_options = [f"--{name.replace('_', '-')}" for name in VLM_OPTIONS if getattr(args, name) is not None]
    if vlm_options and not (args.target == "policy" and args.vlm):
        print(f"vla-rl bench {args.target}: {' and '.join(vlm_options)} are options of `bench policy --vlm`; "
              "add --vlm (and the target policy)", file=sys.stderr)  # fmt: skip
        return 2
    if (args.compare or args.variants) and args.target not in HEADLINE_FIGURES:
        print(f"vla-rl bench {args.target}: --compare and --variants are for {' and '.join(HEADLINE_FIGURES)}", file=sys.stderr)
        return 2
    if args.target == "env":
        from envs.registry import registered, resolve

        if args.task and (":" in args.task or ("/" in args.task and args.task.partition("/")[0] in registered())):
            env_id = args.task  # a full env id; otherwise a task of --env (LIBERO's tasks hold a '/' too)
        else:
            env_id = f"{args.env}/{args.task}" if args.task else args.env
        entry, task = resolve(env_id)
        if args.remote:
            from envs.remote.benchmark import measure_remote_overhead

            kwargs = {"image_size": args.image_size} if args.image_size else {}
            result = measure_remote_overhead(f"{entry.name}/{task}" if task else entry.name, args.remote,
                                             args.steps, args.seed, args.repeats or 3, kwargs)  # fmt: skip
            print(json.dumps({"env": entry.name, "task": task, **result}))
            return 0
        measure = entry.load_benchmark()
        if measure is None:
            with_benchmark = sorted(name for name, e in registered().items() if e.benchmark is not None)
            print(f"vla-rl bench env: env {entry.name!r} has no benchmark; available for: "
                  f"{', '.join(with_benchmark)}. Register one with register(..., benchmark='pkg.module:measure') "
                  "or set a `benchmark` attribute on the factory", file=sys.stderr)  # fmt: skip
            return 2
        options = {"repeats": args.repeats or 3} if "repeats" in inspect.signature(measure).parameters else {}
        result = measure(task=task, num_steps=args.steps, seed=args.seed, **options)
        result = {"env": entry.name, "task": task, **result}
    elif args.target == "alignment":
        result = _alignment_benchmark(args)
    elif args.target == "policy" and args.vlm:
        problem = _vlm_option_problem(args)
        if problem:
            print(f"vla-rl bench policy --vlm: {problem}", file=sys.stderr)
            return 2
        from vla_rl.benchmarks.vlm_policies import run_vlm_benchmark

        given = {"repeats": args.repeats, "architecture": args.vlm_architecture, "hidden_size": args.vlm_hidden_size,
                 "families": args.families and list(dict.fromkeys(args.families)), "source": args.vlm_source}  # fmt: skip
        result = run_vlm_benchmark(batch_size=args.batch_size, **{k: v for k, v in given.items() if v is not None})
    elif args.target == "policy":
        from policies.benchmark import run_policy_benchmark

        result = run_policy_benchmark(batch_size=args.batch_size)
    elif args.compare or args.variants:
        result = _compare_benchmark(args)
    else:
        result = _trainer_benchmark(args.target, args.overrides, args.repeats or 3, args.min_seconds)
    print(json.dumps(result))
    return 0


def _vlm_option_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the options of ``bench policy --vlm`` (None: nothing)."""
    if args.batch_size < 1:
        return f"--batch-size {args.batch_size}: give a positive number of observations"
    if args.repeats is not None and args.repeats < 1:
        return f"--repeats {args.repeats}: give a positive number of timed rounds"
    if args.vlm_source is None:
        if args.vlm_hidden_size is not None and (args.vlm_hidden_size < 4 or args.vlm_hidden_size % 4):
            return (f"--vlm-hidden-size {args.vlm_hidden_size}: give a positive multiple of 4 (two attention heads "
                    "of an even size, for the rotary embedding)")  # fmt: skip
        return None
    given = [f"--{name.replace('_', '-')}" for name in ("vlm_architecture", "vlm_hidden_size")
             if getattr(args, name) is not None]  # fmt: skip
    if given:
        return (f"{' and '.join(given)} size the tiny random model; --vlm-source {args.vlm_source} brings its own: "
                "give one or the other")  # fmt: skip
    if args.vlm_source.startswith("package:"):
        return None  # resolved (and checked) by the backbone loader
    folder = Path(args.vlm_source)
    if not (folder / "config.json").is_file():
        return (f"--vlm-source {args.vlm_source}: not a model folder (no config.json there); give a local "
                "...ForConditionalGeneration folder, e.g. assets/tabletop_vlm")  # fmt: skip
    return None


def _trainer_benchmark(target: str, overrides: list[str], repeats: int, min_seconds: float = 3.0) -> dict:
    import ray

    from vla_rl.commands.train import train_overrides
    from vla_rl.config.loading import load_config
    from vla_rl.runtime.ray_cluster import shutdown_ray

    cfg = load_config(train_overrides(overrides))  # what `vla-rl train` would run: the default experiment unless named
    joined_running_ray = ray.is_initialized()  # e.g. a test session's: leave it running
    try:
        if target == "rollout":
            from vla_rl.benchmarks.rollout import run_rollout_benchmark

            return run_rollout_benchmark(cfg, repeats=repeats, min_seconds=min_seconds)
        from vla_rl.benchmarks.update import run_update_benchmark

        return run_update_benchmark(cfg, repeats=repeats)
    finally:
        if not joined_running_ray:
            shutdown_ray()


def _compare_benchmark(args: argparse.Namespace) -> dict:
    """``--compare`` / ``--variants``: the trainer benchmark once per variant per round (:mod:`vla_rl.benchmarks.compare`)."""
    if args.compare and args.variants:
        raise CompareError("give --compare KEY=V1,V2 or --variants, not both")
    variants = parse_compare(args.compare) if args.compare else check_variants(args.variants)
    common = {o.lstrip("+~").partition("=")[0] for o in args.overrides}
    for variant in variants:
        if variant_keys(variant) & common:
            raise CompareError(
                f"{sorted(variant_keys(variant) & common)} set both by the variant {variant!r} and by the overrides; "
                "give them only in the variants"
            )
    result = compare_variants(
        lambda extra: _trainer_benchmark(args.target, [*args.overrides, *extra], 1, args.min_seconds),
        variants, args.repeats or 3, HEADLINE_FIGURES[args.target],
    )  # fmt: skip
    return {"benchmark": args.target, "overrides": list(args.overrides), **result}


def _alignment_benchmark(args: argparse.Namespace) -> dict:
    from vla_rl.benchmarks.alignment import AlignmentSettings, run_alignment_benchmark
    from vla_rl.config.loading import load_config

    settings = AlignmentSettings(
        minibatch_size=args.minibatch_size, reference_batch=args.reference_batch, repeats=args.repeats or 10,
        true_samples=args.true_samples, num_contexts=args.contexts, seed=args.seed, target_from=args.target_from,
        target_offset=args.target_offset,
    )  # fmt: skip
    return run_alignment_benchmark(load_config(args.overrides), settings, args.policy)


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="benchmarks (speed; PPO gradient alignment); print one JSON object as the last line")
    bench.add_argument("target", choices=["env", "policy", "rollout", "update", "alignment"], help="what to measure")
    bench.add_argument("--env", default="tabletop", help="env name (bench env)")
    bench.add_argument("--task", default=None, help="task, or NAME/TASK (bench env; default: the env's default task)")
    bench.add_argument("--steps", type=int, default=2000, help="env steps per measurement (bench env)")
    bench.add_argument("--remote", default=None, metavar="HOST:PORT", help="bench env: the per-step cost of the env "
                       "served by `vla-rl env-server` at HOST:PORT against the same env in this process")  # fmt: skip
    bench.add_argument("--image-size", type=int, default=None, help="bench env --remote: env.kwargs.image_size")
    bench.add_argument("--batch-size", type=int, default=32, help="batch size (bench policy)")
    bench.add_argument("--vlm", action="store_true", help="bench policy: the policies with a VLM (pooled: frozen, "
                       "LoRA, full; the action-token VLA, parallel and autoregressive; the action-expert VLA) side by "
                       "side with the compact one: act and PPO-update throughput, the weight sync's bytes and seconds")
    bench.add_argument("--families", nargs="+", choices=VLM_FAMILIES, default=None,
                       help="bench policy --vlm: which of them beside the compact policy (default: all)")
    bench.add_argument("--vlm-source", default=None, metavar="DIR", help="bench policy --vlm: the VLM's model folder, "
                       "e.g. assets/tabletop_vlm (default: a tiny random model, sized by the two options below)")
    bench.add_argument("--vlm-architecture", default=None, choices=["idefics3", "smolvlm", "paligemma"],
                       help="bench policy --vlm: the tiny random model's architecture (default: idefics3)")
    bench.add_argument("--vlm-hidden-size", type=int, default=None,
                       help="bench policy --vlm: width of the tiny random model's towers (default: 64)")  # fmt: skip
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeats", type=int, default=None, help="measured rounds (bench env, rollout, update: 3, "
                       "after a warm-up; policy --vlm: 5; alignment: mini-batches, 10, at least 2)")
    bench.add_argument("--policy", default=None, help="bench alignment: a save_pretrained folder whose weights to load "
                       "into the configured policy (default: a freshly built one)")
    bench.add_argument("--minibatch-size", type=int, default=None,
                       help="bench alignment: chunks per PPO mini-batch (default: the config's)")
    bench.add_argument("--reference-batch", type=int, default=2000, help="bench alignment: the large batch")
    bench.add_argument("--true-samples", type=int, default=4000,
                       help="bench alignment: draws of the evaluated policy's gradient")
    bench.add_argument("--contexts", type=int, default=32, help="bench alignment: env observations after reset")
    bench.add_argument("--target-from", choices=["policy", "zero"], default="policy",
                       help="bench alignment: the toy reward's target is near the evaluated policy's chunk, or near 0")
    bench.add_argument("--target-offset", type=float, default=0.1,
                       help="bench alignment: the target's context-dependent offset from its anchor (normalised units)")
    bench.add_argument("--min-seconds", type=float, default=3.0,
                       help="bench rollout: each figure of a round runs at least this long")  # fmt: skip
    bench.add_argument("--compare", default=None, metavar="KEY=V1,V2",
                       help="bench rollout / update: run once per value of a config key, in alternating rounds "
                       "(--repeats of them), e.g. --compare trainer.num_env_workers=1,2")
    bench.add_argument("--variants", nargs="+", default=None, metavar="OVERRIDES",
                       help="bench rollout / update: as --compare, for sets of overrides, e.g. --variants "
                       "'trainer.num_env_workers=1 trainer.envs_per_stage=16' "
                       "'trainer.num_env_workers=2 trainer.envs_per_stage=8' (after the other overrides)")  # fmt: skip
    add_config_arguments(bench, f"bench rollout / update: {OVERRIDES_HELP}")
    bench.set_defaults(func=cmd_bench)
