#!/usr/bin/env bash
# Schema-1 files from the command line: tests/data/trace_v1.h5 and a schema-1
# keep file for it are read (through the child process of
# traces/trace_legacy.h); `obcache upgrade` rewrites each as schema 2 with the
# same info, analysis and offline replay; a damaged schema-1 file (byte
# changes that crash HDF5) is one line naming it and exit 1 for info and
# upgrade, which leaves nothing behind.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
SOURCE=${OBC_SOURCE_DIR:?set OBC_SOURCE_DIR to the source tree}
V1=$SOURCE/tests/data/trace_v1.h5
scratch upgrade
# the converted copies of schema-1 files go to TMPDIR: a private one, checked at the end
export TMPDIR=$dir/tmp
mkdir -p "$TMPDIR"

# refused NAME PATH CMD...: exit 1 and exactly one stderr line naming PATH.
refused() {
  local name=$1 path=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -qF -- "$path" "$dir/err"; then
    pass "$name: $(cat "$dir/err")"
  else
    fail "$name: exit $rc: $(cat "$dir/err")"
  fi
}

# JSON without what names the file or the run (paths, times, command lines).
stable_json() {
  python3 - "$1" <<'PY'
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items()
                if k not in ("path", "created", "command", "command_line", "seconds",
                             "seconds_by_phase", "tool_version", "files")}
    return [strip(x) for x in v] if isinstance(v, list) else v
print(json.dumps(strip(json.load(open(sys.argv[1]))), sort_keys=True, indent=1))
PY
}

check "upgrade --help" "$OBCACHE" upgrade --help
NEW=$dir/v2.h5
if "$OBCACHE" upgrade "$V1" "$NEW" >"$dir/up.out" 2>&1 && grep -q "schema 2" "$dir/up.out"; then
  pass "upgrade: $(cat "$dir/up.out")"
else
  fatal "upgrade of trace_v1.h5: $(cat "$dir/up.out")"
fi
"$OBCACHE" info "$V1" >"$dir/info1" && "$OBCACHE" info "$NEW" >"$dir/info2" || fail "info"
grep -q "schema     version 1" "$dir/info1" && grep -q "schema     version 2" "$dir/info2" &&
  pass "info: version 1 before, 2 after" || fail "info schema lines"
# every line but the file's name, schema, content hash and stored sizes
filter='^(trace|schema|content) |^  (K|V|Q|O|lse|A) '
if diff <(grep -Ev "$filter" "$dir/info1") <(grep -Ev "$filter" "$dir/info2") >"$dir/info.diff"; then
  pass "info identical on the upgraded trace"
else
  fail "info differs: $(cat "$dir/info.diff")"
fi
check "verify the upgraded trace (content hash, every chunk)" "$OBCACHE" verify "$NEW"
"$OBCACHE" analyze "$V1" --buckets 4 -o "$dir/a1" >/dev/null &&
  "$OBCACHE" analyze "$NEW" --buckets 4 -o "$dir/a2" >/dev/null || fail "analyze"
if diff <(stable_json "$dir/a1/report.json") <(stable_json "$dir/a2/report.json") >"$dir/a.diff"; then
  pass "analyze report identical on the upgraded trace"
else
  fail "analyze differs: $(head -20 "$dir/a.diff")"
fi

# A schema-1 file relabelled 2 is refused by the format check.
SAYS2=$dir/says2.h5
cp "$V1" "$SAYS2"
if python3 -c "import h5py" 2>/dev/null; then
  python3 - "$SAYS2" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["schema_version"] = 2
PY
  refused "schema 1 relabelled 2" "$SAYS2" "$OBCACHE" info "$SAYS2"
  grep -q "not in the checksummed HDF5 1.10 format" "$dir/err" && pass "...by the format check" ||
    fail "relabelled: $(cat "$dir/err")"
fi

