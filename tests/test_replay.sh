#!/usr/bin/env bash
# obcache evict / replay from the command line on small synthetic traces:
# evict writes a keep file that replay --offline reads and that gives the same
# numbers as the policy options; keeping everything gives zero error; the
# budget sweep (offline) writes its tables and `obcache plot` draws them;
# options of another mode are refused; with the real model,
# the answer-aware oracle@T keeps the needle at 10%, --max-new-tokens N
# replays N - 1 decode steps into an answer of at most N tokens, and the
# sweep's batched model replay fills the same cells as one set at a time. Bad input (budget
# beyond the prompt or <= 0, unknown score, a trace without decode rows, a
# model that does not match the trace, a full disk) is one stderr line,
# non-zero exit and no output file.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch replay_cli
export OMP_WAIT_POLICY=passive

# expect_failure NAME TEXT CMD...: non-zero exit, one stderr line containing TEXT.
expect_failure() {
  local name=$1 text=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$dir/err")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -qF -- "$text" "$dir/err"; then
    pass "$name: exit $rc, $(cat "$dir/err")"
  else
    fail "$name: exit $rc, $lines stderr line(s): $(cat "$dir/err")"
  fi
}

T=$dir/t.h5
"$OBCACHE" synth --decode 4 --seed 3 -o "$T" >/dev/null || fail "synth"
"$OBCACHE" synth --decode 0 -o "$dir/nodecode.h5" >/dev/null || fail "synth without decode rows"

# evict -> keep file -> offline replay equals the same policy given inline.
if "$OBCACHE" evict "$T" --score obc_vk --budget 10% --recent 2 --sinks 1 -o "$dir/keep.h5" >"$dir/out" &&
  grep -q "6..6 kept per KV head" "$dir/out" &&
  "$OBCACHE" replay --offline "$T" --keep "$dir/keep.h5" -o "$dir/a" >/dev/null &&
  "$OBCACHE" replay --offline "$T" --score obc_vk --budget 10% --recent 2 --sinks 1 -o "$dir/b" >/dev/null &&
  cmp -s "$dir/a/offline_heads.csv" "$dir/b/offline_heads.csv" && [ -s "$dir/a/offline.json" ] &&
  [ -s "$dir/a/offline_layers.csv" ] && [ -s "$dir/a/offline_steps.csv" ]; then
  pass "evict + replay --offline --keep equals the inline policy ($(cat "$dir/out"))"
else
  fail "evict + replay --offline --keep"
fi

# Keeping everything: zero error, nothing lost, the needle kept.
if "$OBCACHE" replay --offline "$T" --budget 100% -o "$dir/all" >"$dir/out" &&
  grep -q "relative output error 0 (step 1: 0), attention mass lost 0, needle kept 1" "$dir/out"; then
  pass "budget = everything: zero error"
else
  fail "budget = everything: $(cat "$dir/out")"
fi

# Budget sweep, offline, and its figures.
if "$OBCACHE" replay --sweep "$T" --no-model --scores attn,obc_vk,oracle,random --budgets 5%,25%,100% \
    -o "$dir/sweep" >"$dir/out" && [ "$(wc -l <"$dir/sweep/replay_sweep.csv")" -eq 13 ] &&
  grep -q "offline relative output error" "$dir/out"; then
  pass "replay --sweep --no-model: 4 scores x 3 budgets"
  if command -v gnuplot >/dev/null; then
    if "$OBCACHE" plot "$dir/sweep" >/dev/null && [ -s "$dir/sweep/plots/replay_kl.png" ] &&
      [ -s "$dir/sweep/plots/replay_needle.svg" ]; then
      pass "plot draws replay_kl and replay_needle"
    else
      fail "plot of a replay sweep folder"
    fi
  fi
  # Offline replay one set at a time (--offline-batch 1, the reference path)
  # and in passes of 5 sets: the same cells as all 12 together, up to the
  # printed 6 significant digits (two roundings of the same number to 6
  # digits differ by at most 1e-5 of it; double rounding is far below).
  for b in 1 5; do
    "$OBCACHE" replay --sweep "$T" --no-model --scores attn,obc_vk,oracle,random \
      --budgets 5%,25%,100% --offline-batch $b -o "$dir/sweep_ob$b" >/dev/null 2>"$dir/err_ob$b"
  done
  if grep -q "offline replay of 12 kept sets took .* (one at a time" "$dir/err_ob1" &&
    python3 - "$dir"/sweep/replay_cells.csv "$dir"/sweep_ob1/replay_cells.csv \
      "$dir"/sweep_ob5/replay_cells.csv <<'EOF'
