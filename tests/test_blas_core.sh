#!/usr/bin/env bash
# CLI test of the BLAS kernel choice (common/obc_startup.c, CONTRIBUTING.md "Test"):
# `obcache version` never reports OpenBLAS's generic SSE-tier kernels on a
# processor with AVX2; where OpenBLAS would fall back to them (simulated with
# OBC_BLAS_DETECTED, since no machine here makes it fall back), obcache runs
# itself again with the family CPUID calls for and says so; a user's own
# OPENBLAS_CORETYPE is kept, even a generic one; a non-generic detection of
# OpenBLAS's is kept. Only `version` runs with the machine's
# OPENBLAS_CORETYPE unset: it computes nothing.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_TMP:?}"
scratch blas_core

core_of() { sed -n 's/^blas .*(core \([A-Za-z0-9()]*\).*/\1/p' "$1"; }
generic='^(Katmai|Coppermine|Northwood|Prescott|Banias|Atom|Core2|Penryn|Dunnington|Nehalem|Opteron|Barcelona|Nano|Bobcat)$'
flags=$(grep -m1 '^flags' /proc/cpuinfo 2> /dev/null)
has() { case " ${flags#*:} " in *" $1 "*) return 0 ;; esac; return 1; }
if has avx512f && has avx512bw && has avx512dq && has avx512vl && has avx2 && has fma; then
  want=SkylakeX
elif has avx2 && has fma; then
  want=Haswell
elif has avx; then
  want=Sandybridge
else
  want=
fi

env -u OPENBLAS_CORETYPE -u "OBC_BLAS_CHOSEN" "$OBCACHE" version > "$dir/own.out" 2> "$dir/own.err"
check "unset: version succeeds" test $? -eq 0
check "unset: nothing on stderr" test ! -s "$dir/own.err"
own=$(core_of "$dir/own.out")
echo "     $(grep '^blas' "$dir/own.out")"
if has avx2; then
  check "unset: no generic core on a CPU with AVX2 ($own)" bash -c "! [[ '$own' =~ $generic ]]"
fi

if [ -n "$want" ]; then
  env -u OPENBLAS_CORETYPE OBC_BLAS_DETECTED=Prescott "$OBCACHE" version > "$dir/fallback.out" \
    2> "$dir/fallback.err"
  check "fallback: version succeeds" test $? -eq 0
  check "fallback: nothing on stderr" test ! -s "$dir/fallback.err"
  check "fallback: OpenBLAS runs $want, chosen by obcache" \
    grep -q "(core $want, chosen by obcache: the installed OpenBLAS does not know this CPU and would run its generic Prescott kernels)" \
    "$dir/fallback.out"
  check "fallback: OpenBLAS's own configuration line names $want too" \
    grep -q " $want MAX_THREADS" "$dir/fallback.out"
  # The arguments and the other defaults survive the restart.
  env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OBC_BLAS_DETECTED=Core2 \
    "$OBCACHE" "no such command" 2> "$dir/args.err"
  check "fallback: arguments kept (unknown command exits 2)" test $? -eq 2
  check "fallback: the command name is intact" grep -q "unknown command 'no such command'" \
    "$dir/args.err"
  env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OBC_BLAS_DETECTED=Core2 \
    "$OBCACHE" version > "$dir/both.out"
  check "fallback: one restart sets the spin count too" \
    grep -qx "openmp  OMP_WAIT_POLICY unset GOMP_SPINCOUNT=1000" "$dir/both.out"
  check "fallback: and the kernels" grep -q "(core $want, chosen by obcache" "$dir/both.out"
else
  echo "skip the fallback (no AVX on this CPU: the generic kernels are the right ones)"
fi

env -u OPENBLAS_CORETYPE OBC_BLAS_DETECTED=Haswell "$OBCACHE" version > "$dir/kept.out"
check "a non-generic detection of OpenBLAS's is kept" \
  grep -q "(core [^,]*, detected by OpenBLAS)" "$dir/kept.out"
OPENBLAS_CORETYPE=Prescott OBC_BLAS_DETECTED=Prescott "$OBCACHE" version > "$dir/user.out"
check "a user's OPENBLAS_CORETYPE=Prescott is kept" \
  grep -q "(core Prescott, set by OPENBLAS_CORETYPE)" "$dir/user.out"
# Run through an explicit dynamic loader, /proc/self/exe is the loader: no
# restart then, and the command still runs.
loader=$(ldd "$OBCACHE" 2> /dev/null | sed -n 's|^\s*\(/[^ ]*ld-linux[^ ]*\) .*|\1|p' | head -n 1)
if [ -n "$loader" ] && [ -x "$loader" ]; then
  "$loader" "$OBCACHE" version > "$dir/loader.out" 2>&1
  check "through $loader: version succeeds" grep -q "^obcache " "$dir/loader.out"
fi
finish
