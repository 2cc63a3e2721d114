#!/usr/bin/env bash
# `obcache analyze` on bad input: a missing trace, a text file, a window or a
# budget out of range, an empty list item, an unwritable -o, --scores-out
# into a missing folder or on a full disk.
# Each must fail with a non-zero exit and ONE line naming the path or option,
# and leave no output file behind.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:-build/obcache}
# The files under test in work/, the command's output beside it in logs/.
scratch analyze_cli
work=$dir/work
logs=$dir/logs
mkdir "$work" "$logs"

"$OBCACHE" synth -o "$work/t.h5" --layers 1 --heads 2 --kv-heads 1 --head-dim 8 \
  --length 64 --rows 8 --decode 2 --seed 3 >/dev/null || fatal "synth"
"$OBCACHE" synth -o "$work/nodecode.h5" --layers 1 --heads 2 --kv-heads 1 --head-dim 8 \
  --length 64 --rows 8 --decode 0 --seed 3 >/dev/null 2>&1 || true
echo "not a trace" > "$work/text.h5"
mkdir "$work/locked" && chmod a-w "$work/locked"

# expect_failure NAME EXPECTED-SUBSTRING ARGS...
expect_failure() {
  local name=$1 expected=$2
  shift 2
  local before after
  before=$(find "$work" | sort)
  "$OBCACHE" analyze "$@" >"$logs/out" 2>"$logs/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$logs/err")
  after=$(find "$work" | sort)
  local msg
  msg=$(cat "$logs/err")
  if [ $rc -eq 0 ]; then
    fail "$name: exit 0"
  elif [ "$lines" -ne 1 ]; then
    fail "$name: expected one line, got $lines: $msg"
  elif [[ "$msg" != *"$expected"* ]]; then
    fail "$name: message lacks '$expected': $msg"
  elif [ "$before" != "$after" ]; then
    fail "$name: left files: $(diff <(echo "$before") <(echo "$after") | grep '^>' )"
  else
    pass "$name: $msg"
  fi
  rm -f "$logs/out" "$logs/err"
}

expect_failure "missing trace" "$work/absent.h5" "$work/absent.h5" -o "$work/o1"
expect_failure "text file" "$work/text.h5" "$work/text.h5" -o "$work/o2"
expect_failure "window too large" "--window" "$work/t.h5" -o "$work/o3" --window 9
expect_failure "window zero" "--window" "$work/t.h5" -o "$work/o3" --window 0
expect_failure "k too large" "--topk" "$work/t.h5" -o "$work/o4" --topk 65
expect_failure "k zero" "--topk" "$work/t.h5" -o "$work/o4" --topk 0
expect_failure "recent not below k" "--recent" "$work/t.h5" -o "$work/o5" --topk 10 --recent 10
# A folder without write permission (not for root, who may write anyway),
# and a folder whose parent is a file.
if [ "$(id -u)" != 0 ]; then
  expect_failure "unwritable -o" "$work/locked" "$work/t.h5" -o "$work/locked/out"
fi
expect_failure "-o under a file" "$work/text.h5" "$work/t.h5" -o "$work/text.h5/out"
expect_failure "scores-out folder missing" "$work/nowhere/s.h5" "$work/t.h5" -o "$work/o6" \
  --scores-out "$work/nowhere/s.h5"
expect_failure "bad oracle" "--oracle 0" "$work/t.h5" -o "$work/o7" --oracle 0
expect_failure "oracle beyond the decode steps" "needs decode steps beyond" "$work/t.h5" -o "$work/o7" --oracle 2-99
expect_failure "empty --window item" "--window: empty item in '1,,2'" "$work/t.h5" -o "$work/o9" \
  --window 1,,2
expect_failure "trailing comma in --topk" "--topk: empty item" "$work/t.h5" -o "$work/o9" --topk 5,
if [ -f "$work/nodecode.h5" ]; then
  expect_failure "no decode rows" "decode rows" "$work/nodecode.h5" -o "$work/o8"
fi

# A disk that fills up, for real: ulimit -f 0 with SIGXFSZ ignored makes
# H5Fcreate of --scores-out fail (EFBIG) after creating its file. One line
# (through a pipe: the limit applies to files) and no S.h5.tmp.PID left.
before=$(find "$work" | sort)
msg=$( (trap '' XFSZ; ulimit -f 0; "$OBCACHE" analyze "$work/t.h5" -o "$work/o10" --quiet \
  --scores-out "$work/s.h5") 2>&1 >/dev/null)
rc=$?
after=$(find "$work" | sort)
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$msg" | wc -l)" -eq 1 ] && [ "$before" = "$after" ]; then
  pass "--scores-out on a full disk: $msg"
else
  fail "--scores-out on a full disk: exit $rc, $msg; left: $(diff <(echo "$before") <(echo "$after") | grep '^>')"
fi

# And a good run still works and writes its files.
if "$OBCACHE" analyze "$work/t.h5" -o "$work/good" --quiet && [ -f "$work/good/report.json" ] \
   && [ -f "$work/good/recall.csv" ]; then
  pass "good run writes report.json and recall.csv"
else
  fail "good run"
fi

finish
