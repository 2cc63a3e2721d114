#!/usr/bin/env bash
# Scores from a file (--score NAME=file:PATH[:DATASET], evict/score_file.h)
# on a synthetic trace: the file analyze --scores-out writes keeps, read
# back, exactly the set of the built-in score it holds, at two budgets,
# under AdaKV and with sinks, a recent window and protected spans; a copy
# written by h5py (float64 and float32) is taken as well; replay --sweep
# keeps the same sets for the file's score and the built-in. Every bad
# file is refused in one stderr line naming it, with no keep file left:
# missing, not HDF5, no such dataset, several and none named, wrong rank
# or shape, another trace's hash or none, integers, NaN, infinity; so are
# a NAME that is a built-in's, one with other characters, and one too long.
# analyze --score reports the file's score's recall next to the quantities,
# equal to the quantity the file holds, against both oracles; a bad file
# stops it with no output folder and no --scores-out file. eval refuses a
# file's score: it captures a trace per sample, the file fits one. With
# the model, replay --sweep's model replay gives the file's score the
# built-in's numbers.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
here=$(dirname "$0")
scratch score_file
export OMP_WAIT_POLICY=passive

# 32 captured rows: evict's default window is min(64, 32) = 32, analyze is
# given the same. --protocol aware: the candidates are the whole prompt, the
# positions analyze scores.
T=$dir/t.h5
"$OBCACHE" synth --layers 3 --length 128 --rows 32 --decode 2 --seed 7 -o "$T" >/dev/null ||
  fatal "synth"
"$OBCACHE" analyze "$T" --window 32 --scores-out "$dir/S.h5" -o "$dir/an" >/dev/null 2>"$dir/err" ||
  fatal "analyze --scores-out: $(cat "$dir/err")"

same() { python3 "$here/score_file_fixtures.py" same "$1" "$2"; }

# evict with the file's score and with the built-in: the same kept set.
same_as_builtin() { # same_as_builtin NAME FILE_SCORE BUILTIN ARGS...
  local name=$1 file_score=$2 builtin=$3
  shift 3
  if "$OBCACHE" evict "$T" --score "$file_score" "$@" -o "$dir/a.h5" >/dev/null 2>"$dir/err" &&
    "$OBCACHE" evict "$T" --score "$builtin" "$@" -o "$dir/b.h5" >/dev/null 2>>"$dir/err" &&
    same "$dir/a.h5" "$dir/b.h5"; then
    pass "$name"
  else
    fail "$name: $(cat "$dir/err")"
  fi
}

for budget in 20% 40; do
  for alloc in uniform adakv; do
    same_as_builtin "analyze's obc_vk, budget $budget, $alloc: obc_vk's set" \
      "mine=file:$dir/S.h5:obc_vk" obc_vk --protocol aware --budget "$budget" --alloc "$alloc"
  done
done
same_as_builtin "analyze's exact_vk with sinks, recent and --protect needle: exact_vk's set" \
  "mine=file:$dir/S.h5:exact_vk" exact_vk --protocol aware --budget 50% --sinks 2 --recent 4 \
  --protect needle --alloc adakv

# evict's own --scores-out (the candidates before the question) and an
# h5py copy of it, as another tool would write it.
"$OBCACHE" evict "$T" --score obc_vk --scores-out "$dir/E.h5" -o "$dir/e.h5" >/dev/null 2>"$dir/err" ||
  fatal "evict --scores-out: $(cat "$dir/err")"
python3 "$here/score_file_fixtures.py" make "$dir/E.h5" obc_vk "$dir" || fatal "fixtures"
same_as_builtin "evict's --scores-out, its only dataset: obc_vk's set" \
  "mine=file:$dir/E.h5" obc_vk --budget 30%
same_as_builtin "an h5py copy (float64): obc_vk's set" "copy=file:$dir/copy.h5" obc_vk \
  --budget 30% --alloc adakv
check "an h5py copy in float32 is taken" \
  "$OBCACHE" evict "$T" --score f32=file:"$dir/f32.h5" -o "$dir/f.h5" >/dev/null
check "the keep file records the file score's NAME" python3 -c "import h5py,sys; \
v=h5py.File(sys.argv[1],'r').attrs['score']; v=v.decode() if isinstance(v,bytes) else str(v); \
sys.exit(v.strip('\0')!='f32')" "$dir/f.h5"
check "the keep file records the file score's file" python3 -c "import h5py,sys; \
v=h5py.File(sys.argv[1],'r').attrs['score_file']; v=v.decode() if isinstance(v,bytes) else str(v); \
sys.exit(v.strip('\0')!=sys.argv[2])" "$dir/f.h5" "$dir/f32.h5"
check "evict --help names the file form" \
  bash -c "\"$OBCACHE\" evict --help | grep -q 'NAME=file:PATH\[:DATASET\]'"

# replay --sweep: the file's score and the built-in keep the same sets.
mkdir -p "$dir/keep"
if "$OBCACHE" replay --sweep "$T" --no-model --protocol aware --budgets 20%,40 \
  --scores "mine=file:$dir/S.h5:obc_vk,obc_vk" --keep-out "$dir/keep" -o "$dir/sweep" \
  >/dev/null 2>"$dir/err"; then
  for budget in 20% 40; do
    check "replay --sweep, budget $budget: mine keeps obc_vk's set" \
      same "$dir/keep/t.mine.$budget.aware.h5" "$dir/keep/t.obc_vk.$budget.aware.h5"
  done
else
  fail "replay --sweep with a file score: $(cat "$dir/err")"
fi

