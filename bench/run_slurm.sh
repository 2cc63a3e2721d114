#!/usr/bin/env bash
# Wall time of one sweep grid (2 lengths x 3 depths of the default model at
# 160-200 tokens, as tests/test_slurm.sh) run three ways on this machine: in
# one process (`obcache sweep DIR`), and as a Slurm array of 2 and of 3 tasks
# with its merge (scripts/slurm/submit.sh) on a one-node cluster started here
# (scripts/slurm/local_cluster.sh; needs root, slurm-wlm and munge). Each
# merge is compared with the one-process run. A figure, not a test.
#
# usage: bench/run_slurm.sh [BUILD_DIR]   (LENGTHS=160,200 DEPTHS=0,50,100 to change the grid)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
obcache=$(cd "$build" && pwd)/obcache
PATH=$PATH:/usr/sbin
command -v slurmctld >/dev/null || { echo "run_slurm: slurm-wlm not installed, skipped"; exit 0; }
work=$(mktemp -d)
trap 'scripts/slurm/local_cluster.sh stop "$work/cluster"; rm -rf "$work"' EXIT
scripts/slurm/local_cluster.sh start "$work/cluster" > /dev/null
export SLURM_CONF=$work/cluster/slurm.conf OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
"$obcache" sweep --lengths "${LENGTHS:-160,200}" --depths "${DEPTHS:-0,50,100}" --haystack noise \
  --decode 2 --rows 16 --plan -o "$work/plan" > /dev/null
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }

mkdir -p "$work/one" && cp "$work/plan/plan.json" "$work/one/"
t=$(now)
"$obcache" sweep "$work/one" > /dev/null && "$obcache" sweep "$work/one" --merge > /dev/null
one=$(since "$t")
cells=$(grep -c '"id"' "$work/plan/plan.json")
printf '%-34s %8s  %s\n' "grid of $cells cells, $(nproc) cores" "wall s" "merge"
printf '%-34s %8.1f  %s\n' "one process" "$one" "(reference)"
for tasks in 2 3; do
  d=$work/array$tasks
  mkdir -p "$d" && cp "$work/plan/plan.json" "$d/"
  t=$(now)
  scripts/slurm/submit.sh "$d" "$tasks" --obcache "$obcache" --logs "$d/logs" > /dev/null
  read -r a m < "$d/logs/last-submit"
  while squeue -h -j "$a,$m" | grep -q .; do sleep 0.2; done
  wall=$(since "$t")
  same=differs
  cmp -s "$d/summary.csv" "$work/one/summary.csv" && cmp -s "$d/index.html" "$work/one/index.html" &&
    same="byte-identical"
  printf '%-34s %8.1f  %s\n' "Slurm array of $tasks tasks + merge" "$wall" "$same"
done
