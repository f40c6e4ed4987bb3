#!/usr/bin/env bash
# Reruns published runs from their records and says, for each, whether it reproduced: `vla-rl reproduce` on
# every run.json under docs/results/ (or on the records or run folders given), each into
# outputs/reproduce/<time>/<its path>. Exit status 0 only when every run is identical.
# Usage: scripts/reproduce_results.sh [RECORD_OR_FOLDER ...]
# (VLA_RL="python -m vla_rl.cli" chooses the CLI; REPRODUCE_ROOT another folder than outputs/reproduce)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VLA_RL:-}" ]; then
  if [ -x .venv/bin/vla-rl ]; then VLA_RL=.venv/bin/vla-rl; else VLA_RL=vla-rl; fi
fi
records=("$@")
if [ ${#records[@]} -eq 0 ]; then
  mapfile -t records < <(find docs/results -name run.json -not -path '*/.*' | sort)
fi
if [ ${#records[@]} -eq 0 ]; then
  echo "no run records (run.json) under docs/results; publish runs with scripts/publish_run.py" >&2
  exit 2
fi
stamp=$(date +%Y%m%d-%H%M%S)
failed=0
summary=()
for record in "${records[@]}"; do
  folder=${record%/run.json}
  target="${REPRODUCE_ROOT:-outputs/reproduce}/${stamp}/${folder#docs/results/}"
  $VLA_RL reproduce "$record" --run-dir "$target"
  code=$?
  case $code in
    0) summary+=("identical  $folder") ;;
    1) summary+=("DIFFERS    $folder (rerun in $target)"); failed=1 ;;
    *) summary+=("NOT RERUN  $folder (exit status $code)"); failed=1 ;;
  esac
done
printf '%s\n' "${summary[@]}"
exit $failed
