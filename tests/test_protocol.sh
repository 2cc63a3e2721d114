#!/usr/bin/env bash
# Query protocols and protected spans from the command line, on a synthetic
# trace (64 prompt positions, needle [23, 39), question [60, 64)):
# --protocol names (default agnostic: the 60 context positions compete),
# the keep file records protocol, protect and protect_budget and replay
# reads them back; --protect keeps the spans in every KV head inside the
# budget, refuses a budget too small for them and names the trace's spans for
# an unknown one; a protocol list runs every score under each in the sweep,
# and is refused outside it; offline replay says what it shows under
# agnostic; with the model, the sweep under both protocols gives the same
# cells batched and one set at a time. Bad input is one stderr line, exit 1
# and no output file.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch protocol_cli
export OMP_WAIT_POLICY=passive

# expect_failure NAME TEXT CMD...: exit 1, one stderr line containing TEXT.
expect_failure() {
  local name=$1 text=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -qF -- "$text" "$dir/err"; then
    pass "$name: $(cat "$dir/err")"
  else
    fail "$name: exit $rc: $(cat "$dir/err")"
  fi
}

# h5attr FILE NAME: a root attribute of an HDF5 file, as text.
h5attr() {
  python3 -c 'import h5py, sys
v = h5py.File(sys.argv[1], "r").attrs[sys.argv[2]]
print(v.decode() if isinstance(v, bytes) else v)' "$1" "$2"
}

T=$dir/t.h5
"$OBCACHE" synth --decode 4 --seed 3 -o "$T" >/dev/null || fail "synth"

# Default and named protocols: candidates and the recorded protocol.
for case in "default:agnostic:60" "agnostic:agnostic:60" "aware:aware:64" \
  "agnostic-captured:agnostic-captured:60"; do
  IFS=: read -r given name candidates <<<"$case"
  args=(--score obc_vk --budget 10%)
  [ "$given" != default ] && args+=(--protocol "$given")
  if "$OBCACHE" evict "$T" "${args[@]}" -o "$dir/k_$given.h5" >"$dir/out" &&
    grep -q "of $candidates candidates (uniform, $name," "$dir/out" &&
    [ "$(h5attr "$dir/k_$given.h5" protocol)" = "$name" ] &&
    [ "$(h5attr "$dir/k_$given.h5" protect_budget)" = inside ] &&
    "$OBCACHE" replay --offline "$T" --keep "$dir/k_$given.h5" -o "$dir/r_$given" >"$dir/out" &&
    grep -q "(uniform, $name)" "$dir/out" &&
    grep -q "\"protocol\":[[:space:]]*\"$name\"" "$dir/r_$given/offline.json"; then
    pass "--protocol $given: $candidates candidates, keep file and replay say $name"
  else
    fail "--protocol $given: $(cat "$dir/out")"
  fi
done
# --mode, the old spelling of --protocol, is taken with a note.
if "$OBCACHE" evict "$T" --mode aware --budget 10% -o "$dir/k_mode.h5" >"$dir/out" \
  2>"$dir/err" && [ "$(h5attr "$dir/k_mode.h5" protocol)" = aware ] &&
  grep -qx "obcache evict: note: --mode is spelled --protocol" "$dir/err"; then
  pass "--mode aware is --protocol aware, with a note"
else
  fail "--mode aware: $(cat "$dir/out")"
fi
# Offline replay says what it can show under agnostic, and only there.
if grep -q "the captured decode queries and question K/V" <("$OBCACHE" replay --offline "$T" \
  --budget 10% -o "$dir/ro") && ! grep -q "captured decode queries" <("$OBCACHE" replay \
  --offline "$T" --budget 10% --protocol aware -o "$dir/ro"); then
  pass "offline replay under agnostic says it shows the captured queries"
else
  fail "offline replay's agnostic note"
fi

