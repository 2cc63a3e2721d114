#!/usr/bin/env bash
# The derived data of a schema-3 trace cross-checked. A short capture
# (300 tokens: column sums, pre-RoPE query statistics, a question span) is
# copied and forged with h5py, one impossibility a copy: a column sum of
# attention above the rows that saw its position, a head's sums that do not
# add up to its rows, an agnostic sum above the all-rows one, has_column_sums / has_query_stats flags that
# contradict the datasets, agnostic rows that reach into the question, a
# query covariance with a 2x2 minor below 0, RoPE frequencies that do not
# follow rope_theta (one frequency, or the base itself changed). Each is
# refused by `obcache verify` and by the `obcache evict` that relies on it
# (h2o reads the attention sums, expected_attention the query statistics)
# with exit 1 and one stderr line naming the file, and evict writes no keep
# file. Two impossibilities only `verify` can see: a covariance whose 2x2
# minors hold but which is not positive semi-definite (a 3x3 block of
# correlations 0.9, 0.9, -0.9), and an obc_v sum above col_attn x ||v||^2
# from the stored V; evict accepts those. And one only verify recomputes: an
# obc_v sum below what the captured rows alone add up to (from the exact
# attention and the stored V). The unforged copy passes both.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
python3 -c 'import h5py' 2>/dev/null || { echo "skip  forged derived data (h5py missing)"; exit 0; }
scratch trace_derived
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1

GOOD=$dir/good.h5
"$OBCACHE" capture --model "$OBC_MODEL" --length 300 --depth 50 --threads 2 -o "$GOOD" \
  >"$dir/capture.txt" 2>&1 || fatal "capture: $(tail -3 "$dir/capture.txt")"

# forge KIND COPY: a copy of GOOD edited as KIND says.
forge() {
  python3 - "$1" "$GOOD" "$2" <<'PY'
import sys, shutil, h5py, numpy as np
kind, good, out = sys.argv[1:4]
shutil.copy(good, out)
with h5py.File(out, "r+", libver=("v110", "v110")) as f:
    n = int(f.attrs["n_prompt"])
    def covariance(v, h):
        count = float(f["query_counts"][v])
        s = f["layers/000/q_sum"][v, h]
        d = s.shape[0]
        o = f["layers/000/q_outer"][v, h].reshape(d, d)
        return count, s, o
    def store_outer(v, h, o):
        q = f["layers/000/q_outer"]
        data = q[...]
        data[v, h] = o.reshape(-1)
        q[...] = data
    if kind == "col-attn-above-rows":
        data = f["layers/000/col_attn"][...]
        data[1, 0, n - 1] = 3.0  # one row saw the last position
        f["layers/000/col_attn"][...] = data
    elif kind == "col-attn-total":
        data = f["layers/000/col_attn"][...]
        data[1, 2, 280] += 5  # 20 rows saw position 280, none of them agnostic
        f["layers/000/col_attn"][...] = data
    elif kind == "agnostic-above-all":
        data = f["layers/000/col_obc_vk"][...]
        data[0, 1, 10] = 2 * data[1, 1, 10] + 1
        f["layers/000/col_obc_vk"][...] = data
    elif kind == "has-query-stats-0":
        f.attrs["has_query_stats"] = np.int64(0)
    elif kind == "has-column-sums-2":
        f.attrs["has_column_sums"] = np.int64(2)
    elif kind == "agnostic-into-question":
        f.attrs["agnostic_rows"] = np.int64(int(f["spans/question"][0]) + 4)
    elif kind == "covariance-2x2":
        count, s, o = covariance(1, 0)
        m = s / count
        c = o / count - np.outer(m, m)
        c01 = 1.5 * np.sqrt(c[0, 0] * c[1, 1])
        o[0, 1] = o[1, 0] = count * (c01 + m[0] * m[1])
        store_outer(1, 0, o)
    elif kind == "covariance-3x3":
        count, s, o = covariance(1, 0)
        m = s / count
        c = o / count - np.outer(m, m)
        sd = np.sqrt(np.diag(c))
        for a, b, r in ((0, 1, 0.9), (0, 2, 0.9), (1, 2, -0.9)):
            o[a, b] = o[b, a] = count * (r * sd[a] * sd[b] + m[a] * m[b])
        store_outer(1, 0, o)
    elif kind == "inv-freq-one":
        data = f["rope_inv_freq"][...]
        data[3] *= 1.01
        f["rope_inv_freq"][...] = data
    elif kind == "rope-theta-10000":
        f.attrs["rope_theta"] = 10000.0
    elif kind == "obc-v-halved":  # position 290: only captured rows saw it
        data = f["layers/000/col_obc_v"][...]
        data[1, 0, 290] *= 0.5
        f["layers/000/col_obc_v"][...] = data
    elif kind == "obc-v-above-bound":
        data = f["layers/000/col_obc_v"][...]
        data[1, 0, 5] = 1e6
        f["layers/000/col_obc_v"][...] = data
    elif kind != "untouched":
        sys.exit("unknown kind " + kind)
PY
}

