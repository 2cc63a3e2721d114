#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz/ (CONTRIBUTING.md, "Fuzzing") in
# a build tree configured with OBC_FUZZ=ON and OBC_SANITIZE=address,undefined
# (`make fuzz`, and the fuzz smoke of `make test`): each harness for SECONDS,
# at most FUZZ_JOBS (default 2) at once, under ASan, UBSan and LeakSanitizer.
# Everything lives in BUILD/fuzz/:
#   seeds/NAME    seed corpus, rebuilt from the fixtures (target fuzz_seeds)
# and, read with the seeds from the source tree, tests/fuzz/regressions/NAME:
# inputs that once made a harness fail (tests/fuzz/regressions/README.md).
#   corpus/NAME   what the fuzzer found interesting; kept, so that the next
#                 run (or a longer one) continues from it
#   crashes/NAME  inputs that crashed, leaked, hung or ran out of memory
#   logs/NAME.log libFuzzer's output of the last run
# FUZZ_SEED=N fixes libFuzzer's random seed (the smoke of `make test` uses 1,
# so that a clean clone explores the same inputs on every run); unset, each
# run draws its own.
# Prints per harness the executions, coverage (cov: edges, ft: features) and
# the inputs saved in crashes/ by this run; exits 1 if any harness failed.
set -euo pipefail
usage="usage: scripts/fuzz.sh BUILD SECONDS [HARNESS...] (harnesses: gguf safetensors tokenizer trace keep_file sweep_folder eval_sample eval_folder legacy)"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
build=$(cd "$1" && pwd)
seconds=$2
shift 2
source_dir=$(cd "$(dirname "$0")/.." && pwd)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(gguf safetensors tokenizer trace keep_file sweep_folder eval_sample eval_folder legacy)
jobs=${FUZZ_JOBS:-2}
for h in "${harnesses[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$h" ] || {
    echo "fuzz: $build/tests/fuzz/fuzz_$h missing (configure with -DOBC_FUZZ=ON; $usage)" >&2
    exit 2
  }
done
cmake --build "$build" --target fuzz_seeds >/dev/null

fuzz=$build/fuzz
mkdir -p "$fuzz/logs"
# A harness that crashes cannot remove its scratch folder: all of them live
# under one TMPDIR that is emptied after the run.
scratch=$(mktemp -d "$fuzz/tmp.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# allocator_may_return_null=1: a damaged file may make HDF5 or our readers
# ask for a huge block; the product sees malloc return NULL and fails with a
# message, which is the path to test (ASan would abort instead). Requests
# over libFuzzer's -malloc_limit_mb (the 2 GB RSS limit) are still findings.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$source_dir/tests/sanitizers/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"

# One harness: the corpus first (new inputs go there), the seeds and the
# regressions after it.
# -max_len: the largest seed (SmolLM2's tokenizer.json is ~3.5 MB) must not be
# cut to libFuzzer's default of 1 MB. -timeout: an input that takes longer
# than 20 s is a hang, the limit within which every damaged file must be
# refused; the log's stat::slowest_unit_time_sec shows the margin (under 1 s
# for the trace harness on the 2-core machine, 2026-12-01).
# -malloc_limit_mb for legacy: its schema-1 files are read by HDF5 in a forked
# child (common/obc_child.c) that exists to contain what a damaged file does,
# a huge allocation included; under ASan the child has no address-space
# limit, and libFuzzer's malloc hook, inherited through fork, would save such
# an allocation as the harness's own "oom-" finding while the parent refuses
# the file as designed. The parent's memory is still watched by -rss_limit_mb.
run_one() {
  local h=$1 tmp="$scratch/$1"
  mkdir -p "$fuzz/corpus/$h" "$fuzz/crashes/$h" "$tmp"
  local rc=0 regressions=() limits=()
  [ "$h" = legacy ] && limits=(-malloc_limit_mb=1048576)
  [ -d "$source_dir/tests/fuzz/regressions/$h" ] && regressions=("$source_dir/tests/fuzz/regressions/$h")
  TMPDIR=$tmp "$build/tests/fuzz/fuzz_$h" "$fuzz/corpus/$h" "$fuzz/seeds/$h" "${regressions[@]}" \
    -max_total_time="$seconds" -timeout=20 -max_len=4194304 -print_final_stats=1 \
    -artifact_prefix="$fuzz/crashes/$h/" ${FUZZ_SEED:+-seed="$FUZZ_SEED"} "${limits[@]}" \
    >"$fuzz/logs/$h.log" 2>&1 || rc=$?
  echo "$rc" >"$fuzz/logs/$h.rc"
}

before=$(find "$fuzz/crashes" -type f 2>/dev/null | sort || true)
running=0
for h in "${harnesses[@]}"; do
  run_one "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-12s %10s %7s %7s  %s\n' harness executions cov ft result
for h in "${harnesses[@]}"; do
  log=$fuzz/logs/$h.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  new=$(comm -13 <(echo "$before") <(find "$fuzz/crashes/$h" -type f | sort) | grep -v '/slow-unit-' || true)
  rc=$(cat "$fuzz/logs/$h.rc")
  result=ok
  if [ "$rc" != 0 ] || [ -n "$new" ]; then
    result="FAILED (exit $rc; log $log)"
    failed=1
  fi
  printf '%-12s %10s %7s %7s  %s\n' "$h" "${execs:-?}" "$(echo "$cov" | awk '{print $2}')" \
    "$(echo "$cov" | awk '{print $4}')" "$result"
  for f in $new; do echo "             saved: $f"; done
done
if [ "$failed" = 1 ]; then
  echo "fuzz: a harness failed; reproduce with BUILD/tests/fuzz/fuzz_NAME FILE (CONTRIBUTING.md, \"Fuzzing\")" >&2
  for h in "${harnesses[@]}"; do
    if [ "$(cat "$fuzz/logs/$h.rc")" != 0 ]; then
      echo "---- $h: $fuzz/logs/$h.log (end)" >&2
      grep -v -E '^#[0-9]+ +(NEW|REDUCE|pulse|RELOAD)' "$fuzz/logs/$h.log" | tail -40 >&2
    fi
  done
  exit 1
fi
