#!/usr/bin/env bash
# Forged schema-2 traces from the command line: consistent attributes over
# datasets that declare shapes no file could hold (K/V (2, 2^60, 16), A
# (4, 20, 2^60), /logits (4, 2^61)) or that were never written (2^30
# positions, chunked, no chunk stored), and values that are wrong though
# well-typed. `info`, `verify` and `analyze` must each refuse every one with
# exit 1 and exactly one stderr line naming the file, within 20 s (no
# signal: no buffer is sized by a product that wraps). Strings with
# control bytes (ESC sequences, newlines) are printed escaped by info. The
# copies are edited with h5py in HDF5 1.10 objects, the format of schema 2.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch trace_forged
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
python3 -c 'import h5py' 2>/dev/null || { echo "skip  forged traces (h5py missing)"; finish; }

GOOD=$dir/good.h5
"$OBCACHE" synth --layers 1 --heads 4 --kv-heads 2 --head-dim 16 --length 64 --rows 16 \
  --decode 4 --vocab 8 --store-attn -o "$GOOD" || fatal "synth"

# forge KIND COPY: a copy of GOOD edited as KIND says.
forge() {
  python3 - "$1" "$GOOD" "$2" <<'PY'
import sys, shutil, h5py, numpy as np
kind, good, out = sys.argv[1:4]
shutil.copy(good, out)
with h5py.File(out, "r+", libver=("v110", "v110")) as f:
    def unwritten(name, shape, chunk):
        dtype = f[name].dtype
        del f[name]
        f.create_dataset(name, shape=shape, dtype=dtype, chunks=chunk, fletcher32=True)
    def positions(n):
        f.attrs["n_prompt"] = np.int64(n - int(f.attrs["n_decode"]))
        f.attrs["n_positions"] = np.int64(n)
        f.attrs["has_tokens"] = np.int64(0)
        del f["tokens"]
        rows = int(f.attrs["n_rows"])
        for n_ in "KV":
            unwritten("layers/000/" + n_, (2, n, 16), (1, 4096, 16))
        unwritten("layers/000/A", (4, rows, n), (1, rows, 4096))
    def text(name, value):
        f.attrs.create(name, np.bytes_(value))
    if kind == "kv-2^60":
        positions(2**60)
    elif kind == "kv-2^30-unwritten":
        positions(2**30)
    elif kind == "logits-2^61":
        f.attrs["vocab_size"] = np.int64(2**61)
        unwritten("logits", (4, 2**61), (1, 4096))
    elif kind in ("attn_scale-nan", "attn_scale-0", "attn_scale-negative"):
        f.attrs["attn_scale"] = {"nan": np.nan, "0": 0.0, "negative": -0.25}[kind.split("-")[1]]
    elif kind == "rope_theta-inf":
        f.attrs["rope_theta"] = -np.inf
    elif kind == "dtype-f16-over-f32":
        text("dtype", b"f16")
    elif kind == "question-into-decode":
        f["spans/question"][1] = int(f.attrs["n_prompt"]) + 2
    elif kind == "needle_found-7":
        f.attrs["needle_found"] = np.int64(7)
    elif kind == "escapes":
        text("model_name", b"\x1b[31mred\nsecond line\x07")
        text("producer", b"synth\rover\x1b]0;title\x07")
PY
}

for kind in kv-2^60 kv-2^30-unwritten logits-2^61 attn_scale-nan attn_scale-0 \
  attn_scale-negative rope_theta-inf dtype-f16-over-f32 question-into-decode needle_found-7; do
  copy=$dir/$kind.h5
  forge "$kind" "$copy" || { fail "$kind: h5py could not forge it"; continue; }
  for cmd in info verify analyze; do
    out=$dir/$kind.$cmd
    if [ "$cmd" = analyze ]; then
      timeout -k 5 20 "$OBCACHE" analyze "$copy" -o "$out.dir" >"$out.out" 2>"$out.err"
    else
      timeout -k 5 20 "$OBCACHE" "$cmd" "$copy" >"$out.out" 2>"$out.err"
    fi
    rc=$?
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$out.err")" -eq 1 ] && grep -qF -- "$copy" "$out.err"; then
      pass "$kind $cmd: exit 1, $(cat "$out.err")"
    else
      fail "$kind $cmd: exit $rc: $(head -c 300 "$out.err" | tr '\n' '|')"
    fi
    [ "$cmd" != analyze ] || [ ! -e "$out.dir" ] || fail "$kind analyze left $out.dir"
  done
done

# Control bytes in strings: info prints them escaped, one line per field.
ESC=$dir/escapes.h5
forge escapes "$ESC" || fatal "h5py could not forge the escapes copy"
if "$OBCACHE" info "$ESC" >"$dir/esc.out" 2>"$dir/esc.err"; then
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$dir/esc.out"; then
    fail "info prints control bytes raw: $(od -c "$dir/esc.out" | head -5)"
  elif grep -qF 'model      \x1b[31mred\nsecond line\x07 (synthetic)' "$dir/esc.out" &&
    grep -qF 'producer   synth\rover\x1b]0;title\x07' "$dir/esc.out"; then
    pass "info escapes control bytes: $(grep '^model ' "$dir/esc.out")"
  else
    fail "info output: $(grep -E '^(model|producer) ' "$dir/esc.out")"
  fi
else
  fail "info on the escapes copy: $(cat "$dir/esc.err")"
fi

finish