import csv, sys
ref, *others = [list(csv.DictReader(open(p))) for p in sys.argv[1:]]
assert len(ref) == 12
for rows in others:
    assert len(rows) == len(ref)
    for a, b in zip(ref, rows):
        assert (a["score"], a["budget"], a["needle_kept"]) == (b["score"], b["budget"], b["needle_kept"])
        for c in ["rel_error", "rel_error_step1", "mass_lost"]:
            x, y = float(a[c]), float(b[c])
            assert abs(x - y) <= 1e-5 * max(abs(x), abs(y)), (c, a, b)
EOF
  then
    pass "replay --sweep --offline-batch 1, 5 and all: the same cells"
  else
    fail "replay --sweep --offline-batch 1, 5 and all"
  fi
  # At 100% every score has zero error.
  if awk -F, 'NR > 1 && $2 == "100%" && $5 != 0 { bad = 1 } END { exit bad }' "$dir/sweep/replay_sweep.csv"; then
    pass "sweep: 100% budget has zero error for every score"
  else
    fail "sweep: 100% budget error"
  fi
else
  fail "replay --sweep --no-model: $(cat "$dir/out")"
fi

# A sweep folder: every trace of it, means over traces.
mkdir -p "$dir/folder"
"$OBCACHE" synth --decode 2 --seed 8 -o "$dir/folder/L64_D25.h5" >/dev/null &&
  "$OBCACHE" synth --decode 3 --seed 9 --length 80 -o "$dir/folder/L80_D50.h5" >/dev/null
if "$OBCACHE" replay --sweep "$dir/folder" --no-model --scores attn,recency --budgets 10%,50% \
    >"$dir/out" && grep -q "2 trace(s)" "$dir/out" &&
  [ "$(wc -l <"$dir/folder/replay/replay_cells.csv")" -eq 9 ] &&
  awk -F, 'NR > 1 && $4 != 2 { bad = 1 } END { exit bad }' "$dir/folder/replay/replay_sweep.csv"; then
  pass "replay --sweep over a folder: 2 traces, means in DIR/replay"
else
  fail "replay --sweep over a folder: $(cat "$dir/out")"
fi

# Both oracles and decode_attn as separate policies, named by their steps.
if "$OBCACHE" replay --sweep "$T" --no-model --scores oracle,oracle@T,decode_attn,oracle@2-3 \
    --budgets 10% -o "$dir/oracles" >"$dir/out" &&
  [ "$(cut -d, -f1 "$dir/oracles/replay_sweep.csv" | tail -n +2 | tr '\n' ' ')" = \
    "oracle@1 oracle@T decode_attn oracle@2-3 " ] && [ -f "$dir/oracles/kl_steps.csv" ]; then
  pass "replay --sweep: oracle@1, oracle@T, decode_attn, oracle@2-3 side by side"
else
  fail "replay --sweep with both oracles: $(cat "$dir/out")"
fi

expect_failure "--oracle not a step range" "--oracle 0: expected 1" "$OBCACHE" evict "$T" --score oracle --oracle 0 -o "$dir/x.h5"
expect_failure "--oracle beyond the captured steps" "t.h5: oracle@2-9 needs decode steps beyond the 4 captured" \
  "$OBCACHE" evict "$T" --score oracle --oracle 2-9 -o "$dir/x.h5"
expect_failure "budget beyond the prompt" "expected 1..64" "$OBCACHE" evict "$T" --budget 65 \
  --protocol aware -o "$dir/x.h5"
expect_failure "budget beyond the context (agnostic)" "expected 1..60, the context positions" \
  "$OBCACHE" evict "$T" --budget 61 -o "$dir/x.h5"
