#!/usr/bin/env bash
# Damaged traces are errors, never crashes: from a small schema 2 trace, make
# deterministic damaged copies (single-bit flips spread over the whole file,
# denser over the superblock and root metadata at its start; truncations;
# zeroed 512-byte blocks; tests/test_traces.c flips every few bytes in
# process, this checks the commands) and run `obcache info` and `obcache verify` on each
# under a timeout. Each must either fail with exactly one stderr line naming
# the copy and an exit status in 1..127 (no signal, no timeout), or succeed;
# a verify that succeeds must report the original content hash, so it read
# the original data (the damage hit bytes no object uses). A flip inside a
# chunk of /layers/000/K must be reported by verify as a checksum mismatch
# naming the dataset, and a token edited through HDF5 (checksums valid) as a
# content hash mismatch.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch trace_damage
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Under LeakSanitizer: HDF5 1.10 itself loses the object headers whose
# checksum fails (allocated while loading them, never freed on that error
# path); those are not ours, and would add lines to stderr. Leaks of our own
# show in every other test, on good files.
printf 'leak:libhdf5\n' >"$dir/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$dir/lsan.supp:print_suppressions=0"

GOOD=$dir/good.h5
"$OBCACHE" synth --layers 2 --heads 2 --kv-heads 1 --head-dim 8 --length 24 --rows 6 --decode 2 \
  --vocab 12 --needle-length 3 --store-attn -o "$GOOD" || fatal "synth"
"$OBCACHE" verify "$GOOD" >"$dir/good.verify" || fatal "verify on the good trace"
HASH=$(sed -n 's/^  content hash \([0-9a-f]\{16\}\) .*/\1/p' "$dir/good.verify")
[ ${#HASH} -eq 16 ] && pass "good trace verifies, content hash $HASH" || fail "no hash in: $(cat "$dir/good.verify")"
SIZE=$(stat -c %s "$GOOD")

# flip COPY OFFSET: flips bit (OFFSET % 8) of the byte at OFFSET.
flip() {
  local byte
  byte=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ (1 << ($2 % 8)))))" |
    dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# The corpus: one line "NAME KIND ARGUMENT" per damaged copy.
{
  for ((off = 0; off < 2048 && off < SIZE; off += 97)); do echo "flip$off flip $off"; done
  for ((i = 0; i < 30; i++)); do off=$((2048 + (SIZE - 2048) * i / 30 + i % 7)); echo "flip$off flip $off"; done
  for frac in 1 20 50 95; do echo "cut$frac cut $((SIZE * frac / 100))"; done
  echo "cut-last cut $((SIZE - 1))"
  for ((i = 0; i < 5; i++)); do echo "zero$i zero $((SIZE * i / 5))"; done
} >"$dir/corpus"
while read -r name kind arg; do
  copy=$dir/$name.h5
  cp "$GOOD" "$copy"
  case $kind in
  flip) flip "$copy" "$arg" ;;
  cut) truncate -s "$arg" "$copy" ;;
  zero) dd if=/dev/zero of="$copy" bs=1 seek="$arg" count=512 conv=notrunc status=none ;;
  esac
done <"$dir/corpus"
pass "$(wc -l <"$dir/corpus") damaged copies of a $SIZE-byte trace"

