#!/usr/bin/env bash
# The benchmark table of docs/BENCHMARKS.md for this machine, at 1 and 2 threads, in
# one command (about 10 minutes): prefill tokens/s at 512/2048/4096 tokens,
# the attention share at 2048 (and its non-GEMM part against its GEMM part),
# decode tokens/s with stored-type and with fp32 weights and the share of the
# memory roofline (read bandwidth measured in the same run), peak RSS (all
# from bench_model); the demo's replay sweep batched against one set at a
# time (bench/run_replay.sh); and `obcache analyze` against the NumPy
# pseudo-code with one and with 8 windows, and against the GEMM + read floor
# (bench/run_analyze.sh). Every ratio is against a reference measured in the
# same run. Prints a Markdown table; the raw outputs stay in BUILD/bench-summary/.
#
# usage: bench/summary.sh [BUILD_DIR]   (the benchmarks target must be built)
#   TRACE (default demo-out/trace.h5) the trace of the replay and analysis rows
#   STEPS (default 16, the demo's) decode steps of the replay sweep
#   PARSE_ONLY=1 prints the table again from the last run's outputs
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TRACE=${TRACE:-demo-out/trace.h5}
STEPS=${STEPS:-16}
out=$BUILD/bench-summary
mkdir -p "$out"

if [ "${PARSE_ONLY:-0}" != 1 ]; then # PARSE_ONLY=1 reprints the table from $out
  # bench_model waits as obcache does by default (a short spin, then sleep:
  # docs/CLI.md, "Threads"); the replay and analysis scripts set their own.
  for t in 1 2; do
    GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000} "$BUILD/bench/bench_model" --threads "$t" \
      --lengths 512,2048,4096 --decode 64 > "$out/model-$t.txt" 2>&1
  done
  THREADS="1 2" STEPS=$STEPS bench/run_replay.sh "$BUILD" "$TRACE" > "$out/replay.txt" 2>&1
  for t in 1 2; do
    THREADS=$t TRACE=$TRACE bench/run_analyze.sh "$BUILD" > "$out/analyze-$t.txt" 2>&1
  done
fi

# field FILE AWK: the first value the awk program prints for FILE.
field() { awk "$2" "$1" | head -1; }
# The native-weights section of bench_model comes first.
prefill() { field "$out/model-$1.txt" "/^prefill +$2 tokens:/ { print \$4; exit }"; }
attention() {
  field "$out/model-$1.txt" '/^prefill +2048 tokens:/ {
    for (i = 1; i <= NF; i++) { if ($i == "attention") a = $(i + 1); if ($i == "sgemm") g = $(i + 1) }
    sub("%", "", a); sub("%\\)", "", g); printf "%.1f%% (non-GEMM %.1f%%, GEMM %.1f%%)\n", a, a - g, g; exit }'
}
decode() { # THREADS native|f32: "tokens/s (share of the roofline)"
  field "$out/model-$1.txt" "/^decode $2 *:/ { sub(/^decode [a-z0-9]+ *: */, \"\");
    printf \"%s (%s of the roofline)\\n\", \$1, \$4; exit }"
}
peak() { field "$out/model-$1.txt" "/^decode $2 *:/ { print \$(NF - 1) \" \" \$NF; exit }"; }
replay() { # THREADS: one set at a time -> batched, for the model replay and the whole command
  awk -v t="$1" '$1 == t && $3 == "s" && $4 == "/" && $7 == "/" {
    printf "model replay %s s -> %s s (%.1fx); whole command %s s -> %s s (%.1fx)\n",
      $2, $10, $2 / $10, $8, $16, $8 / $16; exit }' "$out/replay.txt"
}
analyze() { # THREADS one|8: "speed-up vs NumPy (CPU), time / floor"
  local pattern="one window"
  [ "$2" = 8 ] && pattern="8 windows"
  awk -F'|' -v p="$pattern" 'index($2, p) { gsub(/ /, "", $5); gsub(/ \(target <= 2x\)/, "", $11);
    split($5, s, "/"); split($11, f, "/"); gsub(/ /, "", f[1]);
    printf "%s vs NumPy (wall; CPU %s), %s the floor\n", s[1], s[2], f[1]; exit }' \
    "$out/analyze-$1.txt"
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
echo "Measured $(date -u +%F) on $cpu, $(nproc) cores, $(free -g | awk '/Mem:/ { print $2 }') GiB;"
echo "OpenBLAS core $("$BUILD/obcache" version | sed -n 's/.*(core \(.*\))/\1/p'), dot-product" \
  "kernel $("$BUILD/obcache" version | sed -n 's/^simd *quantised dot products[a-z ]*: \([a-z0-9]*\).*/\1/p')."
echo "Default model SmolLM2-135M-Instruct Q4_1; trace $TRACE; replay sweep 11 scores x 6 budgets,"
echo "$STEPS decode steps. Raw outputs: $out/."
echo
echo "| figure | 1 thread | 2 threads |"
echo "|---|---|---|"
for n in 512 2048 4096; do
  echo "| prefill $n tokens, tokens/s | $(prefill 1 $n) | $(prefill 2 $n) |"
done
echo "| attention share of prefill at 2048 | $(attention 1) | $(attention 2) |"
echo "| decode after 512, stored-type weights, tokens/s | $(decode 1 native) | $(decode 2 native) |"
echo "| decode after 512, --weights f32, tokens/s | $(decode 1 f32) | $(decode 2 f32) |"
echo "| peak RSS of bench_model, stored-type / f32 | $(peak 1 native) / $(peak 1 f32) | $(peak 2 native) / $(peak 2 f32) |"
echo "| replay sweep, one set at a time -> batched | $(replay 1) | $(replay 2) |"
echo "| analyze, W = 64 | $(analyze 1 one) | $(analyze 2 one) |"
echo "| analyze, the demo's 8 windows | $(analyze 1 8) | $(analyze 2 8) |"
