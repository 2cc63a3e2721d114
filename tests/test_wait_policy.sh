#!/usr/bin/env bash
# CLI test of the default OpenMP wait policy (docs/CLI.md, "Threads"): with neither
# OMP_WAIT_POLICY nor GOMP_SPINCOUNT set, every command runs with
# GOMP_SPINCOUNT=1000, a short spin before sleeping (common/obc_startup.c sets it and
# runs itself again, because libgomp reads it before main), and libgomp really
# took it; a user's own
# setting is kept; the arguments survive the restart; no warning is printed.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_TMP:?}"
# The suite's environment sets passive for every test: this one needs it unset.
unset OMP_WAIT_POLICY GOMP_SPINCOUNT OMP_DISPLAY_ENV
scratch wait_policy

"$OBCACHE" version > "$dir/unset.out" 2> "$dir/unset.err"
check "unset: version succeeds" test $? -eq 0
check "unset: version reports the short spin" \
  grep -qx "openmp  OMP_WAIT_POLICY unset GOMP_SPINCOUNT=1000" "$dir/unset.out"
check "unset: nothing on stderr" test ! -s "$dir/unset.err"
grep "^openmp" "$dir/unset.out" | sed 's/^/     /'

OMP_WAIT_POLICY=active "$OBCACHE" version > "$dir/active.out"
check "OMP_WAIT_POLICY=active is kept" grep -qx "openmp  OMP_WAIT_POLICY=active" "$dir/active.out"
OMP_WAIT_POLICY=passive "$OBCACHE" version > "$dir/passive.out"
check "OMP_WAIT_POLICY=passive is kept, no spin count added" \
  grep -qx "openmp  OMP_WAIT_POLICY=passive" "$dir/passive.out"
GOMP_SPINCOUNT=5000 "$OBCACHE" version > "$dir/spin.out"
check "GOMP_SPINCOUNT alone is kept" \
  grep -qx "openmp  OMP_WAIT_POLICY unset GOMP_SPINCOUNT=5000" "$dir/spin.out"

# What the OpenMP runtime itself took: libgomp prints its settings at start-up
# under OMP_DISPLAY_ENV=verbose (each process image once; the last block is
# the one that runs the command). libgomp's own default would be 300000. Other OpenMP runtimes print no GOMP_SPINCOUNT.
OMP_DISPLAY_ENV=verbose "$OBCACHE" version > /dev/null 2> "$dir/display.err"
if grep -q "GOMP_SPINCOUNT" "$dir/display.err"; then
  last=$(grep "GOMP_SPINCOUNT" "$dir/display.err" | tail -n 1)
  check "libgomp runs the command with spin count 1000" test "$last" = "  GOMP_SPINCOUNT = '1000'"
  echo "     $last"
else
  echo "skip libgomp's spin count (not libgomp)"
fi

# Every argument, spaces included, reaches the restarted process.
"$OBCACHE" "no such command" --x "a b" 2> "$dir/args.err"
check "arguments kept: unknown command exits 2" test $? -eq 2
check "arguments kept: the command name is intact" \
  grep -q "unknown command 'no such command'" "$dir/args.err"
check "arguments kept: one line on stderr" test "$(wc -l < "$dir/args.err")" -eq 1

finish