# Damaged copies: byte changes that crashed HDF5 1.10 (tests/test_legacy.c).
damage() { # damage OUT OFFSET=BYTE...
  local out=$1
  shift
  cp "$V1" "$out"
  for change in "$@"; do
    printf "\\x${change#*=}" | dd of="$out" bs=1 seek="${change%=*}" conv=notrunc status=none
  done
}
damage "$dir/bad1.h5" 2295=83 3492=a1 5341=45 7870=a8
damage "$dir/bad2.h5" 499=07 935=c2 1302=ec 4970=07
for bad in "$dir/bad1.h5" "$dir/bad2.h5"; do
  refused "info on damaged $(basename "$bad")" "$bad" "$OBCACHE" info "$bad"
  refused "upgrade of damaged $(basename "$bad")" "$bad" "$OBCACHE" upgrade "$bad" "$dir/out.h5"
  grep -q "damaged schema-1 file (the HDF5 library failed reading it)" "$dir/err" &&
    pass "...as a damaged schema-1 file" || fail "message: $(cat "$dir/err")"
  [ ! -e "$dir/out.h5" ] && pass "...and no output" || fail "upgrade left $dir/out.h5"
done

# Keep files: one of obcache evict, rewritten in schema 1's format (earliest
# HDF5 format, variable-length strings); it replays as the original, and
# upgrades to one that does too.
if python3 -c "import h5py" 2>/dev/null; then
  "$OBCACHE" evict "$V1" --budget 4 -o "$dir/keep2.h5" >/dev/null 2>&1 || fail "evict"
  python3 - "$dir/keep2.h5" "$dir/keep1.h5" <<'PY'
import sys, h5py
text = h5py.string_dtype()
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w", libver="earliest") as dst:
    for name, dataset in src.items():
        dst.create_dataset(name, data=dataset[()])
    for name, value in src.attrs.items():
        if isinstance(value, bytes):
            value = value.decode()
            dst.attrs.create(name, "obcache-keep/1" if name == "schema" else value, dtype=text)
        else:
            dst.attrs[name] = value
PY
  check "upgrade of a schema-1 keep file" "$OBCACHE" upgrade "$dir/keep1.h5" "$dir/keep-up.h5"
  for keep in keep2 keep1 keep-up; do
    "$OBCACHE" replay --offline "$V1" --keep "$dir/$keep.h5" -o "$dir/r-$keep" >/dev/null 2>&1 ||
      fail "replay --keep $keep.h5"
  done
  for keep in keep1 keep-up; do
    if diff <(stable_json "$dir/r-keep2/offline.json") <(stable_json "$dir/r-$keep/offline.json") \
      >"$dir/r.diff"; then
      pass "offline replay with $keep.h5 identical to the schema-2 keep file's"
    else
      fail "replay with $keep.h5 differs: $(head -20 "$dir/r.diff")"
    fi
  done
else
  echo "skip  schema-1 keep files and relabelling (h5py missing)"
fi

# A child that runs out of time says so, with the variable that sets the
# limit (a valid file larger than its limit allows can be read with it).
refused "a schema-1 read past its time limit" "$V1" \
  env OBC_LEGACY_TIMEOUT=0.000001 "$OBCACHE" info "$V1"
grep -qF "damaged schema-1 file (the HDF5 library failed reading it): still reading after 1e-06 s (OBC_LEGACY_TIMEOUT=SECONDS sets a longer limit)" \
  "$dir/err" && pass "...says which limit" || fail "message: $(cat "$dir/err")"
check "OBC_LEGACY_TIMEOUT=100 reads it" env OBC_LEGACY_TIMEOUT=100 "$OBCACHE" info "$V1" \
  > /dev/null

leftovers=$(find "$dir" \( -name '*.tmp.*' -o -name 'obcache-legacy-*' \) | wc -l)
[ "$leftovers" -eq 0 ] && pass "no temporary files left" || fail "$leftovers temporary files left"
finish
