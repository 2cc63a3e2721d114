#!/usr/bin/env bash
# A keep file is bound to the trace it was made for: `obcache evict` records
# the trace's content hash, and `obcache replay` refuses a keep file made for
# another trace of the same shape (two synthetic traces, seeds 1 and 2) with
# one stderr line naming the keep file and both hashes, and writes nothing;
# the keep file's own trace reads it without a warning. Needs traces that
# carry a content hash (schema 2).
set -u
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
DIR=$(mktemp -d "${OBC_TMP:-/tmp}/keep_binding.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
export OMP_WAIT_POLICY=passive
failures=0
pass() { echo "ok    $1"; }
fail() { echo "FAIL  $1"; failures=$((failures + 1)); }

"$OBCACHE" synth --decode 2 --seed 1 -o "$DIR/a.h5" >/dev/null || fail "synth a"
"$OBCACHE" synth --decode 2 --seed 2 -o "$DIR/b.h5" >/dev/null || fail "synth b"
"$OBCACHE" evict "$DIR/a.h5" --budget 10 -o "$DIR/keep_a.h5" >/dev/null || fail "evict a"

# Its own trace: accepted, no warning.
if "$OBCACHE" replay --offline "$DIR/a.h5" --keep "$DIR/keep_a.h5" -o "$DIR/ra" >/dev/null \
  2>"$DIR/err" && [ ! -s "$DIR/err" ]; then
  pass "keep file on its own trace: accepted without a warning"
else
  fail "keep file on its own trace: $(cat "$DIR/err")"
fi

# Another trace of the same shape: refused.
"$OBCACHE" replay --offline "$DIR/b.h5" --keep "$DIR/keep_a.h5" -o "$DIR/rb" >/dev/null 2>"$DIR/err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$(wc -l <"$DIR/err")" -eq 1 ] &&
  grep -qE "keep_a\.h5: made for trace [0-9a-f]{16} \(.*a\.h5\), not this trace [0-9a-f]{16}" \
    "$DIR/err" && [ ! -e "$DIR/rb" ]; then
  pass "keep file of another trace of the same shape: exit $rc, $(cat "$DIR/err")"
else
  fail "keep file of another trace of the same shape: exit $rc, $(cat "$DIR/err")"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
