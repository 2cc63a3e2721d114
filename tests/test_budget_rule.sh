#!/usr/bin/env bash
# One budget count for every score (evict/policy.h, evict_budget_count):
# on a synthetic trace of 60 candidates (64 positions, the question the last
# 4), `--budget 18%` keeps floor(10.8) = 10 per KV head with the methods
# (knorm, streaming, tova), the generic scores (attn, attn_maxpool), random,
# recency and the oracle (oracle@T) alike, under both budget rules; `--budget 10%` keeps 6
# under the floor rule and kvpress's int(60 * (1 - 0.9)) = 5 under
# --budget-rule kvpress. The keep file records the rule (budget_rule), a
# keep file without the attribute reads as floor, and an unknown rule is
# one stderr line and a non-zero exit.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch budget_rule
export OMP_WAIT_POLICY=passive

TRACE=$dir/t.h5
"$OBCACHE" synth --decode 4 --rows 32 --seed 3 -o "$TRACE" >/dev/null || fatal "synth"

attr() { # attr FILE NAME: a string attribute of an HDF5 file
  python3 -c "import h5py,sys; v=h5py.File(sys.argv[1],'r').attrs[sys.argv[2]]; \
print((v.decode() if isinstance(v,bytes) else str(v)).strip(chr(0)))" "$1" "$2"
}

for rule in floor kvpress; do
  for case in "18% 10 10" "10% 6 5"; do
    set -- $case
    budget=$1
    want=$([ "$rule" = floor ] && echo "$2" || echo "$3")
    for score in knorm streaming tova attn attn_maxpool random recency oracle@T; do
      if "$OBCACHE" evict "$TRACE" --score "$score" --budget "$budget" --budget-rule "$rule" \
        -o "$dir/k.h5" >"$dir/out" 2>"$dir/err" &&
        grep -q "budget $want of 60 candidates" "$dir/out" &&
        grep -q "budget rule $rule)" "$dir/out" &&
        grep -q ": $want\.\.$want kept per KV head" "$dir/out" &&
        [ "$(attr "$dir/k.h5" budget_rule)" = "$rule" ]; then
        pass "$score --budget $budget --budget-rule $rule keeps $want of 60"
      else
        fail "$score --budget $budget --budget-rule $rule: $(cat "$dir/out" "$dir/err")"
      fi
    done
  done
done

# A keep file without budget_rule (written before it existed) reads as floor.
"$OBCACHE" evict "$TRACE" --score attn --budget 18% -o "$dir/old.h5" >/dev/null 2>&1 ||
  fatal "evict old"
python3 -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); del f.attrs['budget_rule']" \
  "$dir/old.h5" || fatal "strip budget_rule"
if "$OBCACHE" replay --offline "$TRACE" --keep "$dir/old.h5" -o "$dir/r" \
  >"$dir/out" 2>"$dir/err" &&
  grep -q "budget 10 of 60 (uniform, agnostic), budget rule floor," "$dir/out"; then
  pass "a keep file without budget_rule reads as floor"
else
  fail "keep file without budget_rule: $(cat "$dir/out" "$dir/err")"
fi

expect_refused "an unknown budget rule" "--budget-rule round: expected floor or kvpress" \
  "$OBCACHE" evict "$TRACE" --score attn --budget-rule round -o "$dir/k2.h5"

finish
