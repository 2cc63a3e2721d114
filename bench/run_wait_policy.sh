#!/usr/bin/env bash
# Benchmark of the OpenMP wait policy (not a test): decode tokens/s of
# `obcache generate` on an idle machine and next to one busy process (a
# `yes > /dev/null`, free to run anywhere or pinned to CPU 0) and next to one
# per core (every core taken, as on a full cluster node), with spinning
# threads (OMP_WAIT_POLICY=active), libgomp's own default (spin 300000 times,
# then sleep: GOMP_SPINCOUNT=300000, what a program gets that sets
# nothing), passive waiting (OMP_WAIT_POLICY=passive) and obcache's default
# (nothing set: a short spin, GOMP_SPINCOUNT=1000, docs/CLI.md "Threads"). Each
# cell is the median of REPEATS runs; the machine's other users load it too.
# With every core taken, the spinning runs crawl (minutes): LOADS picks the
# rows.
#
# usage: bench/run_wait_policy.sh [BUILD_DIR]   (default build)
#   THREADS (2), MAX_NEW (32), REPEATS (3), MODEL (the SmolLM2 GGUF of models/),
#   LOADS ("none free pinned all")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OBCACHE=$BUILD/obcache
THREADS=${THREADS:-2}
MAX_NEW=${MAX_NEW:-32}
REPEATS=${REPEATS:-3}
LOADS=${LOADS:-none free pinned all}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPT="Tell me a long story about a lighthouse keeper."  # (--chat) runs all MAX_NEW tokens
busy_pid=

stop_busy() {
  local pid
  for pid in $busy_pid; do
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
  busy_pid=
}
trap stop_busy EXIT

# start_busy none|free|pinned|all: the other processes on the machine.
start_busy() {
  local i
  case $1 in
    none) ;;
    free) yes > /dev/null & busy_pid=$! ;;
    pinned) taskset -c 0 yes > /dev/null & busy_pid=$! ;;
    all)
      for ((i = 0; i < $(nproc); i++)); do
        yes > /dev/null &
        busy_pid="$busy_pid $!"
      done
      ;;
  esac
}

# decode_rate POLICY: median decode tokens/s of REPEATS runs. POLICY is
# active, spin (libgomp's default), passive or default (obcache's: nothing
# set, so GOMP_SPINCOUNT=1000).
decode_rate() {
  local rates=() i rate
  for ((i = 0; i < REPEATS; i++)); do
    local env_args=(-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
    case $1 in
      active) env_args+=(OMP_WAIT_POLICY=active) ;;
      spin) env_args+=(GOMP_SPINCOUNT=300000) ;;
      passive) env_args+=(OMP_WAIT_POLICY=passive) ;;
    esac
    rate=$(env "${env_args[@]}" "$OBCACHE" generate --model "$MODEL" --chat --prompt "$PROMPT" \
      --max-new-tokens "$MAX_NEW" --threads "$THREADS" --device cpu 2>&1 > /dev/null |
      sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p')
    rates+=("${rate:-0}")
  done
  printf '%s\n' "${rates[@]}" | sort -g | sed -n "$(((REPEATS + 1) / 2))p"
}

echo "bench: obcache generate, $MAX_NEW new tokens, $THREADS threads, $(nproc) cores," \
  "median of $REPEATS; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  $(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$OBCACHE" version | grep '^openmp')  (default)"
echo "  decode tokens/s by wait policy (default: obcache's, a spin of 1000)"
printf '  %-22s %7s %14s %8s %10s %16s\n' "other processes" "active" "libgomp default" "passive" \
  "default" "default/active"
for load in $LOADS; do
  start_busy "$load"
  a=$(decode_rate active)
  s=$(decode_rate spin)
  p=$(decode_rate passive)
  d=$(decode_rate default)
  stop_busy
  case $load in
    none) label="none (idle)" ;;
    free) label="yes > /dev/null" ;;
    pinned) label="yes pinned to CPU 0" ;;
    all) label="$(nproc) x yes (all cores)" ;;
  esac
  printf '  %-22s %7s %14s %8s %10s %15sx\n' "$label" "$a" "$s" "$p" "$d" \
    "$(awk -v a="$a" -v d="$d" 'BEGIN { printf "%.1f", (a > 0 ? d / a : 0) }')"
done
