#!/usr/bin/env bash
# obcache synth / info / verify from the command line: on a good trace info
# and verify succeed; on bad input (missing file, a text file, an unwritable
# output folder, a tampered output) each prints one line naming the path,
# exits non-zero and leaves no file behind.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch trace_cli

# expect_failure NAME PATH CMD...: non-zero exit, exactly one stderr line that
# names PATH, nothing on stdout (unless ALLOW_STDOUT=1: verify prints its
# report before failing).
expect_failure() {
  local name=$1 path=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$dir/err")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -qF -- "$path" "$dir/err" &&
    { [ "${ALLOW_STDOUT:-0}" = 1 ] || [ ! -s "$dir/out" ]; }; then
    pass "$name: exit $rc, $(cat "$dir/err")"
  else
    fail "$name: exit $rc, $lines stderr line(s): $(cat "$dir/err") / stdout: $(head -c 200 "$dir/out")"
  fi
}

GOOD=$dir/good.h5
SMALL=(--layers 2 --heads 4 --kv-heads 2 --head-dim 16 --length 64 --rows 16 --decode 4)
if "$OBCACHE" synth "${SMALL[@]}" --store-attn -o "$GOOD" && [ -f "$GOOD" ]; then
  pass "synth writes $GOOD"
else
  fail "synth writes a small trace"
fi
if "$OBCACHE" info "$GOOD" >"$dir/info"; then
  grep -q "complete: yes" "$dir/info" && grep -q "needle" "$dir/info" && grep -q "2 layers, 4 heads, 2 KV heads" "$dir/info" \
    && pass "info summarises the good trace" || fail "info output lacks the expected lines: $(cat "$dir/info")"
else
  fail "info on a good trace"
fi
if "$OBCACHE" verify "$GOOD" >"$dir/verify"; then
  grep -q "O   worst relative difference" "$dir/verify" && pass "verify passes the good trace: $(grep -c ok "$dir/verify") quantities ok" \
    || fail "verify output: $(cat "$dir/verify")"
else
  fail "verify on a good trace: $(cat "$dir/verify")"
fi
F16=$dir/good-f16.h5
"$OBCACHE" synth "${SMALL[@]}" --dtype f16 --compress 3 -o "$F16" && "$OBCACHE" verify "$F16" >/dev/null \
  && pass "verify passes an f16 trace with its default tolerance" || fail "verify on an f16 trace"

# The trace writer's settings are refused in one text by every command
# that takes them.
for cmd in synth capture upgrade; do
  expect_refused "$cmd --compress 12" "--compress: expected 0..9, got '12'" \
    "$OBCACHE" $cmd --compress 12 "$dir/in.h5" -o "$dir/k.h5"
done
for cmd in synth capture; do
  expect_refused "$cmd --dtype bf16" "--dtype: expected f32 or f16, got 'bf16'" \
    "$OBCACHE" $cmd --dtype bf16 -o "$dir/k.h5"
done

for cmd in synth info verify; do
  "$OBCACHE" $cmd --help >"$dir/help" && grep -q "usage: obcache $cmd" "$dir/help" \
    && pass "$cmd --help" || fail "$cmd --help"
done

MISSING=$dir/missing.h5
expect_failure "info on a missing file" "$MISSING" "$OBCACHE" info "$MISSING"
expect_failure "verify on a missing file" "$MISSING" "$OBCACHE" verify "$MISSING"
TEXT=$dir/notes.txt
echo "not a trace" >"$TEXT"
expect_failure "info on a text file" "$TEXT" "$OBCACHE" info "$TEXT"
expect_failure "verify on a text file" "$TEXT" "$OBCACHE" verify "$TEXT"
NOWHERE=$dir/no-such-folder/out.h5
expect_failure "synth into a missing folder" "$NOWHERE" "$OBCACHE" synth -o "$NOWHERE"
[ ! -e "$dir/no-such-folder" ] && pass "no folder or file created" || fail "synth created $dir/no-such-folder"
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$dir/readonly" && chmod 555 "$dir/readonly"
  expect_failure "synth into a read-only folder" "$dir/readonly/out.h5" "$OBCACHE" synth -o "$dir/readonly/out.h5"
  [ -z "$(ls -A "$dir/readonly")" ] && pass "read-only folder left empty" || fail "files left in the read-only folder"
  chmod 755 "$dir/readonly"
fi
BAD_OPTS=$dir/bad-opts.h5
expect_failure "synth with heads not a multiple of KV heads" "$BAD_OPTS" "$OBCACHE" synth --heads 5 --kv-heads 2 -o "$BAD_OPTS"
[ ! -e "$BAD_OPTS" ] && pass "no file after a refused synth" || fail "$BAD_OPTS left behind"

# A trace whose stored O was tampered with fails verify, naming the trace.
TAMPERED=$dir/tampered.h5
cp "$GOOD" "$TAMPERED"
python3 - "$TAMPERED" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["layers/001/O"][2, 5, 3] += 0.5
PY
ALLOW_STDOUT=1 expect_failure "verify on a tampered O" "$TAMPERED" "$OBCACHE" verify "$TAMPERED"
grep -q "layer 1, head 2, row 5" "$dir/err" && pass "verify names layer 1, head 2, row 5" || fail "verify location: $(cat "$dir/err")"

# Column sums (schema 3): info lists them, verify checks them and fails,
# naming the trace, when an agnostic sum exceeds the all-rows one, when the
# attention sums disagree with the captured rows, or when a count is wrong.
SUMS=$dir/sums.h5
"$OBCACHE" synth "${SMALL[@]}" --rows 64 --column-sums -o "$SUMS" >/dev/null
"$OBCACHE" info "$SUMS" >"$dir/info" 2>&1
grep -q "col_obc_vk" "$dir/info" && grep -q "agnostic, rows \[0, 60)" "$dir/info" &&
  pass "info lists the column sums" || fail "info: $(grep -i col "$dir/info")"
"$OBCACHE" verify "$SUMS" >"$dir/out" 2>&1 && grep -q "column sums: .* ok" "$dir/out" &&
  pass "verify checks the column sums" || fail "verify: $(tail -3 "$dir/out")"
for damage in "col_attn 0 1 2 5.0" "col_attn 1 1 2 0.5" "col_obc_k 0 1 62 1.0" "counts 1 3 0 0"; do
  BAD=$dir/bad-sums.h5
  cp "$SUMS" "$BAD"
  python3 - "$BAD" $damage <<'PY'
import sys, h5py
path, name, variant, head, position, value = sys.argv[1:]
with h5py.File(path, "r+") as f:
    if name == "counts":
        f["column_counts"][int(variant), int(head)] += 1
    else:  # a value the other variant or the captured rows contradict
        f[f"layers/001/{name}"][int(variant), int(head), int(position)] = float(value)
PY
  ALLOW_STDOUT=1 expect_failure "verify on tampered column sums ($damage)" "$BAD" "$OBCACHE" verify "$BAD"
done
expect_failure "synth --column-sums without every prompt row" "$dir/no.h5" \
  "$OBCACHE" synth "${SMALL[@]}" --column-sums -o "$dir/no.h5"

leftovers=$(find "$dir" -name '*.tmp.*' | wc -l)
[ "$leftovers" -eq 0 ] && pass "no temporary files left" || fail "$leftovers temporary files left"
finish
