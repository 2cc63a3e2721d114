#!/usr/bin/env bash
# obcache dynamic from the command line: its help lists every dynamic score
# and the defaults the code runs with; bad input (an unknown score, a trace
# given as if to replay) is one stderr line and exit 1, before any model is
# loaded; `obcache replay --dynamic` is one line pointing here. With the real
# model, a run on a short text writes its perplexity table: every score's
# rows and the full cache's.
set -u
. "$(dirname "$0")/lib.sh"
OBCACHE=${OBCACHE:?set OBCACHE to the obcache binary}
scratch dynamic_cli
export OMP_WAIT_POLICY=passive

"$OBCACHE" dynamic --help >"$dir/help" 2>&1 || fail "dynamic --help: exit $?"
if grep -q "attn, obc_v, obc_k, obc_vk or" "$dir/help" && grep -q "(default 4096)" "$dir/help" &&
  grep -q "256,512,1024)" "$dir/help" && grep -q "(default dynamic-eviction)" "$dir/help"; then
  pass "dynamic --help: the scores and the defaults"
else
  fail "dynamic --help: $(cat "$dir/help")"
fi
fails "replay --dynamic points to obcache dynamic" \
  "^obcache replay: decoding-time eviction is its own command: obcache dynamic (see obcache dynamic --help)$" \
  replay --dynamic --tokens 64
fails "dynamic: an unknown score" \
  "--scores h3o: not a dynamic score (expected attn, obc_v, obc_k, obc_vk or recency)" \
  dynamic --scores attn,h3o
fails "dynamic: a trace is not its input" "takes no trace (it reads --haystack)" dynamic t.h5
fails "dynamic: --budgets not a list of sizes" "--budgets" dynamic --budgets 64,x
fails "dynamic: a replay option" "unknown option '--keep'" dynamic --keep k.h5

MODEL=${OBC_MODEL:-}
if [ -n "$MODEL" ] && [ -f "$MODEL" ]; then
  # A short text: 3 scores and the full cache, 4 windows of 40 positions each.
  awk 'BEGIN { for (i = 0; i < 60; i++) print "In the beginning God created the heaven and the earth. And the earth was without form, and void." }' >"$dir/text.txt"
  if "$OBCACHE" dynamic --model "$MODEL" --haystack "$dir/text.txt" --tokens 161 --budgets 64 \
      --scores attn,obc_vk,recency --chunk 16 --ppl-window 40 -o "$dir/dyn" >"$dir/out" &&
    [ "$(wc -l <"$dir/dyn/dynamic.csv")" -eq 17 ] && grep -q "^full" "$dir/out" &&
    [ "$(cut -d, -f1 "$dir/dyn/dynamic.csv" | sort -u | tr '\n' ' ')" = "attn full obc_vk recency score " ]; then
    pass "dynamic: 3 scores + full cache, 4 windows each"
  else
    fail "dynamic: $(cat "$dir/out")"
  fi
else
  echo "skip  model checks (OBC_MODEL not set or missing)"
fi

finish
