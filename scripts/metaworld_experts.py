"""MetaWorld's scripted experts through vla-rl on every task: success rate and episode lengths.

Run: ``python scripts/metaworld_experts.py [EPISODES]`` (seeds 0..EPISODES-1, no cameras, MetaWorld's
500-step horizon); prints one line per task, then all of them as JSON.
"""

from __future__ import annotations

import json
import sys

from envs.experts import get_expert
from envs.metaworld.env import make_metaworld_env
from envs.metaworld.tasks import METAWORLD_TASKS


def main(episodes: int) -> dict[str, dict[str, float]]:
    rows = {}
    for task in METAWORLD_TASKS:
        env = make_metaworld_env(task=task, cameras=())
        expert = get_expert("metaworld", task, env, noise_std=0.0, seed=0)
        wins, lengths = 0, []
        for seed in range(episodes):
            observation, _ = env.reset(seed=seed)
            expert.reset(seed=seed)
            steps, done = 0, False
            while not done:
                observation, _, terminated, truncated, info = env.step(expert.act(observation))
                steps, done = steps + 1, terminated or truncated
            wins += int(info["is_success"])
            lengths.append(steps)
        env.close()
        rows[task] = {"success": wins / episodes, "max_len": max(lengths), "mean_len": sum(lengths) / len(lengths)}
        print(task, rows[task], flush=True)
    return rows


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)))
