#!/usr/bin/env bash
# The pre-RoPE query statistics behind the expected_attention preset from the
# command line, on a short capture with the default model: info lists them,
# verify checks them, and a copy edited with h5py (an asymmetric q q^T sum, a
# NaN mean, a wrong row count, a negative variance, a zero RoPE frequency)
# is refused by verify and by evict with one stderr line naming the file and
# the problem; a change that passes those checks (a mean moved by 1e-6) is
# caught by verify's content hash, which covers them. A trace without them (captured with --no-column-sums, or
# synthetic) still opens, and the preset is refused in one line naming the
# trace and what is missing; so is the query-aware protocol on a trace with a
# template tail. tests/test_expected_attention_reference.py
# checks the numbers.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}"
if [ ! -r "$OBC_MODEL" ]; then
  echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"
  exit 0
fi
scratch expected_attention
export OMP_WAIT_POLICY=passive

GOOD=$dir/good.h5
PLAIN=$dir/plain.h5
SYNTH=$dir/synth.h5
common=(--length 128 --depth 50 --haystack kjv --seed 3 --rows 16 --decode 2 --model "$OBC_MODEL")
"$OBCACHE" capture "${common[@]}" -o "$GOOD" >/dev/null 2>&1 || fatal "capture"
"$OBCACHE" capture "${common[@]}" --no-column-sums -o "$PLAIN" >/dev/null 2>&1 ||
  fatal "capture --no-column-sums"
"$OBCACHE" synth --decode 2 --seed 4 --rows 64 --column-sums -o "$SYNTH" >/dev/null || fatal "synth"

"$OBCACHE" info "$GOOD" >"$dir/out" 2>&1
check "info lists q_sum, q_outer and the query statistics" \
  grep -q "q_outer .*f64" "$dir/out"
grep -q "pre-RoPE query statistics" "$dir/out" || fail "info: no query statistics line"
"$OBCACHE" verify "$GOOD" >"$dir/out" 2>&1
check "verify checks the query statistics" grep -q "query statistics: .* ok" "$dir/out"
if "$OBCACHE" evict "$GOOD" --score expected_attention --protocol agnostic --budget 30% \
  -o "$dir/k.h5" >"$dir/out" 2>"$dir/err"; then
  pass "expected_attention agnostic: $(cat "$dir/out")"
else
  fail "expected_attention agnostic: $(cat "$dir/err")"
fi
# aware candidates end at the question's end, before the template tail: the
# trace has no statistics of those rows.
expect_refused "expected_attention aware on a trace with a tail" \
  "$GOOD: --score expected_attention under --protocol aware needs the query statistics" \
  "$OBCACHE" evict "$GOOD" --score expected_attention --protocol aware --budget 30% -o "$dir/k.h5"

expect_refused "no query statistics (--no-column-sums)" "$PLAIN: --score expected_attention: the trace has no pre-RoPE query statistics" \
  "$OBCACHE" evict "$PLAIN" --score expected_attention --budget 30% -o "$dir/k.h5"
expect_refused "no query statistics (synthetic, column sums only)" "$SYNTH: --score expected_attention: the trace has no pre-RoPE query statistics" \
  "$OBCACHE" evict "$SYNTH" --score expected_attention --budget 30% -o "$dir/k.h5"
"$OBCACHE" info "$PLAIN" >/dev/null 2>&1 || fail "a trace without query statistics does not open"

python3 -c 'import h5py' 2>/dev/null || { echo "skip  tampered query statistics (h5py missing)"; finish; }
# tamper KIND COPY: a copy of GOOD with its statistics edited as KIND says.
tamper() {
  python3 - "$1" "$GOOD" "$2" <<'PY'
import sys, shutil, h5py, numpy as np
kind, good, out = sys.argv[1:4]
shutil.copy(good, out)
with h5py.File(out, "r+", libver=("v110", "v110")) as f:
    d = int(f.attrs["head_dim"])
    outer = f["layers/002/q_outer"]
    if kind == "asymmetric":
        x = outer[1, 3]
        x[1] += 1e-3 * abs(x[1]) + 1e-6  # [0][1] no longer equals [1][0]
        outer[1, 3] = x
    elif kind == "nan":
        x = f["layers/001/q_sum"][0]
        x[0, 5] = np.nan
        f["layers/001/q_sum"][0] = x
    elif kind == "count":
        c = f["query_counts"][()]
        c[0] += 1
        f["query_counts"][...] = c
    elif kind == "variance":  # sum q_0^2 far below (sum q_0)^2 / count
        x = outer[0, 0]
        x[0] = 0.0
        outer[0, 0] = x
    elif kind == "moved":
        x = f["layers/000/q_sum"][1]
        x[0, 0] += 1e-6
        f["layers/000/q_sum"][1] = x
    elif kind == "frequency":
        w = f["rope_inv_freq"][()]
        w[3] = 0.0
        f["rope_inv_freq"][...] = w
PY
}
for case in "asymmetric|q_outer, rows all, head 3: [0][1]|expected a symmetric sum" \
  "nan|q_sum, rows agnostic, head 0, [5]: NaN|expected finite" \
  "count|/query_counts, rows agnostic|rows, expected" \
  "variance|q_outer, rows agnostic, head 0: variance of [0]|expected >= 0" \
  "frequency|/rope_inv_freq[3] is 0|expected a finite frequency > 0"; do
  IFS='|' read -r kind where what <<<"$case"
  copy=$dir/$kind.h5
  tamper "$kind" "$copy" || { fail "$kind: h5py could not edit it"; continue; }
  expect_refused "verify refuses $kind" "$copy: " "$OBCACHE" verify "$copy"
  grep -qF -- "$where" "$dir/err" && grep -qF -- "$what" "$dir/err" ||
    fail "verify $kind: the message does not name '$where' / '$what'"
  expect_refused "evict refuses $kind" "$what" \
    "$OBCACHE" evict "$copy" --score expected_attention --protocol agnostic --budget 30% -o "$dir/k.h5"
done
copy=$dir/moved.h5
tamper moved "$copy" || fail "moved: h5py could not edit it"
expect_refused "verify's content hash covers the query statistics" \
  "$copy: content hash mismatch" "$OBCACHE" verify "$copy"
finish
