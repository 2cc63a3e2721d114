#!/usr/bin/env bash
# A keep file is bound to the trace it was made for: `obcache evict` records
# the trace's content hash, and `obcache replay` refuses a keep file made for
# another trace of the same shape (two synthetic traces, seeds 1 and 2) with
# one stderr line naming the keep file and both hashes, and writes nothing;
# the keep file's own trace reads it without a warning. Needs traces that
# carry a content hash (schema 2).
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch keep_binding
export OMP_WAIT_POLICY=passive

"$OBCACHE" synth --decode 2 --seed 1 -o "$dir/a.h5" >/dev/null || fail "synth a"
"$OBCACHE" synth --decode 2 --seed 2 -o "$dir/b.h5" >/dev/null || fail "synth b"
"$OBCACHE" evict "$dir/a.h5" --budget 10 -o "$dir/keep_a.h5" >/dev/null || fail "evict a"

# Its own trace: accepted, no warning.
if "$OBCACHE" replay --offline "$dir/a.h5" --keep "$dir/keep_a.h5" -o "$dir/ra" >/dev/null \
  2>"$dir/err" && [ ! -s "$dir/err" ]; then
  pass "keep file on its own trace: accepted without a warning"
else
  fail "keep file on its own trace: $(cat "$dir/err")"
fi

# Another trace of the same shape: refused.
"$OBCACHE" replay --offline "$dir/b.h5" --keep "$dir/keep_a.h5" -o "$dir/rb" >/dev/null 2>"$dir/err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
  grep -qE "keep_a\.h5: made for trace [0-9a-f]{16} \(.*a\.h5\), not this trace [0-9a-f]{16}" \
    "$dir/err" && [ ! -e "$dir/rb" ]; then
  pass "keep file of another trace of the same shape: exit $rc, $(cat "$dir/err")"
else
  fail "keep file of another trace of the same shape: exit $rc, $(cat "$dir/err")"
fi

finish
