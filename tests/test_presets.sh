#!/usr/bin/env bash
# The eviction presets (evict/preset.h) from the command line on synthetic
# traces: every preset's keep file reads back (replay --offline --keep), the
# pyramid allocation included, and a keep file whose counts contradict its
# pyramid budget is refused; a preset names itself in the keep file's score
# attribute; `replay --sweep --scores` takes presets. Bad input is one
# stderr line, a non-zero exit and no output: a window larger than the
# captured rows, an unknown preset, +obc_x on a preset without an attention
# score, h2o on a trace without column sums, a preset given --window, a
# --scores-out that cannot be written (the keep file goes too),
# criticalkv-snapkv (and criticalkv-adakv) with a model whose shape is not
# the trace's or with no model at all (exit 1). With the model, the
# two-stage presets' sweep selects per budget as evict does.
# tests/test_presets_reference.py checks the numbers.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch presets_cli
export OMP_WAIT_POLICY=passive

SMALL=$dir/small.h5     # 64 positions: no more candidates than a 64-row window
SMALL80=$dir/small80.h5 # 16 captured rows: too few for a 64-row window
BIG=$dir/big.h5         # 96 rows
"$OBCACHE" synth --decode 2 --seed 4 -o "$SMALL" >/dev/null || fatal "synth small"
"$OBCACHE" synth --decode 2 --seed 4 --length 80 -o "$SMALL80" >/dev/null || fatal "synth small80"
"$OBCACHE" synth --layers 4 --length 256 --rows 96 --decode 2 --seed 5 -o "$BIG" >/dev/null ||
  fatal "synth big"

for score in tova snapkv snapkv-max7 pyramidkv adakv-snapkv vatp streaming \
  knorm keydiff tova+obc_k snapkv+obc_vk pyramidkv+obc_v adakv-snapkv+obc_k adakv-vatp \
  adakv-vatp+obc_vk; do
  for mode in aware agnostic; do
    if "$OBCACHE" evict "$BIG" --score "$score" --protocol "$mode" --budget 30% -o "$dir/k.h5" \
      >"$dir/out" 2>"$dir/err" &&
      "$OBCACHE" replay --offline "$BIG" --keep "$dir/k.h5" -o "$dir/r" >/dev/null 2>"$dir/err" &&
      python3 -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); \
v=f.attrs['score']; v=v.decode() if isinstance(v,bytes) else str(v); sys.exit(v.strip('\0')!=sys.argv[2])" \
        "$dir/k.h5" "$score"; then
      pass "$score $mode: keep file reads back ($(cat "$dir/out"))"
    else
      fail "$score $mode: $(cat "$dir/err")"
    fi
  done
done

# The pyramid budgets are checked when the keep file is read: the same mask
# under another budget_given is refused.
"$OBCACHE" evict "$BIG" --score pyramidkv --budget 30% -o "$dir/p.h5" >/dev/null
python3 -c "import h5py,numpy,sys; f=h5py.File(sys.argv[1],'r+'); \
f.attrs['budget_given']=numpy.bytes_('20%')" "$dir/p.h5"
expect_refused "pyramid counts against another budget" "but the pyramid allocation of budget 20%" \
  "$OBCACHE" replay --offline "$BIG" --keep "$dir/p.h5" -o "$dir/k.h5"

# Presets in a sweep, beside a generic score.
if "$OBCACHE" replay --sweep "$BIG" --no-model --scores tova,snapkv+obc_vk,attn \
  --budgets 10%,40% -o "$dir/sweep" >"$dir/out" 2>"$dir/err" &&
  [ "$(wc -l <"$dir/sweep/replay_sweep.csv")" -eq 7 ]; then
  pass "replay --sweep --scores tova,snapkv+obc_vk,attn"
else
  fail "replay --sweep with presets: $(cat "$dir/err")"
fi

expect_refused "window beyond the captured rows" \
  "--score snapkv needs the 64 query rows ending at position 79, but the trace captures 16" \
  "$OBCACHE" evict "$SMALL80" --score snapkv --protocol aware --budget 40% -o "$dir/k.h5"
expect_refused "no more candidates than the window" \
  "--score pyramidkv scores with a window of 64 query rows and needs more candidates than that" \
  "$OBCACHE" evict "$SMALL" --score pyramidkv --budget 40% -o "$dir/k.h5"
