#!/usr/bin/env bash
# What scripts/demo.sh prints (`make demo`): one line per stage, numbered out
# of the stages it will run ("demo: [3/9] capture: ..."); the build of
# --build BUILD_DIR is quiet, its output in BUILD_DIR/build.log, whose last
# lines and name are printed when it fails; a stage that fails names its log.
# Both failures are real ones (a compiler that does not exist, a haystack file
# that does not exist), so nothing here runs for long. The whole demo, which
# takes minutes, is `make demo`.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_SOURCE_DIR:?}" "${OBC_TMP:?}"
scratch demo
cd "$OBC_SOURCE_DIR" || fatal "cd $OBC_SOURCE_DIR"

# 1. A build that fails: stage lines only on stdout, the log's tail on stderr.
CMAKE_FLAGS=-DCMAKE_C_COMPILER=/nonexistent JOBS=1 DEMO_OUT=$dir/out1 \
  scripts/demo.sh --build "$dir/build" > "$dir/out1.txt" 2> "$dir/err1.txt"
rc=$?
check "a failed build fails the demo" test "$rc" -ne 0
check "stdout: the header and the lines of stages 1 and 2 of 9" test \
  "$(grep -c '^demo: ' "$dir/out1.txt")" -eq 3 -a \
  "$(sed -n 's/^demo: \[\([0-9]*\/[0-9]*\)\] \([a-z]*\):.*/\1 \2/p' "$dir/out1.txt" | tr '\n' ,)" = \
  "1/9 setup,2/9 build,"
check "stdout: nothing of the build's output" test -z "$(grep -v '^demo: \|^setup: ' "$dir/out1.txt")"
check "the build's output is in BUILD_DIR/build.log" grep -q "CMake Error" "$dir/build/build.log"
check "stderr: the log's last lines, then the failed stage and the log's name" test \
  "$(head -1 "$dir/err1.txt")" = "demo: the last lines of $dir/build/build.log:" -a \
  "$(tail -1 "$dir/err1.txt" | grep -cF "FAILED during stage \"build: CMake Release in $dir/build/ (output in $dir/build/build.log)\" (see the message above; its whole output: $dir/build/build.log)")" -eq 1
grep -q "^  .*CMake Error\|^  .*is not a full path" "$dir/err1.txt" ||
  fail "stderr lacks the log's CMake error: $(cat "$dir/err1.txt")"

# 2. A stage that fails with the obcache given: its line, then the error and
# the stage's log named; 7 stages with the model in the loop, 6 without.
for replay_model in 1 0; do
  total=$((replay_model ? 7 : 6))
  DEMO_OUT=$dir/out2 DEMO_HAYSTACK=$dir/no-such-haystack.txt DEMO_REPLAY_MODEL=$replay_model \
    scripts/demo.sh "$OBCACHE" > "$dir/out2.txt" 2> "$dir/err2.txt"
  rc=$?
  check "a failed capture fails the demo (DEMO_REPLAY_MODEL=$replay_model)" test "$rc" -ne 0
  check "stdout: the header and the line of stage 1 of $total" test \
    "$(wc -l < "$dir/out2.txt")" -eq 2 -a \
    "$(sed -n 2p "$dir/out2.txt" | cut -d' ' -f1-3)" = "demo: [1/$total] capture:"
  check "stderr: obcache's one-line error, then the failed stage and its log" test \
    "$(grep -c "^obcache capture: .*no-such-haystack" "$dir/err2.txt")" -eq 1 -a \
    "$(tail -1 "$dir/err2.txt" | grep -cF "its whole output: $dir/out2/capture.log); partial outputs are in $dir/out2/")" -eq 1
done
finish
