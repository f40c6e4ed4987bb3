"""The measurements of docs/results/token_vla/diagnosis.md (run from the repository root, PYTHONPATH=.).

    python docs/results/token_vla/diagnosis/token_fit.py open-loop POLICY DATA [--mean]
        deterministic act on every train / valid demo observation (the split of seed 0) against the demo's chunk:
        mean |error| per action dimension in env units, and the fraction of errors above 1/8 and 1/2 of the range
    python docs/results/token_vla/diagnosis/token_fit.py slots POLICY DATA TASK STEP
        token policies: each slot's labels on the train demos of TASK at STEP, the top bins of the mean softmax
    python docs/results/token_vla/diagnosis/token_fit.py closed-loop POLICY EVAL_INFO EPISODES [--mean]
        the first EPISODES seeds per task of an eval_info.json, one env, deterministic actions (as `vla-rl eval`)

``--mean`` makes a token policy act with ``tokens.deterministic_action="mean"``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from policies.hub import load_pretrained
from vla_rl.stages.sft.batches import collate_chunks, ordered_batches
from vla_rl.stages.sft.demos import ChunkDataset, load_demonstrations
from vla_rl.workers.chunked_envs import stack_observations

ENV_KWARGS = dict(image_size=64, cameras=("front", "wrist"), dense_reward=True, fixed_scenes=True, scene_seed=0,
                  scene_jitter=0.03)  # fmt: skip
RANGES = np.array([0.1, 0.1, 0.1, 2.0])  # the tabletop action range per dimension (dx, dy, dz, gripper)


def load(path: str, mean: bool):
    policy = load_pretrained(path).eval()
    if mean:
        policy.config.tokens.deterministic_action = "mean"
    return policy


def open_loop(args) -> None:
    policy = load(args.policy, args.mean)
    for split in ("train", "valid"):
        episodes, _ = load_demonstrations(args.data, split, split_seed=0)
        errors = []
        for batch in ordered_batches(ChunkDataset(episodes, policy.config.chunk_size), 64, policy.io_spec.camera_names):
            with torch.no_grad():
                actions, _ = policy.act(batch, deterministic=True)
            errors.append((actions - batch["action"]).abs()[batch["action_mask"]].numpy())  # (valid steps, A)
        errors = np.concatenate(errors)
        print(f"{split}: mean |error| {errors.mean(0).round(4)}; > 1/8 range {(errors > RANGES / 8).mean(0).round(3)}; "
              f"> 1/2 range {(errors > RANGES / 2).mean(0).round(3)}")  # fmt: skip


def slots(args) -> None:
    policy = load(args.policy, False)
    episodes, _ = load_demonstrations(args.data, "train", split_seed=0)
    dataset = ChunkDataset([e for e in episodes if e.task == args.task], policy.config.chunk_size)
    items = [dataset[i] for i, (_, step) in enumerate(dataset.index) if step == args.step]
    batch = collate_chunks(items, policy.io_spec.camera_names)
    with torch.no_grad():
        normalized, mask = policy.expert_actions(batch)
        labels = policy.labels(normalized, mask)
        probabilities = policy.teacher_forced(batch, labels.clamp(min=0))[0].softmax(-1)
    dims = policy.io_spec.action_dim
    for slot in range(labels.shape[1]):
        top = probabilities[:, slot].mean(0).topk(4)
        print(f"slot {slot} (step {slot // dims}, dim {slot % dims}): labels {labels[:, slot].tolist()}; top bins "
              f"{top.indices.tolist()} p {top.values.numpy().round(2).tolist()}")  # fmt: skip


def closed_loop(args) -> None:
    from envs.builtin.tabletop import make_tabletop_env

    policy = load(args.policy, args.mean)
    seeds = json.load(open(args.eval_info))["seeds"]
    env = make_tabletop_env(**ENV_KWARGS)
    total = 0
    for task, task_seeds in seeds.items():
        successes = 0
        for seed in task_seeds[: args.episodes]:
            observation, _ = env.reset(seed=seed, options={"task": task})
            done = success = False
            while not done:
                with torch.no_grad():
                    chunk, _ = policy.act(stack_observations([observation]), deterministic=True)
                for action in chunk[0].numpy():
                    observation, _, terminated, truncated, info = env.step(action)
                    if terminated or truncated:
                        done, success = True, bool(info.get("is_success"))
                        break
            successes += success
        total += successes
        print(f"{task}: {successes}/{min(args.episodes, len(task_seeds))}")
    print(f"overall: {total}/{sum(min(args.episodes, len(s)) for s in seeds.values())}")


def main() -> None:
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("open-loop")
    command.add_argument("policy"), command.add_argument("data"), command.add_argument("--mean", action="store_true")
    command = commands.add_parser("slots")
    command.add_argument("policy"), command.add_argument("data"), command.add_argument("task")
    command.add_argument("step", type=int)
    command = commands.add_parser("closed-loop")
    command.add_argument("policy"), command.add_argument("eval_info"), command.add_argument("episodes", type=int)
    command.add_argument("--mean", action="store_true")
    args = parser.parse_args()
    {"open-loop": open_loop, "slots": slots, "closed-loop": closed_loop}[args.command](args)


if __name__ == "__main__":
    main()