# verdict NAME CMD: runs `obcache CMD` on the copy NAME and prints one verdict
# line: "good ..." or "bad ...". The limit of 20 s marks a hang: the whole test
# (about 120 runs, two at a time) took 11 s under the sanitizers and 3 s in
# Release (ctest -j2 on the 2-core machine while other builds ran,
# 2026-12-01), so one run takes about 0.2 s and 20 s is about 100x that.
verdict() {
  local name=$1 cmd=$2 copy=$dir/$1.h5 out=$dir/$1.$2.out err=$dir/$1.$2.err
  timeout -k 5 20 "$OBCACHE" "$cmd" "$copy" >"$out" 2>"$err"
  local rc=$? lines
  lines=$(wc -l <"$err")
  if [ "$rc" -eq 0 ]; then
    if [ "$cmd" = verify ] && ! grep -q "^  content hash $HASH " "$out"; then
      echo "bad $name $cmd: passed without the original content hash: $(tr '\n' ' ' <"$out")"
    else
      echo "good $name $cmd: exit 0"
    fi
  elif [ "$rc" -eq 124 ] || [ "$rc" -ge 128 ]; then
    echo "bad $name $cmd: exit $rc (timeout or signal): $(head -c 300 "$err" | tr '\n' ' ')"
  elif [ "$lines" -ne 1 ] || ! grep -qF -- "$copy" "$err"; then
    echo "bad $name $cmd: exit $rc, $lines stderr lines: $(head -c 300 "$err" | tr '\n' ' ')"
  else
    echo "good $name $cmd: exit $rc: $(cat "$err")"
  fi
}
export -f verdict
export dir OBCACHE HASH
cut -d' ' -f1 "$dir/corpus" | sed 's/$/ info/; p; s/ info$/ verify/' |
  xargs -P 2 -L 1 bash -c 'verdict "$0" "$1"' >"$dir/verdicts"
runs=$(wc -l <"$dir/verdicts")
bad=$(grep -c '^bad' "$dir/verdicts")
failed=$(grep -c ': exit [1-9]' "$dir/verdicts")
checksum=$(grep -c 'checksum mismatch' "$dir/verdicts")
if [ "$bad" -eq 0 ]; then
  pass "$runs runs: $failed one-line errors ($checksum checksum mismatches), $((runs - failed)) honest passes"
else
  grep '^bad' "$dir/verdicts" | head -20
  fail "$bad of $runs runs crashed, hung, or failed without one line naming the file"
fi

# A flip in the raw data of a chunk of /layers/000/K: info (which reads no
# tensor) passes, verify names the dataset and the checksum.
OFFSET=$(python3 - "$GOOD" <<'PY' 2>/dev/null
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(f["layers/000/K"].id.get_chunk_info(0).byte_offset + 5)
PY
)
if [ -n "$OFFSET" ]; then
  RAW=$dir/raw.h5
  cp "$GOOD" "$RAW" && flip "$RAW" "$OFFSET"
  "$OBCACHE" info "$RAW" >/dev/null 2>&1 && pass "info passes a raw-data flip (it reads no tensor)" \
    || fail "info on a raw-data flip"
  "$OBCACHE" verify "$RAW" >"$dir/raw.out" 2>"$dir/raw.err"
  rc=$?
  if [ "$rc" -ne 0 ] && grep -qF "$RAW: /layers/000/K: checksum mismatch" "$dir/raw.err" &&
    [ "$(wc -l <"$dir/raw.err")" -eq 1 ]; then
    pass "verify reports the flip: $(cat "$dir/raw.err")"
  else
    fail "verify on a raw-data flip: exit $rc: $(cat "$dir/raw.err")"
  fi
  # A token changed through HDF5 (so its chunk's checksum is valid again):
  # only the content hash can tell.
  EDITED=$dir/edited.h5
  cp "$GOOD" "$EDITED"
  python3 - "$EDITED" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["tokens"][3] = (f["tokens"][3] + 1) % 12
PY
  "$OBCACHE" verify "$EDITED" >"$dir/edited.out" 2>"$dir/edited.err"
  rc=$?
  if [ "$rc" -ne 0 ] && grep -qF "$EDITED: content hash mismatch: recorded $HASH" "$dir/edited.err"; then
    pass "verify reports an edited token: $(cat "$dir/edited.err")"
  else
    fail "verify on an edited token: exit $rc: $(cat "$dir/edited.err")"
  fi
else
  echo "skip  raw-data flip and edited token (h5py missing)"
fi

finish
