#!/usr/bin/env bash
# Keep files whose attributes contradict the trace or their own mask, forged
# with h5py from one that `obcache evict --protect needle` wrote for a
# synthetic trace (needle [21, 37), question [56, 64)): a protect attribute
# naming a span the trace does not have, a protected position the mask
# drops, a budget attribute that budget_given (and the rule) do not give
# over the candidates, and protocol or protect values carrying control
# bytes. `obcache replay --offline` must refuse each with exit 1 and one
# stderr line naming the keep file, control bytes escaped, and write
# nothing; the unforged copy replays.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch keep_forged
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
python3 -c 'import h5py' 2>/dev/null || { echo "skip  forged keep files (h5py missing)"; finish; }

"$OBCACHE" synth --decode 2 --question-length 8 -o "$dir/t.h5" >/dev/null || fatal "synth"
"$OBCACHE" evict "$dir/t.h5" --budget 20 --protect needle -o "$dir/good.h5" >/dev/null ||
  fatal "evict"

# forge KIND COPY: a copy of the keep file edited as KIND says.
forge() {
  python3 - "$1" "$dir/good.h5" "$2" <<'PY'
import sys, shutil, h5py, numpy as np
kind, good, out = sys.argv[1:4]
shutil.copy(good, out)
with h5py.File(out, "r+", libver=("v110", "v110")) as f:
    def text(name, value):
        f.attrs.create(name, np.bytes_(value))
    if kind == "protect-unknown-span":
        text("protect", b"needle,answer")
    elif kind == "protect-dropped":
        # position 21 (the needle's first) dropped in layer 0, KV head 1,
        # a kept unprotected candidate traded for it: the counts still hold.
        keep = f["keep"][...]
        free = [q for q in range(56) if keep[0, 1, q] == 0 and not 21 <= q < 37]
        assert keep[0, 1, 21] == 1 and free
        keep[0, 1, 21], keep[0, 1, free[0]] = 0, 1
        f["keep"][...] = keep
    elif kind == "budget-given-10":
        text("budget_given", b"10")
    elif kind == "budget-given-30%":
        text("budget_given", b"30%")
    elif kind == "protocol-escapes":
        text("protocol", b"\x1b[31maware\nx")
    elif kind == "protect-escapes":
        text("protect", b"needle,\x1b[2Jx")
    elif kind != "untouched":
        sys.exit("unknown kind " + kind)
PY
}

# refused KIND PATTERN: replay of the copy refused in one line naming it.
refused() {
  local kind=$1 pattern=$2 copy=$dir/$1.h5
  forge "$kind" "$copy" || { fail "$kind: h5py could not forge it"; return; }
  rm -rf "$dir/r"
  fails "$kind" "$pattern" replay --offline "$dir/t.h5" --keep "$copy" -o "$dir/r"
  grep -qF "$copy" "$dir/err" || fail "$kind: the message does not name $copy"
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$dir/err"; then
    fail "$kind: control bytes printed raw: $(od -c "$dir/err" | head -3)"
  fi
  [ ! -e "$dir/r" ] || fail "$kind: replay wrote $dir/r"
}

refused protect-unknown-span "--protect answer: no such span (the trace has: needle, question)"
refused protect-dropped "protect names position 21, but keep\[0\]\[1\]\[21\] is 0"
refused budget-given-10 "attribute budget is 20, but budget_given 10 (floor rule) keeps 10 of the 56"
refused budget-given-30% "attribute budget is 20, but budget_given 30% (floor rule) keeps 16 of the 56"
refused protocol-escapes "protocol '\\\\x1b\[31maware\\\\nx'"
refused protect-escapes "attribute protect holds control characters"

forge untouched "$dir/copy.h5" || fatal "copy"
check "the unforged copy replays" \
  "$OBCACHE" replay --offline "$dir/t.h5" --keep "$dir/copy.h5" -o "$dir/ok"
finish
