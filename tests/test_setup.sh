#!/usr/bin/env bash
# What scripts/setup.sh installs, and for which Makefile target: on its own
# (make build, install, bench, demo) what builds and runs obcache, without the
# packages only the tests need (slurm-wlm, munge, clang, clang-format, the
# Python references such as transformers); with --tests (make test, which CI's
# .ci/run calls, and san-build, fuzz-build, format, check-format) everything.
# Read from `setup.sh --list` and `make -n`, so nothing is installed.
set -u
. "$(dirname "$0")/lib.sh"
SRC=${OBC_SOURCE_DIR:?set OBC_SOURCE_DIR to the source tree}
scratch setup

TEST_ONLY_APT="clang-format clang-14 libclang-rt-14-dev libomp-14-dev slurm-wlm munge"
TEST_ONLY_PIP="numpy h5py gguf tokenizers safetensors transformers"
RUN_APT="build-essential cmake pkg-config libhdf5-dev libcjson-dev check libopenblas-openmp-dev
         libpcre2-dev gnuplot-nox bible-kjv wamerican"

"$SRC/scripts/setup.sh" --list > "$dir/base.txt" || fatal "setup.sh --list failed"
"$SRC/scripts/setup.sh" --tests --list > "$dir/tests.txt" || fatal "setup.sh --tests --list failed"
cat "$dir/base.txt" "$dir/tests.txt"
words() { sed -n "s/^$1: //p" "$2" | tr ' ' '\n' | sed '/^$/d'; }

# has LIST_FILE MANAGER PACKAGE: whether the list names the package
has() { words "$2" "$1" | grep -qx -- "$3"; }
for p in $RUN_APT; do
  has "$dir/base.txt" apt "$p" || fail "setup.sh: $p (needed to build or run) not installed"
  has "$dir/tests.txt" apt "$p" || fail "setup.sh --tests: $p not installed"
done
for p in $TEST_ONLY_APT; do
  has "$dir/base.txt" apt "$p" && fail "setup.sh: installs $p, which only the tests need"
  has "$dir/tests.txt" apt "$p" || fail "setup.sh --tests: $p not installed"
done
for p in $TEST_ONLY_PIP; do
  has "$dir/base.txt" pip "$p" && fail "setup.sh: installs the Python package $p (tests only)"
  has "$dir/tests.txt" pip "$p" || fail "setup.sh --tests: Python package $p not installed"
done
pass "setup.sh: the run packages alone; --tests adds slurm-wlm, munge, clang, transformers, ..."
if "$SRC/scripts/setup.sh" --bogus > /dev/null 2> "$dir/err"; then
  fail "setup.sh --bogus was accepted"
else
  check "setup.sh refuses an unknown argument" grep -q "unknown argument '--bogus'" "$dir/err"
fi

# setup_of TARGET: the setup.sh lines `make -n TARGET` would run.
setup_of() {
  make -n --no-print-directory -C "$SRC" "$1" BUILD="$dir/build" 2> /dev/null |
    grep -o 'scripts/setup\.sh[^;&|]*' | sed 's/ *$//' | sort -u
}
for target in test san-build fuzz-build format check-format; do
  check "make $target runs setup.sh --tests" test "$(setup_of "$target")" = "scripts/setup.sh --tests"
done
for target in build install bench; do
  check "make $target runs setup.sh without --tests" test "$(setup_of "$target")" = "scripts/setup.sh"
done
# The demo runs setup.sh itself (its first stage) or through `make build`.
demo=$(make -n --no-print-directory -C "$SRC" demo BUILD="$dir/build" 2> /dev/null)
if grep -q 'scripts/demo.sh --build' <<< "$demo"; then
  setup_line=$(sed -n '/^setup() {$/,/^}$/p' "$SRC/scripts/demo.sh" | grep -o 'scripts/setup\.sh.*')
  check "make demo: demo.sh's setup stage runs setup.sh without --tests" \
    test "$setup_line" = "scripts/setup.sh"
else
  check "make demo runs setup.sh without --tests" test "$(setup_of demo)" = "scripts/setup.sh"
fi
check "CI (.ci/run) runs make test" grep -qx 'make test' "$SRC/.ci/run"
finish