# refused KIND PATTERN COMMAND...: COMMAND (verify or evict) on the copy
# refused in one line naming it; evict leaves no keep file.
refused() {
  local kind=$1 pattern=$2 cmd=$3 copy=$dir/$1.h5
  shift 3
  [ -e "$copy" ] || forge "$kind" "$copy" || { fail "$kind: h5py could not forge it"; return; }
  rm -f "$dir/k.h5"
  fails "$kind $cmd" "$pattern" "$cmd" "$copy" "$@"
  grep -qF "$copy" "$dir/err" || fail "$kind $cmd: the message does not name $copy"
  [ ! -e "$dir/k.h5" ] || fail "$kind $cmd: wrote a keep file"
}
h2o=(--score h2o --budget 10% -o "$dir/k.h5")
expected=(--score expected_attention --budget 10% -o "$dir/k.h5")

refused col-attn-above-rows "col_attn, rows all, head 0, position 299: 3, more than the 1 rows" verify
refused col-attn-above-rows "more than the 1 rows that saw it allow" evict "${h2o[@]}"
refused col-attn-total "col_attn, rows all, head 2: the sums add up to .*not to the 300 rows" verify
refused col-attn-total "head 2: the sums add up to" evict "${h2o[@]}"
refused agnostic-above-all "col_obc_vk, head 1, position 10: the agnostic sum .* exceeds the sum over all" \
  verify
refused agnostic-above-all "the agnostic sum .* exceeds" evict --score h2o+obc_vk --budget 10% \
  -o "$dir/k.h5"
refused has-query-stats-0 "has_query_stats is 0 (or absent), but the trace holds /query_counts" verify
refused has-query-stats-0 "has_query_stats is 0" evict "${h2o[@]}"
refused has-column-sums-2 "has_column_sums is 2 (expected 0 or 1)" verify
refused agnostic-into-question "agnostic_rows is 266, but the rows before the question are 262" verify
refused agnostic-into-question "agnostic_rows is 266" evict "${h2o[@]}"
refused covariance-2x2 "q_outer, rows all, head 0: covariance \[0\]\[1\] = .* exceeds" verify
refused covariance-2x2 "not positive semi-definite" evict "${expected[@]}"
refused covariance-3x3 "q_outer, rows all, head 0: the covariance is not positive semi-definite" \
  verify
refused inv-freq-one "/rope_inv_freq\[3\] is .*, but rope_theta 100000" verify
refused inv-freq-one "/rope_inv_freq\[3\]" evict "${expected[@]}"
refused rope-theta-10000 "/rope_inv_freq\[1\] is .*, but rope_theta 10000 (scaling none)" verify
refused rope-theta-10000 "but rope_theta 10000" evict "${expected[@]}"
refused obc-v-above-bound "col_obc_v, rows all, head 0, position 5: 1000000 exceeds col_attn" verify
refused obc-v-halved "col_obc_v, rows all, head 0, position 290: stored .*captured rows' terms alone sum" \
  verify

# What only verify sees: evict, which reads each value once, accepts it.
for kind in covariance-3x3 obc-v-above-bound; do
  score=expected_attention
  [ "$kind" = covariance-3x3 ] || score=h2o+obc_v
  check "$kind: evict ($score) takes the cheap checks only" \
    "$OBCACHE" evict "$dir/$kind.h5" --score $score --budget 10% -o "$dir/k_$kind.h5"
done

forge untouched "$dir/copy.h5" || fatal "copy"
check "the unforged copy verifies" "$OBCACHE" verify "$dir/copy.h5"
check "the unforged copy evicts" "$OBCACHE" evict "$dir/copy.h5" "${expected[@]}"
finish