expect_refused "unknown method" "--score snapkw+obc_k: unknown score" \
  "$OBCACHE" evict "$BIG" --score snapkw+obc_k --budget 40% -o "$dir/k.h5"
expect_refused "unknown score lists the methods" \
  "Published methods, each as its reference implementation runs it: h2o, observed-attention, tova" \
  "$OBCACHE" evict "$BIG" --score tova2 --budget 40% -o "$dir/k.h5"
expect_refused "+obc on a preset without attention" "knorm has no attention score to replace" \
  "$OBCACHE" evict "$BIG" --score knorm+obc_vk --budget 40% -o "$dir/k.h5"
expect_refused "unknown inner score" "unknown score 'obc_q' inside the method" \
  "$OBCACHE" evict "$BIG" --score tova+obc_q --budget 40% -o "$dir/k.h5"
expect_refused "h2o without column sums" \
  "the trace has no accumulated column sums (capture it without --no-column-sums)" \
  "$OBCACHE" evict "$BIG" --score h2o --budget 40% -o "$dir/k.h5"
expect_refused "a preset fixes its window" "a preset fixes its own window" \
  "$OBCACHE" evict "$BIG" --score tova --window 8 --budget 40% -o "$dir/k.h5"
expect_refused "budget below one token" "keeps 0 of the 256 candidates" \
  "$OBCACHE" evict "$BIG" --score tova --protocol aware --budget 0.001 -o "$dir/k.h5"
expect_refused "--scores-out into a missing folder: no keep file either" "does not exist" \
  "$OBCACHE" evict "$BIG" --score tova --budget 40% -o "$dir/k.h5" --scores-out "$dir/no/s.csv"
expect_refused "--scores-out names its format" "the name says the format: FILE.csv" \
  "$OBCACHE" evict "$BIG" --score tova --budget 40% -o "$dir/k.h5" --scores-out "$dir/s.txt"
# The same scores as CSV and as HDF5 in analyze's layout, with the trace's hash.
if "$OBCACHE" evict "$BIG" --score snapkv+obc_vk --budget 40% -o "$dir/k.h5" \
  --scores-out "$dir/s.csv" >/dev/null 2>"$dir/err" &&
  "$OBCACHE" evict "$BIG" --score snapkv+obc_vk --budget 40% -o "$dir/k2.h5" \
    --scores-out "$dir/s.h5" >/dev/null 2>>"$dir/err" &&
  python3 - "$dir/s.csv" "$dir/s.h5" "$dir/k2.h5" <<'EOF'
import csv, sys
import h5py
rows = list(csv.DictReader(open(sys.argv[1])))
text = lambda v: (v.decode() if isinstance(v, bytes) else str(v)).strip("\0")
with h5py.File(sys.argv[2], "r") as f, h5py.File(sys.argv[3], "r") as k:
    got = f["snapkv+obc_vk"][()]
    assert text(f.attrs["trace_hash"]) == text(k.attrs["trace_hash"]) != "", f.attrs["trace_hash"]
assert got.shape[:2] == (4, 2) and got.size == len(rows), (got.shape, len(rows))
for r in rows:
    assert got[int(r["layer"]), int(r["kv_head"]), int(r["position"])] == float(r["score"]), r
EOF
then
  pass "--scores-out FILE.h5: the CSV's scores, [layers, kv_heads, candidates], the trace's hash"
else
  fail "--scores-out FILE.h5: $(cat "$dir/err")"
