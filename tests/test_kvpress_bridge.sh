#!/usr/bin/env bash
# The kvpress bridge (python/examples/kvpress_bridge.py), where kvpress,
# torch and transformers are installed: they are not obcache's
# dependencies, so elsewhere (CI among them) the test skips and says so.
# KVPRESS_PYTHON names the interpreter that has them (default python3).
#
# The test model as a Hugging Face folder in f32 (tests/gguf_to_hf.py), a
# trace captured from it, and the bridge running kvpress's own KnormPress
# and SnapKVPress(window_size=64) on the same folder through transformers:
# - KnormPress's scores are obcache knorm's (evict --scores-out) to 2e-4
#   relative: both are -|k| of the same keys, computed by two fp32 forward
#   passes of 30 layers whose sums differ in order (measured: at most
#   2.3e-5, median 2e-7);
# - each press's file keeps, under eval's agnostic protocol, at 10% and 25%,
#   at least 99% of the positions obcache's knorm and snapkv keep (the rest
#   are near-ties that the rounding above may order either way);
# - as an eval --score-cmd, the bridge's SnapKV runs on every sample and its
#   kept sets' recall against oracle@T is obcache snapkv's to 0.01.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_SOURCE_DIR:?}"
py=${KVPRESS_PYTHON:-python3}
"$py" -c 'import kvpress, torch, transformers, h5py, gguf' 2>/dev/null || {
  echo "SKIP: $py cannot import kvpress, torch, transformers, h5py and gguf (not obcache's" \
    "dependencies: pip install kvpress gguf h5py, or name an interpreter that has them in" \
    "KVPRESS_PYTHON)"
  exit 0
}
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
scratch kvpress_bridge
export OMP_NUM_THREADS=2 PYTHONPATH=$OBC_SOURCE_DIR/python${PYTHONPATH:+:$PYTHONPATH}
bridge=$OBC_SOURCE_DIR/python/examples/kvpress_bridge.py

python3 "$OBC_SOURCE_DIR/tests/gguf_to_hf.py" "$OBC_MODEL" "$dir/hf" --tokenizer >/dev/null ||
  fatal "gguf_to_hf.py"
T=$dir/t.h5
"$OBCACHE" capture --model "$dir/hf" --length 1024 --depth 50 --rows 128 --decode 2 -o "$T" \
  >/dev/null 2>"$dir/err" || fatal "capture: $(cat "$dir/err")"
for press in KnormPress SnapKVPress:window_size=64; do
  "$py" "$bridge" "$T" --model "$dir/hf" --press "$press" --name scores \
    -o "$dir/${press%%:*}.h5" >"$dir/bridge.txt" 2>&1 || fatal "bridge $press: $(tail -3 "$dir/bridge.txt")"
done
"$OBCACHE" evict "$T" --score knorm --budget 25% --scores-out "$dir/knorm.h5" -o "$dir/k.h5" \
  >/dev/null 2>"$dir/err" || fatal "evict --scores-out: $(cat "$dir/err")"
check "KnormPress's scores are obcache knorm's to 2e-4 relative" python3 -c '
import sys, h5py, numpy as np
a = h5py.File(sys.argv[1])["knorm"][()]
b = h5py.File(sys.argv[2])["scores"][()]
assert a.shape == b.shape, (a.shape, b.shape)
rel = np.abs(a - b) / np.abs(a)
assert rel.max() <= 2e-4, rel.max()' "$dir/knorm.h5" "$dir/KnormPress.h5"

# same_kept BUILTIN FILE BUDGET: the file's kept set against the built-in's.
same_kept() {
  "$OBCACHE" evict "$T" --score "$1" --budget "$3" -o "$dir/a.h5" >/dev/null 2>"$dir/err" &&
    "$OBCACHE" evict "$T" --score "kv=file:$2" --budget "$3" -o "$dir/b.h5" >/dev/null 2>>"$dir/err" ||
    { fail "$1 at $3: $(cat "$dir/err")"; return; }
  check "kvpress's $1 keeps >= 99% of obcache $1's positions at $3" python3 -c '
import sys, h5py, numpy as np
a, b = (h5py.File(p)["keep"][()].astype(bool) for p in sys.argv[1:])
assert a.sum() == b.sum(), (a.sum(), b.sum())
assert (a & b).sum() >= 0.99 * a.sum(), ((a & b).sum(), a.sum())' "$dir/a.h5" "$dir/b.h5"
}
for budget in 10% 25%; do
  same_kept knorm "$dir/KnormPress.h5" "$budget"
  same_kept snapkv "$dir/SnapKVPress.h5" "$budget"
done

ev=$dir/eval
"$OBCACHE" eval --model "$dir/hf" --tasks niah_single_1 --samples 2 --length 512 \
  --max-new-tokens 8 --scores snapkv --budgets 25% --no-figures \
  --score-cmd "kv_snapkv='$py' '$bridge' --press SnapKVPress:window_size=64" \
  -o "$ev" >"$dir/eval.txt" 2>&1 || fatal "eval --score-cmd: $(tail -3 "$dir/eval.txt")"
check "eval --score-cmd: kvpress's SnapKV has obcache snapkv's recall to 0.01" python3 -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mine = {r["sample"]: r for r in rows if r["policy"] == "kv_snapkv"}
ours = {r["sample"]: r for r in rows if r["policy"] == "snapkv"}
assert mine.keys() == ours.keys() == {"0", "1"}, (mine.keys(), ours.keys())
for s in mine:
    assert mine[s]["kept"] == ours[s]["kept"]
    assert abs(float(mine[s]["recall"]) - float(ours[s]["recall"])) <= 0.01, (mine[s], ours[s])
' "$ev/samples.csv"

finish