# --protect: every KV head keeps the spans, inside the budget.
check_protect() { # KEEP PROTOCOL BUDGET SPAN_BEGIN SPAN_END
  python3 - "$@" <<'EOF'
import sys
import h5py
path, protocol, budget, begin, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
f = h5py.File(path, "r")
keep = f["keep"][()]
n_cand = int(f.attrs["n_candidates"])
assert keep[:, :, begin:end].all(), "a protected position was evicted"
assert (keep[:, :, :n_cand].sum(axis=2) == budget).all(), "protected positions count inside the budget"
protect = f.attrs["protect"]
assert (protect.decode() if isinstance(protect, bytes) else protect) == "needle"
EOF
}
for score in obc_vk random recency; do
  if "$OBCACHE" evict "$T" --score $score --budget 20 --sinks 2 --protect needle \
    -o "$dir/kp_$score.h5" >"$dir/out" && grep -q "protect needle" "$dir/out" &&
    check_protect "$dir/kp_$score.h5" agnostic 20 23 39; then
    pass "--protect needle ($score): the 16 needle positions kept in every KV head, 20 in all"
  else
    fail "--protect needle ($score): $(cat "$dir/out")"
  fi
done
if "$OBCACHE" evict "$T" --score obc_vk --budget 30 --alloc adakv --protect needle \
  -o "$dir/kp_adakv.h5" >"$dir/out" &&
  python3 -c 'import h5py, sys
k = h5py.File(sys.argv[1], "r")["keep"][()]
assert k[:, :, 23:39].all()
assert (k[:, :, :60].sum(axis=(1, 2)) == 30 * k.shape[1]).all()' "$dir/kp_adakv.h5"; then
  pass "--protect needle --alloc adakv: kept in every KV head, the layer's budget unchanged"
else
  fail "--protect with adakv: $(cat "$dir/out")"
fi
# Without --protect the same budget drops some of the needle (not vacuous).
"$OBCACHE" evict "$T" --score random --budget 20 --sinks 2 -o "$dir/kn.h5" >/dev/null
if python3 -c 'import h5py, sys
assert not h5py.File(sys.argv[1], "r")["keep"][()][:, :, 23:39].all()' "$dir/kn.h5"; then
  pass "without --protect the needle is not all kept at that budget"
else
  fail "the --protect check is vacuous"
fi
expect_failure "--protect, span not in the trace" \
  "t.h5: --protect nope: no such span (the trace has: needle, question)" \
  "$OBCACHE" evict "$T" --protect needle,nope -o "$dir/x.h5"
expect_failure "--protect beyond the budget" \
  "t.h5: --budget 10: 10 tokens leave no room for the 16 protected positions (--protect, inside" \
  "$OBCACHE" evict "$T" --protect needle --budget 10 -o "$dir/x.h5"
expect_failure "--protocol unknown" "--protocol sideways: expected agnostic, aware or agnostic-captured" \
  "$OBCACHE" evict "$T" --protocol sideways -o "$dir/x.h5"
expect_failure "--protocol list outside the sweep" "one protocol expected" \
  "$OBCACHE" evict "$T" --protocol agnostic,aware -o "$dir/x.h5"
expect_failure "replay --protocol list outside the sweep" "only with --sweep" \
  "$OBCACHE" replay --offline "$T" --protocol agnostic,aware -o "$dir/x"
expect_failure "--pairs without a pair" "--pairs obc_vk: expected X+obc_S" \
  "$OBCACHE" replay --sweep "$T" --no-model --pairs obc_vk -o "$dir/x"
if [ ! -e "$dir/x.h5" ] && [ ! -e "$dir/x" ]; then
  pass "no output left by the failures"
else
  fail "a failure left output behind"
fi

# The sweep under two protocols: every score x budget under each.
if "$OBCACHE" replay --sweep "$T" --no-model --scores obc_vk,random --budgets 20,40 \
  --protocol agnostic,aware --protect needle -o "$dir/sweep" >"$dir/out" &&
  grep -q "2 scores x 2 budgets x 2 protocol(s)" "$dir/out" &&
  python3 - "$dir/sweep" <<'EOF'
