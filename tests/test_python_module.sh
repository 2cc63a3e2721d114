#!/usr/bin/env bash
# The Python module (python/obcache) installs with pip from the checkout
# (into a scratch folder on PYTHONPATH; NumPy and h5py from the system), and the
# worked examples of docs/PYTHON.md run as written, in order, in a scratch
# folder with the test's obcache on the PATH: a NumPy KNorm written as a
# score file keeps exactly the built-in knorm's set, and a new score (key
# norm x value norm) is analysed and swept; the KNorm as an eval
# --score-cmd gives the built-in's answer on both samples. A block fenced
# "python file=NAME" is saved as NAME, not run. Bad input to write_scores (a
# wrong shape, a NaN) is refused and leaves no file.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_SOURCE_DIR:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
python3 -c 'import h5py, numpy, setuptools, wheel' 2>/dev/null ||
  { echo "SKIP: python3 lacks h5py, numpy, setuptools or wheel (scripts/setup.sh --tests)"; exit 0; }
scratch python_module
export OMP_WAIT_POLICY=passive

# pip builds in the tree it is given: a copy, so that the checkout stays clean.
cp -r "$OBC_SOURCE_DIR/python" "$dir/python"
python3 -m pip install --no-deps --no-build-isolation --no-index --disable-pip-version-check \
  --target "$dir/site" "$dir/python" >"$dir/pip.txt" 2>&1 ||
  fatal "pip install ./python: $(tail -3 "$dir/pip.txt")"
export PYTHONPATH=$dir/site
check "pip install ./python installs the module" \
  python3 -c 'import obcache; obcache.write_scores; obcache.Trace'

# The docs' blocks, in order: sh blocks run by bash, python blocks by
# python3, with obcache (the test's binary, the test's model) found
# on the PATH. pip install is the step above.
mkdir -p "$dir/bin" "$dir/work"
cat >"$dir/bin/obcache" <<SH
#!/bin/sh
case "\$1" in
  capture|replay|eval) cmd=\$1; shift; exec "$OBCACHE" "\$cmd" --model "$OBC_MODEL" "\$@" ;;
  *) exec "$OBCACHE" "\$@" ;;
esac
SH
chmod +x "$dir/bin/obcache"
python3 - "$OBC_SOURCE_DIR/docs/PYTHON.md" "$dir/blocks" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
os.makedirs(sys.argv[2], exist_ok=True)
blocks = re.findall(r"```(sh|python)( file=[\w.]+)?\n(.*?)```", text, re.S)
for i, (kind, file, body) in enumerate(blocks):
    name = f"{i:02d}.{kind}" if not file else f"{i:02d}.file.{file[6:]}"
    open(os.path.join(sys.argv[2], name), "w").write(body)
PY
ok=1
for block in "$dir"/blocks/*; do
  case $block in
    *.sh) (cd "$dir/work" && PATH="$dir/bin:$PATH" \
      bash -e <(grep -v '^pip install ./python$' "$block")) >>"$dir/run.txt" 2>&1 ;;
    *.file.*) cp "$block" "$dir/work/${block##*.file.}" ;;
    *.python) (cd "$dir/work" && python3 "$block") >>"$dir/run.txt" 2>&1 ;;
  esac || { ok=0; fail "docs/PYTHON.md block $(basename "$block"): $(tail -5 "$dir/run.txt")"; break; }
done
[ "$ok" = 1 ] && pass "docs/PYTHON.md's $(ls "$dir/blocks" | wc -l) blocks run as written"
check "the NumPy KNorm keeps the built-in knorm's set" grep -qx "kept sets: the same" "$dir/run.txt"
check "analyze reports the new score's recall" \
  eval 'grep -Eq "^recall rows of kvnorm: [1-9]" "$dir/run.txt"'
check "the sweep replays the new score" grep -q "^kvnorm" "$dir/work/sweep.txt"
check "eval --score-cmd: the NumPy KNorm gives the built-in's answers on 2 samples" \
  grep -qx "4 answers of knorm_np: the built-in's" "$dir/run.txt"

check "write_scores refuses a wrong shape and a NaN, and leaves no file" \
  python3 - "$dir/work/trace.h5" "$dir/work/bad.h5" <<'PY'
import os, sys
import numpy as np
import obcache
with obcache.Trace(sys.argv[1]) as t:
    for bad in (np.zeros((t.n_layers, t.n_kv_heads + 1, t.n_prompt)),
                np.full((t.n_layers, t.n_kv_heads, t.n_prompt), np.nan)):
        try:
            obcache.write_scores(sys.argv[2], t, {"bad": bad})
        except ValueError:
            pass
        else:
            sys.exit("accepted")
leftover = [f for f in os.listdir(os.path.dirname(sys.argv[2])) if f.startswith((".scores", "bad"))]
sys.exit(f"left {leftover}" if leftover else 0)
PY
finish
