#!/usr/bin/env bash
# Runs every experiment of the README's results section, one after the other, then prints the tables.
# Each takes up to 30 minutes on a 2-core CPU. Usage: scripts/reproduce_results.sh [experiment ...]
set -euo pipefail
cd "$(dirname "$0")/.."
make venv
experiments=("$@")
if [ ${#experiments[@]} -eq 0 ]; then
  experiments=(flow_residual_pixels_ppo flow_residual_ppo flow_residual_keypoints_ppo flow_sde_ppo flow_noise_ppo flow_grpo diffusion_ppo gaussian_ppo flow_steered_ppo)
fi
runs=()
for experiment in "${experiments[@]}"; do
  .venv/bin/vla-rl train "experiment=${experiment}"
  runs+=("outputs/${experiment}")
done
.venv/bin/python scripts/results_table.py "${runs[@]}" --plots docs/results