import csv, json, os, sys
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "replay_sweep.csv"))))
labels = [(r["score"], r["budget"], r["protocol"]) for r in rows]
assert labels == [(f"{s}:{p}", b, p) for p in ("agnostic", "aware") for s in ("obc_vk", "random")
                  for b in ("20", "40")], labels
fractions = [float(r["fraction"]) for r in rows]  # written with 6 digits
expected = [20 / 60, 40 / 60] * 2 + [20 / 64, 40 / 64] * 2
assert all(abs(a - b) <= 1e-6 for a, b in zip(fractions, expected)), fractions
assert all(float(r["needle_kept"]) == 1.0 for r in rows), "the protected needle is kept"
j = json.load(open(os.path.join(sys.argv[1], "replay_sweep.json")))
assert j["protocols"] == ["agnostic", "aware"] and j["protect"] == "needle"
assert not os.path.exists(os.path.join(sys.argv[1], "replay_pairs.csv")), "no pairs, no table"
EOF
then
  pass "replay --sweep --protocol agnostic,aware: 8 rows, protocol column, the needle protected"
else
  fail "replay --sweep over protocols: $(tail -3 "$dir/out")"
fi

# With the model: the sweep re-runs what follows the candidates (agnostic:
# the question on; aware: the template tail after the question), batched
# across the sets that share where it begins, and gives the cells of --batch
# 1 up to the rounding of another summation order. 96 rows:
# aware's 64-row window ends at the question's end, 21 positions before the
# prompt's.
MODEL=${OBC_MODEL:-}
if [ -n "$MODEL" ] && [ -f "$MODEL" ]; then
  if "$OBCACHE" capture --length 128 --depth 50 --haystack kjv --seed 1 --rows 96 --decode 3 \
    --model "$MODEL" -o "$dir/t128.h5" >"$dir/out" 2>&1; then
    sweep_ok=1
    for b in 1 0; do
      "$OBCACHE" replay --sweep "$dir/t128.h5" --model "$MODEL" --scores attn_maxpool,random \
        --budgets 25%,50% --protocol agnostic,aware --batch $b -o "$dir/msweep$b" >/dev/null \
        2>"$dir/err$b" || sweep_ok=0
    done
    if [ "$sweep_ok" -eq 1 ] && python3 - "$dir/msweep1/replay_cells.csv" \
      "$dir/msweep0/replay_cells.csv" <<'EOF'
import csv, sys
one, batched = [list(csv.DictReader(open(p))) for p in sys.argv[1:]]
assert len(one) == len(batched) == 8
for a, b in zip(one, batched):
    for c in ("score", "budget", "protocol", "tokens", "candidates", "needle_found"):
        assert a[c] == b[c], (c, a, b)
    # The batched GEMMs sum in another order: tests/test_replay_batch.c
    # bounds a logit's difference by 6 sigma of fp32 reordering, 1.5e-4 of
    # max |logit| for this model (about 30 here), and a KL by twice that.
    assert abs(float(a["kl_forced"]) - float(b["kl_forced"])) <= 2 * 1.5e-4 * 30, ("kl_forced", a, b)
    assert float(a["kl_forced"]) >= 0, a
# agnostic: the context before the question [90, 107); aware: up to its end.
assert {r["candidates"] for r in one if r["protocol"] == "agnostic"} == {"90"}
assert {r["candidates"] for r in one if r["protocol"] == "aware"} == {"107"}
EOF
    then
      pass "model sweep under agnostic and aware: --batch 1 and batched give the same cells up to rounding"
    else
      fail "model sweep under two protocols: $(cat "$dir/err0" "$dir/err1")"
    fi
  else
    fail "capture of a 128-token trace: $(tail -1 "$dir/out")"
  fi
else
  echo "skip  model checks (OBC_MODEL not set or missing)"
fi

finish
