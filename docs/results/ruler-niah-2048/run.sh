#!/usr/bin/env bash
# Runs the study's 600 samples, resumably: sample s of every task before
# sample s + 1 of any, so that a partial run is balanced across the tasks.
# Usage (from anywhere): docs/results/ruler-niah-2048/run.sh [--threads N]
# OBCACHE names the binary (default build/obcache). A finished sample is
# skipped; an interrupted one runs again from its start.
set -euo pipefail
cd "$(dirname "$0")/../../.."
dir=docs/results/ruler-niah-2048
obcache=${OBCACHE:-build/obcache}
samples=200 tasks=3
for s in $(seq 0 $((samples - 1))); do
  for t in $(seq 0 $((tasks - 1))); do
    id=$((t * samples + s))
    [ -f "$dir/cells/$id/complete.json" ] && continue
    "$obcache" eval "$dir" --cell "$id" --model models/SmolLM2-135M-Instruct.Q4_1.gguf "$@"
  done
done
