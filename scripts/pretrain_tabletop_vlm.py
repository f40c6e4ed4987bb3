"""Pretrain the tiny VLM backbone on the tabletop suite's own frames (issue #23) and write it as a model folder.

Renders ``--frames`` captioned training frames and ``--held-out`` frames under other reset seeds
(:mod:`envs.builtin.captions`: both cameras at ``--image-size``, every task, the gripper steered somewhere),
trains a tiny Idefics3 captioner on them (:mod:`vla_rl.stages.vlm_pretrain`: the policy's input, then a caption
of where the instruction's object and the gripper are) and saves it with its tokenizer,
``preprocessor_config.json`` and ``pretraining.json`` (data, config, loss curve, held-out caption accuracy
against chance). Prints that record as JSON. ``--steps 0`` writes the same model untrained (the random
initialisation), the baseline of ``research/probe_tabletop_vlm.py`` and of RL from a random backbone.

    .venv/bin/python scripts/pretrain_tabletop_vlm.py assets/tabletop_vlm --frames 6000 --steps 2000 --seed 0

Use the folder with ``vla-rl train policy=vlm policy.backbone.source=assets/tabletop_vlm ...``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.builtin.captions import captioned_frames, vocabulary_words
from vla_rl.stages.vlm_pretrain import (
    PretrainConfig,
    caption_accuracy,
    config_record,
    pretrain_captioner,
    save_captioner,
)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write the model folder")
    parser.add_argument("--frames", type=int, default=6000, help="training frames")
    parser.add_argument("--held-out", type=int, default=1000, help="held-out frames (other reset seeds)")
    parser.add_argument("--steps", type=int, default=PretrainConfig.steps)
    parser.add_argument("--batch-size", type=int, default=PretrainConfig.batch_size)
    parser.add_argument("--lr", type=float, default=PretrainConfig.lr)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-size", type=int, default=PretrainConfig.hidden_size)
    parser.add_argument("--num-layers", type=int, default=PretrainConfig.num_layers)
    parser.add_argument("--image-size", type=int, default=PretrainConfig.image_size)
    parser.add_argument("--patch-size", type=int, default=PretrainConfig.patch_size)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (results depend on it)")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.held_out < 1:
        parser.error(f"--frames={args.frames} and --held-out={args.held_out} must be at least 1")
    torch.set_num_threads(args.threads)
    config = PretrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                            hidden_size=args.hidden_size, num_layers=args.num_layers, image_size=args.image_size,
                            patch_size=args.patch_size)  # fmt: skip
    start = time.perf_counter()
    train = captioned_frames(args.frames, args.seed, "train", image_size=args.image_size, cameras=config.cameras)
    held_out = captioned_frames(args.held_out, args.seed, "held_out", image_size=args.image_size,
                                cameras=config.cameras)  # fmt: skip
    render_seconds = time.perf_counter() - start
    words = vocabulary_words()
    model, tokenizer, history = pretrain_captioner(train, config, words, log=lambda line: print(line, file=sys.stderr))
    record = {
        "what": "a tiny Idefics3 captioner pretrained on the built-in tabletop suite's rendered frames "
                "(scripts/pretrain_tabletop_vlm.py); not a general VLM, no internet data",
        "command": "scripts/pretrain_tabletop_vlm.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "data": {"train_frames": args.frames, "held_out_frames": args.held_out, "seed": args.seed,
                 "image_size": args.image_size, "cameras": list(config.cameras), "tasks": sorted(set(train.tasks)),
                 "source": "envs.builtin.captions.captioned_frames"},  # fmt: skip
        "config": config_record(config),
        "parameters": sum(p.numel() for p in model.parameters()),
        "history": history,
        "held_out": caption_accuracy(model, tokenizer, held_out, train, config.cameras),
        "seconds": {"render": round(render_seconds, 1), "total": round(time.perf_counter() - start, 1)},
        "torch": torch.__version__, "threads": args.threads, "python": platform.python_version(),
    }  # fmt: skip
    save_captioner(args.folder, model, tokenizer, record)
    print(json.dumps({key: record[key] for key in ("parameters", "held_out", "seconds")}, indent=2))
    return record


if __name__ == "__main__":
    main()