# Bad files and names: one line naming the problem, no keep file.
refused() { # refused NAME TEXT SCORE
  expect_refused "$1" "$2" "$OBCACHE" evict "$T" --score "$3" -o "$dir/k.h5"
}
refused "a missing file" "nothing.h5: cannot open" "m=file:$dir/nothing.h5"
refused "not HDF5" "text.h5: not an HDF5 file" "m=file:$dir/text.h5"
refused "no such dataset" "no dataset nope (it has: attn, attn2" "m=file:$dir/S.h5:nope"
refused "several datasets, none named" "2 datasets (a, b)" "m=file:$dir/two.h5"
refused "rank 2" "expected shape (3, 2, >= " "m=file:$dir/rank.h5"
refused "one KV head" "got (3, 1, " "m=file:$dir/heads.h5"
refused "fewer positions than candidates" "got (3, 2, 3)" "m=file:$dir/short.h5"
refused "another trace's hash" "scores of another trace" "m=file:$dir/other.h5"
refused "no trace_hash" "no trace_hash attribute" "m=file:$dir/nohash.h5"
refused "integers" "expected float32 or float64 values, got integers" "m=file:$dir/ints.h5"
refused "a NaN" "NaN at layer 0, KV head 1, position 2" "m=file:$dir/nan.h5"
refused "an infinity" "infinity at layer 2, KV head 0, position 1" "m=file:$dir/inf.h5"
refused "a built-in's name" "obc_vk is a built-in score's name" "obc_vk=file:$dir/copy.h5"
refused "a NAME with a space" "may hold only" "my score=file:$dir/copy.h5"
refused "a NAME of 32 characters" "1..31 characters" \
  "abcdefghijabcdefghijabcdefghijab=file:$dir/copy.h5"
refused "no PATH" "expected NAME=file:PATH[:DATASET]" "m=file:"
expect_refused "replay --sweep: a bad file" "scores of another trace" \
  "$OBCACHE" replay --sweep "$T" --no-model --scores "m=file:$dir/other.h5" -o "$dir/k.h5"

# analyze: the file's obc_vk has obc_vk's recall (window 32) everywhere.
if "$OBCACHE" analyze "$T" --window 32 --recent 4 --score "mine=file:$dir/S.h5:obc_vk" \
  --score "copy=file:$dir/S.h5:attn" -o "$dir/an2" >"$dir/out" 2>"$dir/err"; then
  check "analyze --score: mine's recall is obc_vk's (both oracles, r = 0 and 4)" \
    python3 "$here/score_file_fixtures.py" recall "$dir/an2/recall.csv" mine obc_vk 32
  check "analyze's summary table lists mine and copy" \
    grep -qE "^  (mine .*)$" "$dir/out"
  check "report.json records the file" grep -q "\"file\":" "$dir/an2/report.json"
else
  fail "analyze --score: $(cat "$dir/err")"
fi
expect_refused "analyze: another trace's file" "scores of another trace" \
  "$OBCACHE" analyze "$T" --score "m=file:$dir/other.h5" --scores-out "$dir/k.h5" -o "$dir/an3"
check "analyze refused: no output folder" test ! -e "$dir/an3"
expect_refused "analyze: evict's file has too few positions" "got (3, 2, 120)" \
  "$OBCACHE" analyze "$T" --score "m=file:$dir/copy.h5" -o "$dir/an3"
expect_refused "analyze: a quantity's name" "obc_vk is taken" \
  "$OBCACHE" analyze "$T" --score "obc_vk=file:$dir/copy.h5" -o "$dir/an3"
expect_refused "analyze: a NAME twice" "m is taken" \
  "$OBCACHE" analyze "$T" --score "m=file:$dir/copy.h5,m=file:$dir/S.h5:attn" -o "$dir/an3"
expect_refused "eval: a score from a file (a trace per sample)" "eval captures a trace per sample" \
  "$OBCACHE" eval --tasks niah_single_1 --lengths 512 --samples 1 \
  --scores "m=file:$dir/S.h5:obc_vk" -o "$dir/k.h5"

# With the model: on a captured trace (its candidates end before the
# prompt does, so evict's --scores-out is the file), model replay in the
# sweep gives the file's score the built-in's every number.
MODEL=${OBC_MODEL:-}
if [ -n "$MODEL" ] && [ -e "$MODEL" ]; then
  REAL=$dir/real.h5
  "$OBCACHE" capture --length 256 --depth 50 --haystack kjv --seed 3 --rows 128 --decode 2 \
    --model "$MODEL" -o "$REAL" >/dev/null 2>&1 || fatal "capture with the model"
  if "$OBCACHE" evict "$REAL" --protocol aware --score obc_vk --scores-out "$dir/RE.h5" \
    -o "$dir/rk.h5" >/dev/null 2>"$dir/err" &&
    "$OBCACHE" replay --sweep "$REAL" --protocol aware --budgets 20%,40 \
      --scores "mine=file:$dir/RE.h5,obc_vk" --model "$MODEL" -o "$dir/rsweep" \
      >/dev/null 2>>"$dir/err"; then
    check "model replay sweep: mine's rows are obc_vk's" python3 -c "import csv,sys; \
rows=list(csv.DictReader(open(sys.argv[1]))); \
key=lambda r: (r['budget'], r['protocol']); \
a={key(r): {k: v for k, v in r.items() if k != 'score'} for r in rows if r['score']=='mine'}; \
b={key(r): {k: v for k, v in r.items() if k != 'score'} for r in rows if r['score']=='obc_vk'}; \
sys.exit(not a or a != b)" "$dir/rsweep/replay_sweep.csv"
  else
    fail "model replay sweep with a file score: $(cat "$dir/err")"
  fi
else
  echo "skip  model replay of a file score (OBC_MODEL not set or missing)"
fi

finish