expect_failure "budget zero" "--budget '0'" "$OBCACHE" evict "$T" --budget 0 -o "$dir/x.h5"
expect_failure "negative budget" "--budget '-3'" "$OBCACHE" evict "$T" --budget=-3 -o "$dir/x.h5"
expect_failure "unknown score" "unknown score" "$OBCACHE" evict "$T" --score h3o --budget 4 -o "$dir/x.h5"
mkdir "$dir/existing"
expect_failure "-o an existing folder" "existing: cannot write: it is a folder" \
  "$OBCACHE" evict "$T" --budget 4 -o "$dir/existing"
expect_failure "no decode rows" "no decode rows" "$OBCACHE" replay --offline "$dir/nodecode.h5" --budget 4
# Each option means one thing: one of another mode is refused in one line.
expect_failure "--scores outside the sweep" "--scores: only with --sweep" \
  "$OBCACHE" replay --offline "$T" --scores attn
expect_failure "--budgets outside the sweep" "--budgets: only with --sweep" \
  "$OBCACHE" replay "$T" --budgets 10%
expect_failure "--no-model outside the sweep" "--no-model: only with --sweep" \
  "$OBCACHE" replay --offline "$T" --no-model
expect_failure "--keep in the sweep" "--keep: not with --sweep" \
  "$OBCACHE" replay --sweep "$T" --keep "$dir/keep.h5"
expect_failure "--save-logits offline" "--save-logits: model replay only (not with --offline)" \
  "$OBCACHE" replay --offline "$T" --budget 4 --save-logits
expect_failure "--steps offline" "--steps: the model replay's" \
  "$OBCACHE" replay --offline "$T" --budget 4 --steps 2
expect_failure "--dynamic is obcache dynamic" "its own command: obcache dynamic" \
  "$OBCACHE" replay --dynamic --tokens 64
expect_failure "no room beside sinks and recent" "no room" "$OBCACHE" evict "$T" --budget 4 --recent 3 --sinks 2 -o "$dir/x.h5"
"$OBCACHE" synth --length 48 --decode 2 -o "$dir/other.h5" >/dev/null || fail "synth other"
expect_failure "keep file of another trace" "made from another trace" \
  "$OBCACHE" replay --offline "$dir/other.h5" --keep "$dir/keep.h5"
[ ! -e "$dir/x.h5" ] && pass "no keep file left by the failures" || fail "a keep file was left"

# A disk that fills up, for real: a file-size limit (ulimit -f, in KiB) with
# SIGXFSZ ignored makes writes past it fail (EFBIG), H5Fcreate's included.
# The failure is one stderr line (through a pipe: the limit applies to files)
# and nothing is left in the output folder: no KEEP.h5.tmp.PID, no empty
# replay folder, no partial one (a 100-step trace: offline_heads.csv and
# offline_layers.csv fit in 1 KiB, offline_steps.csv does not).
"$OBCACHE" synth --decode 100 --seed 3 -o "$dir/t100.h5" >/dev/null || fail "synth 100 steps"
mkdir "$dir/full"
expect_nothing_left() {
  local name=$1 limit=$2
  shift 2
  local err rc
  err=$( (trap '' XFSZ; ulimit -f "$limit"; "$@") 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [ -z "$(ls -A "$dir/full")" ]; then
    pass "$name: exit $rc, $err"
  else
    fail "$name: exit $rc, $err; left: $(ls -AR "$dir/full" | tr '\n' ' ')"
  fi
  rm -rf "${dir:?}/full/"* # the next case starts empty even after a failure
}
expect_nothing_left "evict, disk full at once" 0 "$OBCACHE" evict "$T" --budget 10 -o "$dir/full/k.h5"
err=$( (trap '' XFSZ; ulimit -f 0; "$OBCACHE" evict "$T" --budget 10 -o "$dir/full/k.h5") 2>&1)
case $err in
  *"k.h5: cannot create the keep file: file size limit exceeded (ulimit -f)"*)
    pass "evict under ulimit -f says so, not 'disk full'" ;;
  *) fail "evict under ulimit -f: $err" ;;