fi
rm -f "$dir/k2.h5" "$dir/s.csv" "$dir/s.h5"
# expect_exit1 NAME TEXT CMD...: expect_refused, with exit status 1.
expect_exit1() {
  local name=$1 text=$2
  shift 2
  expect_refused "$name" "$text" "$@"
  "$@" >/dev/null 2>&1
  local rc=$?
  [ "$rc" -eq 1 ] && pass "$name: exit 1" || fail "$name: exit $rc, expected 1"
  rm -f "$dir/k.h5"
}
MODEL=${OBC_MODEL:-}
if [ -n "$MODEL" ] && [ -e "$MODEL" ]; then
  expect_exit1 "criticalkv-snapkv: the model does not match the trace" \
    "--score criticalkv-snapkv: the model $MODEL does not match the trace (expected 4 layers, 4 heads, 2 KV heads, head dim 16" \
    "$OBCACHE" evict "$BIG" --score criticalkv-snapkv --budget 40% --model "$MODEL" -o "$dir/k.h5"
  expect_exit1 "criticalkv-snapkv in replay: the model does not match the trace" \
    "the model $MODEL does not match the trace" \
    "$OBCACHE" replay --offline "$BIG" --score criticalkv-snapkv --budget 40% --model "$MODEL" \
    -o "$dir/k.h5"
  expect_exit1 "criticalkv-adakv: the model does not match the trace" \
    "--score criticalkv-adakv: the model $MODEL does not match the trace" \
    "$OBCACHE" evict "$BIG" --score criticalkv-adakv --budget 40% --model "$MODEL" -o "$dir/k.h5"
  # On a trace of the model: the keep file reads back, and the sweep's
  # per-budget two-stage selection is evict's (same offline rel_error).
  REAL=$dir/real.h5
  "$OBCACHE" capture --length 256 --depth 50 --haystack kjv --seed 3 --rows 128 --decode 2 \
    --model "$MODEL" -o "$REAL" >/dev/null 2>&1 || fatal "capture with the model"
  for score in criticalkv-snapkv criticalkv-adakv+obc_k; do
    "$OBCACHE" replay --sweep "$REAL" --no-model --scores "$score" --budgets 10%,40% \
      --model "$MODEL" -o "$dir/csweep" >/dev/null 2>"$dir/err" ||
      fail "$score sweep: $(cat "$dir/err")"
    for budget in 10% 40%; do
      if "$OBCACHE" evict "$REAL" --score "$score" --budget "$budget" --model "$MODEL" \
        -o "$dir/ck.h5" >/dev/null 2>"$dir/err" &&
        "$OBCACHE" replay --offline "$REAL" --keep "$dir/ck.h5" -o "$dir/cr" >/dev/null \
          2>>"$dir/err" &&
        python3 -c "import csv,json,sys; \
row=[r for r in csv.DictReader(open(sys.argv[1])) if r['budget']==sys.argv[3]][0]; \
off=json.load(open(sys.argv[2]))['overall']['rel_error']; \
sys.exit(abs(float(row['rel_error'])-off)>1e-5*off)" \
          "$dir/csweep/replay_sweep.csv" "$dir/cr/offline.json" "$budget"; then
        pass "$score $budget: evict's kept set replays as the sweep's"
      else
        fail "$score $budget: sweep and evict differ: $(cat "$dir/err")"
      fi
    done
    rm -rf "$dir/csweep"
  done
else
  echo "skip  criticalkv-snapkv with the model (OBC_MODEL not set or missing)"
fi
expect_exit1 "criticalkv-snapkv: no such model" "$dir/no-model.gguf" \
  "$OBCACHE" evict "$BIG" --score criticalkv-snapkv --budget 40% --model "$dir/no-model.gguf" \
  -o "$dir/k.h5"
expect_refused "criticalkv-snapkv takes no +obc_x" "criticalkv-snapkv has no attention score to replace" \
  "$OBCACHE" evict "$BIG" --score criticalkv-snapkv+obc_vk --budget 40% -o "$dir/k.h5"
if "$OBCACHE" evict --help | grep -q "criticalkv-snapkv  kvpress CriticalKV"; then
  pass "evict --help lists criticalkv-snapkv"
else
  fail "evict --help lists criticalkv-snapkv"
fi
if "$OBCACHE" evict --help | grep -q "criticalkv-adakv  kvpress CriticalAdaKV" &&
  "$OBCACHE" evict --help | grep -q "adakv-vatp    AdaKV with VATP"; then
  pass "evict --help lists adakv-vatp and criticalkv-adakv"
else
  fail "evict --help lists adakv-vatp and criticalkv-adakv"
fi
if "$OBCACHE" evict --help | grep -q "adakv-snapkv  SnapKV's scores, AdaKV allocation"; then
  pass "evict --help lists the presets"
else
  fail "evict --help lists the presets"
fi

finish
