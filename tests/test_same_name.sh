#!/usr/bin/env bash
# One meaning per name (evict/source.h): every name of the table of score
# sources (obcache evict --list-scores), and every pairing NAME+obc_vk, keeps
# the same set in every command that takes it, on one trace: the trace of an
# eval sample (400 tokens of niah_single_1, kept with --keep-traces). The
# eval's kept sets are evict's (tests/eval_kept_check.py: the count and the
# recall against oracle@T of each set, recomputed from evict's keep file),
# and replay --sweep's, written with --keep-out, are evict's mask for mask,
# as are those of a --pairs sweep (the demo's presets stage). All under the
# query-agnostic protocol at 25%.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
scratch same_name
here=$(dirname "$0")
export OMP_WAIT_POLICY=passive

"$OBCACHE" evict --list-scores >"$dir/table" || fatal "evict --list-scores"
names=$(awk -F'\t' '{ print $1; if ($3 == "pairs") print $1 "+obc_vk" }' "$dir/table" | paste -sd,)
count=$(tr ',' '\n' <<<"$names" | wc -l)
check "the table has every kind of source and pairing ($count names)" \
  eval '[ "$count" -ge 40 ] && grep -q "^recency	recency" "$dir/table" &&
    grep -q "^snapkv	method	pairs" "$dir/table" && grep -q "^attn_maxpool	quantity" "$dir/table"'

# eval: oracle@T is its reference, always replayed; every other name.
eval_names=$(tr ',' '\n' <<<"$names" | grep -vx "oracle" | paste -sd,)
"$OBCACHE" eval --model "$OBC_MODEL" --tasks niah_single_1 --samples 1 --length 400 \
  --scores "$eval_names,oracle@1" --budgets 25% --max-new-tokens 2 --keep-traces --no-figures \
  -o "$dir/e" >"$dir/e.txt" 2>&1 || fatal "eval: $(tail -3 "$dir/e.txt")"
T=$dir/e/cells/0/trace.h5
# evict, one score a process on one thread: the eval scores its policies in
# parallel, one a thread.
for name in ${names//,/ }; do
  OMP_NUM_THREADS=1 "$OBCACHE" evict "$T" --model "$OBC_MODEL" --score "$name" --budget 25% \
    -o "$dir/evict.$name.h5" >/dev/null 2>"$dir/err" || fail "evict --score $name: $(cat "$dir/err")"
done
check "eval's kept sets are evict's, every name" \
  python3 "$here/eval_kept_check.py" "$OBCACHE" "$dir/e" "$dir"

mkdir -p "$dir/sweep" "$dir/pairs"
check "replay --sweep writes every kept set (--keep-out)" \
  eval '"$OBCACHE" replay --sweep "$T" --no-model --model "$OBC_MODEL" --scores "$names" \
    --budgets 25% --keep-out "$dir/sweep" -o "$dir/s" >"$dir/s.txt" 2>&1'
check "a --pairs sweep writes its kept sets" \
  eval '"$OBCACHE" replay --sweep "$T" --no-model --model "$OBC_MODEL" \
    --pairs h2o+obc_vk,snapkv+obc_vk,criticalkv-adakv+obc_vk --budgets 25% \
    --keep-out "$dir/pairs" -o "$dir/p" >"$dir/p.txt" 2>&1'

check "replay --sweep's kept sets are evict's, mask for mask, every name" \
  python3 - "$dir" "$names" <<'EOF'
import os, sys
import h5py
import numpy as np
folder, names = sys.argv[1], sys.argv[2].split(",")
# the name a sweep records a score under: oracle's steps named
recorded = {"oracle": "oracle@1"}
def mask(path):
    with h5py.File(path, "r") as f:
        return f["keep"][()], int(f.attrs["budget"])
checked = 0
for sub, wanted in (("sweep", names), ("pairs", None)):
    files = sorted(os.listdir(os.path.join(folder, sub)))
    given = {recorded.get(n, n): n for n in names}
    got = {given[f.split(".")[1]]: f for f in files}
    if wanted is not None:
        assert sorted(got) == sorted(wanted), sorted(set(wanted) ^ set(got))
    for name, f in got.items():
        a, ka = mask(os.path.join(folder, sub, f))
        b, kb = mask(os.path.join(folder, "evict.%s.h5" % name))
        assert ka == kb and a.shape == b.shape and np.array_equal(a, b), (sub, name)
        checked += 1
assert checked == len(names) + 6, checked
print("     %d kept sets of replay --sweep equal evict's" % checked)
EOF
finish