esac
rm -rf "${dir:?}/full/"*
expect_nothing_left "replay --offline, disk full at once" 0 \
  "$OBCACHE" replay --offline "$T" --budget 10 -o "$dir/full/r"
expect_nothing_left "replay --offline, disk full at the third file" 1 \
  "$OBCACHE" replay --offline "$dir/t100.h5" --budget 10 -o "$dir/full/r"

MODEL=${OBC_MODEL:-}
if [ -n "$MODEL" ] && [ -f "$MODEL" ]; then
  # A synthetic trace: no model captured it, so the hint is --offline.
  expect_failure "model replay of a synthetic trace" \
    "does not match the trace (expected 2 layers, 4 heads, 2 KV heads, head dim 16, vocab 0 as in the trace of synthetic; found" \
    "$OBCACHE" replay "$T" --model "$MODEL" --budget 10
  expect_failure "model replay of a synthetic trace: the hint is --offline" \
    "hint: a synthetic trace (obcache synth) has no model to replay with; replay it with --offline)" \
    "$OBCACHE" replay "$T" --model "$MODEL" --budget 10
  # Model replay onto a full disk: no empty replay folder left.
  if "$OBCACHE" capture --length 128 --depth 50 --haystack kjv --seed 1 --rows 48 --decode 3 \
      --model "$MODEL" -o "$dir/t128.h5" >"$dir/out" 2>&1; then
    expect_nothing_left "model replay, disk full at once" 0 \
      "$OBCACHE" replay "$dir/t128.h5" --model "$MODEL" --budget 10% --protocol aware \
      -o "$dir/full/r"
  else
    fail "capture of a 128-token trace: $(tail -1 "$dir/out")"
  fi
  # The sweep's model replay, batched (default), in passes of one kept set
  # (--batch 2) and one set at a time (--batch 1): every cell filled, each
  # with its own set's results. The answer metrics are equal (a change would
  # need a top-2 logit margin within rounding, which test_replay_batch
  # checks with the derived tolerance), and a cell given another cell's
  # results would move its KL by far more than the rounding that
  # test_replay_batch bounds: here within 1% of the KL, plus 1e-4.
  sweep_ok=1
  for b in 1 2 0; do
    "$OBCACHE" replay --sweep "$dir/t128.h5" --model "$MODEL" --scores attn,recency,random \
      --budgets 10%,50% --recent 4 --sinks 2 --protocol aware --batch $b -o "$dir/sweep_b$b" \
      >"$dir/table_b$b" 2>"$dir/err_b$b" || sweep_ok=0
  done
  if [ "$sweep_ok" -eq 1 ] && grep -q "model replay of 6 kept sets took .* (one at a time" "$dir/err_b1" &&
    grep -q "model replay of 6 kept sets took .* (batched)" "$dir/err_b0" &&
    python3 - "$dir"/sweep_b1/replay_cells.csv "$dir"/sweep_b2/replay_cells.csv \
      "$dir"/sweep_b0/replay_cells.csv <<'EOF'
import csv, sys
ref, *others = [list(csv.DictReader(open(p))) for p in sys.argv[1:]]
same = ["score", "budget", "tokens", "needle_found", "needle_prefix", "needle_tokens",
        "agreement", "first_divergence"]
assert len(ref) == 6
for rows in others:
    assert len(rows) == len(ref)
    for a, b in zip(ref, rows):
        assert all(a[c] == b[c] for c in same), (a, b)
        ka, kb = float(a["kl_forced"]), float(b["kl_forced"])
        assert abs(ka - kb) <= 0.01 * ka + 1e-4, (ka, kb)
EOF
  then
    pass "replay --sweep --batch 1, 2 and all: the same cells"
  else
    fail "replay --sweep --batch: $(cat "$dir/err_b0" "$dir/err_b1")"
  fi
  # The printed KL table and replay_sweep.csv round once: the CSV carries 9
  # significant digits, and each table cell is its CSV value to 4 decimals.
  if [ "$sweep_ok" -eq 1 ] && python3 - "$dir/sweep_b0/replay_sweep.csv" "$dir/table_b0" <<'EOF'
import csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
lines = open(sys.argv[2]).read().splitlines()
at = [i for i, l in enumerate(lines) if l.startswith("KL(full")][0]
budgets = lines[at + 1].split()[1:]
table = {}
for line in lines[at + 2:]:
    if not line.strip():
        break
    words = line.split()
    table.update({(words[0], b): v for b, v in zip(budgets, words[1:])})
digits = [len(re.sub(r"[^0-9]", "", r["kl_forced"].split("e")[0]).lstrip("0")) for r in rows]
assert max(digits) > 6, [r["kl_forced"] for r in rows]
for r in rows:
    assert table[(r["score"], r["budget"])] == "%.4f" % float(r["kl_forced"]), (r, table)
EOF
  then
    pass "replay --sweep: the KL table is the CSV's KL rounded once"
  else
    fail "replay --sweep: the KL table and replay_sweep.csv round differently"
  fi
  # The answer-aware oracle keeps what the later digits of the needle need
  # (docs/SCIENCE.md, "The oracle"): on a 768-token KJV trace, 10% of the
  # 747 candidates (floor(74.7) = 74 positions) chosen by oracle@T reproduces
  # the value (teacher-forced KL ~2e-2 nats, far from any rounding flip; the
  # tail after the question is re-run against the kept set, so what follows
  # the value may differ), and the replay reports the KL of every decode step.
  if "$OBCACHE" capture --length 768 --depth 50 --haystack kjv --seed 1 --rows 64 --decode 12 \
      --model "$MODEL" -o "$dir/t768.h5" >"$dir/out" 2>&1 &&
    "$OBCACHE" evict "$dir/t768.h5" --score oracle --oracle T --budget 10% --protocol aware \
      -o "$dir/keepT.h5" \
      >"$dir/out" && grep -q "oracle@T, budget 74 of 747" "$dir/out" &&
    "$OBCACHE" replay "$dir/t768.h5" --keep "$dir/keepT.h5" --model "$MODEL" -o "$dir/rT" \
      >"$dir/out" && grep -q "needle found, prefix 7 of 7" "$dir/out" &&
    [ "$(wc -l <"$dir/rT/replay_steps.csv")" -eq 13 ] &&
    python3 - "$dir/rT/replay.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
steps = r["kl_forced_steps"]
assert len(steps) == 12 and abs(sum(steps) / 12 - r["kl_forced_mean"]) <= 1e-9 * max(1.0, r["kl_forced_mean"])
assert r["kl_forced_mean"] < 0.05 and "kl_free_mean" not in r
EOF
  then
    pass "oracle@T at 10% of a 768-token KJV trace keeps the needle: $(grep -m1 'evicted:' "$dir/out")"
  else
    fail "oracle@T at 10%: $(cat "$dir/out")"
  fi
  # --max-new-tokens N counts answer tokens, the first included: N - 1 steps,
  # and the replayed answer tokenizes to at most N tokens.
  if "$OBCACHE" replay "$dir/t768.h5" --keep "$dir/keepT.h5" --model "$MODEL" \
      --max-new-tokens 5 -o "$dir/r5" >"$dir/out" 2>&1 &&
    grep -q "), budget rule floor, 4 steps$" "$dir/out" &&
    answer=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["answer"])' \
      "$dir/r5/replay.json") &&
    n=$("$OBCACHE" tokenize --model "$MODEL" "$answer" | wc -w) && [ "$n" -ge 1 ] && [ "$n" -le 5 ]
  then
    pass "replay --max-new-tokens 5: 4 decode steps, an answer of $n tokens"
  else
    fail "replay --max-new-tokens 5: $(cat "$dir/out")"
  fi
  expect_refused "replay --steps with --max-new-tokens" "--steps and --max-new-tokens: give one" \
    "$OBCACHE" replay "$dir/t768.h5" --keep "$dir/keepT.h5" --steps 3 --max-new-tokens 4
else
  echo "skip  model checks (OBC_MODEL not set or missing)"
fi

finish
