#!/usr/bin/env bash
# Benchmark of the model and offline replays of `obcache replay --sweep` (not a test):
# the demo's sweep (11 scores x 6 budgets, --recent 8 --sinks 4) on one trace,
# batched (the default: every kept set's free-running and teacher-forced
# sequences decoded together) against one set at a time (--batch 1), for each
# thread count, in the same run. Prints the model-replay time that the sweep
# reports on stderr (the scores and the offline replay, the same for both,
# are left out), the whole command's wall time, the ratio, and how many
# cells' replay figures differ between the two (they agree up to rounding:
# docs/SCIENCE.md, "Batched replay"). Then the offline replay alone
# (--no-model): all kept sets together (the default) against one set at a time
# (--offline-batch 1), the offline time the sweep reports, the whole command's
# wall time, the ratio, and whether the output files are byte-identical
# (docs/SCIENCE.md, "Offline replay of many sets").
#
# usage: bench/run_replay.sh [BUILD_DIR [TRACE]]
#   TRACE default: demo-out/trace.h5 (scripts/demo.sh); when missing, a
#   4096-token trace is captured as the demo does into BUILD_DIR/bench-replay/.
#   STEPS=4 decode steps replayed (the demo replays all 16 captured)
#   THREADS="1 2" thread counts; SCORES=... BUDGETS=... other grids
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OBCACHE=$BUILD/obcache
WORK=${BENCH_WORK:-$BUILD/bench-replay}
TRACE=${2:-demo-out/trace.h5}
STEPS=${STEPS:-4}
THREADS=${THREADS:-1 2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$WORK"
grid=()
[ -n "${SCORES:-}" ] && grid+=(--scores "$SCORES")
[ -n "${BUDGETS:-}" ] && grid+=(--budgets "$BUDGETS")

if [ ! -s "$TRACE" ]; then
  TRACE=$WORK/trace.h5
  if [ ! -s "$TRACE" ]; then
    echo "bench: capturing $TRACE (4096 tokens, 16 decode steps, as scripts/demo.sh)"
    "$OBCACHE" capture --length 4096 --depth 50 --haystack kjv --seed 1 --rows 128 --decode 16 \
      -o "$TRACE" >/dev/null
  fi
fi

# run NAME THREADS ARGS...: the sweep; prints "model_seconds offline_seconds wall_seconds"
# (model_seconds "-" without the model).
run() {
  local name=$1 threads=$2
  shift 2
  local start end
  start=$(date +%s.%N)
  OMP_NUM_THREADS=$threads "$OBCACHE" replay --sweep "$TRACE" --steps "$STEPS" --recent 8 \
    --sinks 4 "${grid[@]}" "$@" -o "$WORK/$name" >/dev/null 2>"$WORK/$name.err"
  end=$(date +%s.%N)
  local model offline
  model=$(sed -n 's/.*model replay of [0-9]* kept sets took \([0-9.]*\) s.*/\1/p' "$WORK/$name.err")
  offline=$(sed -n 's/.*offline replay of [0-9]* kept sets took \([0-9.]*\) s.*/\1/p' "$WORK/$name.err")
  printf '%s %s %.2f\n' "${model:--}" "$offline" "$(echo "$end - $start" | bc)"
}

# Cells whose model-replay columns (needle_found .. kl_forced) differ beyond
# printing precision, and the largest KL difference.
compare() {
  python3 - "$1" "$2" <<'PYEOF'
import csv, sys
a = list(csv.DictReader(open(sys.argv[1])))
b = list(csv.DictReader(open(sys.argv[2])))
cols = ["needle_found", "needle_prefix", "needle_tokens", "agreement", "first_divergence"]
differ = sum(any(x[c] != y[c] for c in cols) for x, y in zip(a, b))
kl = max(abs(float(x["kl_forced"]) - float(y["kl_forced"])) for x, y in zip(a, b))
print(f"{differ} of {len(a)} cells differ in answer metrics, max |KL difference| {kl:.2g}")
PYEOF
}

echo "bench: replay --sweep $TRACE --steps $STEPS --recent 8 --sinks 4 ${grid[*]}"
printf '%-8s %-30s %-30s %-8s %s\n' threads "one at a time (model/offline/all)" \
  "batched (model/offline/all)" ratio "agreement"
for t in $THREADS; do
  read -r m1 o1 w1 < <(run "one-$t" "$t" --batch 1)
  read -r mb ob wb < <(run "batch-$t" "$t")
  ratio=$(echo "scale=1; $m1 / $mb" | bc)
  printf '%-8s %-30s %-30s %-8s %s\n' "$t" "${m1} s / ${o1} s / ${w1} s" \
    "${mb} s / ${ob} s / ${wb} s" "${ratio}x" \
    "$(compare "$WORK/one-$t/replay_cells.csv" "$WORK/batch-$t/replay_cells.csv")"
done

echo
echo "bench: replay --sweep $TRACE --no-model --recent 8 --sinks 4 ${grid[*]}"
printf '%-8s %-26s %-26s %-8s %s\n' threads "one at a time (offline/all)" \
  "sets together (offline/all)" ratio "outputs"
for t in $THREADS; do
  read -r _ o1 w1 < <(run "offline-one-$t" "$t" --no-model --offline-batch 1)
  read -r _ om wm < <(run "offline-many-$t" "$t" --no-model)
  ratio=$(echo "scale=1; $o1 / $om" | bc)
  same="byte-identical"
  for f in replay_cells.csv replay_sweep.csv; do
    cmp -s "$WORK/offline-one-$t/$f" "$WORK/offline-many-$t/$f" || same="$f differs"
  done
  printf '%-8s %-26s %-26s %-8s %s\n' "$t" "${o1} s / ${w1} s" "${om} s / ${wm} s" "${ratio}x" \
    "$same"
done
