#!/usr/bin/env bash
# Benchmark of `obcache eval` against its floor (not a test): the demo's eval
# settings (scripts/demo.sh: niah_single_1, niah_single_2, niah_multikey_1 at
# 2048 tokens, snapkv+obc_k and tova+obc_vk at 10/25/50%, query-agnostic,
# 16 answer tokens), SAMPLES per task, for each thread count, in one run.
# Per sample it prints the eval's wall time and its stages (sample.json's
# stage_seconds) against the floor measured in the same run: the prefill of
# the same prompt (obcache generate --max-new-tokens 1: prefill only) plus one
# batched decode of every kept set of the sample (bench_batch over the
# context before the question: the question and template tail re-run, then
# the answer's decode steps, logits only where the eval needs them), and
# the ratio eval / floor; then, per thread count, the median ratio over the
# samples (a sample's eval and its floor run minutes apart, so one ratio
# carries the machine's drift; the median is the figure to quote).
#
# usage: bench/run_eval.sh [BUILD_DIR]
#   SAMPLES=1 per task; THREADS="2 1"
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OBCACHE=$BUILD/obcache
WORK=${BENCH_WORK:-$BUILD/bench-eval}
SAMPLES=${SAMPLES:-1}
THREADS=${THREADS:-2 1}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -x "$BUILD/bench/bench_batch" ] || cmake --build "$BUILD" --target bench_batch >/dev/null
mkdir -p "$WORK"

for t in $THREADS; do
  dir=$WORK/eval-t$t
  rm -rf "$dir"
  "$OBCACHE" eval --threads "$t" --tasks niah_single_1,niah_single_2,niah_multikey_1 \
    --samples "$SAMPLES" --length 2048 --pairs snapkv+obc_k,tova+obc_vk --budgets 10%,25%,50% \
    --protocol agnostic --max-new-tokens 16 --no-figures -o "$dir" >/dev/null
  echo "eval at $t thread(s): seconds per sample against the floor (prefill + one batched decode)"
  printf '  %-26s %6s %7s %6s %6s %6s | %7s %7s %6s %5s\n' sample eval capture load scores \
    replay prefill batched floor ratio
  : > "$WORK/ratios"
  for cell in "$dir"/cells/*/; do
    read -r name tokens candidates sets steps eval capture load scores replay < <(python3 - \
      "$cell" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "sample.json"))
p = json.load(open(sys.argv[1] + "prompt.json"))
t = s["stage_seconds"]
cand = s["rows"][0]["candidates"]
print(f'{s["task"]}_S{s["sample"]}', s["tokens"], cand, len(s["rows"]), s["decode"],
      s["seconds"], t["capture"], t["load"], t["scores"], t["replay"])
PY
    )
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['text'], end='')" \
      "$cell/prompt.json" > "$WORK/prompt.txt"
    prefill=$(OMP_NUM_THREADS=$t "$OBCACHE" generate --threads "$t" --prompt-file \
      "$WORK/prompt.txt" --max-new-tokens 1 2>&1 >/dev/null | sed -n 's/.*prefill [0-9.]* tokens\/s (\([0-9.]*\) s).*/\1/p')
    rerun=$((tokens - candidates))
    per_step=$(OMP_NUM_THREADS=$t "$BUILD/bench/bench_batch" "" "$candidates" "$sets" \
      $((rerun + steps)) $((rerun - 1)) | sed -n 's/ *batched: *\([0-9.]*\) s per step.*/\1/p')
    python3 - "$name" "$eval" "$capture" "$load" "$scores" "$replay" "$prefill" "$per_step" \
      "$((rerun + steps))" "$WORK/ratios" <<'PY'
import sys
name, ev, cap, load, sc, rep, pre, step, n = sys.argv[1:10]
batched = float(step) * int(n)
floor = float(pre) + batched
print(f"  {name:26s} {float(ev):6.2f} {float(cap):7.2f} {float(load):6.2f} {float(sc):6.2f} "
      f"{float(rep):6.2f} | {float(pre):7.2f} {batched:7.2f} {floor:6.2f} {float(ev) / floor:5.2f}")
with open(sys.argv[10], "a") as f:
    f.write(f"{float(ev) / floor}\n")
PY
  done
  python3 - "$WORK/ratios" "$t" <<'PY'
import statistics, sys
r = [float(x) for x in open(sys.argv[1])]
print(f"  median eval / floor at {sys.argv[2]} thread(s) over {len(r)} samples: "
      f"{statistics.median(r):.2f} (range {min(r):.2f}-{max(r):.2f})")
PY
done
