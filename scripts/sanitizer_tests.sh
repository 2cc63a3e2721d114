#!/usr/bin/env bash
# The sanitizer stage of `make test`: the Check suites and the CLI shell tests
# from BUILD, a build tree configured with OBC_SANITIZE (the Makefile's
# san-build: GCC, address,undefined,float-cast-overflow).
# Not the Python references (they test numbers, not memory), the GPU kit
# (a CUDA build of its own, which sanitizers leave out) nor the
# @Sandybridge/@Prescott twins (other OpenBLAS kernels, the same code of ours).
# Every sanitizer report fails the run, including reports from processes that
# a shell test expects to fail: ASan, UBSan and LeakSanitizer write their
# reports to files under BUILD/sanitizer-reports (log_path), which must stay
# empty; an exit code alone would miss a report from `obcache` run on bad
# input on purpose. halt_on_error=1 (and -fno-sanitize-recover=all in the
# build) makes the first report end the process.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/sanitizer_tests.sh BUILD" >&2; exit 2; }
build=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")/.." && pwd)
reports=$build/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"

# One log_path for both: UBSan shares the common flags of the ASan runtime.
# allocator_may_return_null=1: a failed allocation is an error path of ours
# to test (obc_malloc fails with a message), not a report.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=1:log_path=$reports/report:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/report:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$source_dir/tests/sanitizers/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
# The suites of the SIMD kernels must run them as ASan checks them (the tree
# builds them twice, CMakeLists.txt, obcache_simd_checked): their code in
# those suites calls ASan's reports.
for suite in test_quant_dot test_dequant test_weights; do
  checked=$(objdump -d --no-show-raw-insn "$build/tests/$suite" |
    awk '/^[0-9a-f]+ <(qd_rows|dequant_span_avx2)>:/ { on = 1 } /^$/ { on = 0 } on && /__asan_report/' |
    wc -l)
  if [ "$checked" -eq 0 ]; then
    echo "sanitizer_tests: $suite's SIMD kernels are not ASan-checked (see obcache_simd_checked)" >&2
    exit 1
  fi
done

rc=0
(cd "$build" && ctest -j "${JOBS:-2}" --output-on-failure -LE blas -E '^py_|@|gpu_kit') || rc=$?

found=$(find "$reports" -type f | sort)
if [ -n "$found" ]; then
  echo "sanitizer_tests: $(echo "$found" | wc -l) sanitizer report(s):" >&2
  for f in $found; do
    echo "---- $f" >&2
    # Empty: the process died before it could write its report (under a
    # file-size limit, say); its test's output says which one.
    [ -s "$f" ] || echo "(empty report file: the process could not write its report)" >&2
    cat "$f" >&2
  done
  rc=1
fi
if [ "$rc" != 0 ]; then
  echo "sanitizer_tests: FAILED (reports in $reports)" >&2
  exit 1
fi
echo "sanitizer_tests: no sanitizer report"
