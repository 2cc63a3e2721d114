#!/usr/bin/env bash
# CLI test of a sweep's plan and cells without Slurm (tests/test_slurm.sh has
# the cluster): `sweep --plan`, `sweep DIR --cell`, `--shard`, `--merge`, and
# the one-command `sweep ... -o DIR` equal to them;
# a damaged or foreign plan.json, options the plan owns given again, a bad
# --cell/--shard, another model file and another plan in the same folder each
# fail with one line naming the problem; a merge of an unfinished grid lists
# the missing cells; `replay --sweep` reads the finished cells of a sweep.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
scratch sweep_plan

grid=(--lengths 160 --depths 0,100 --haystack noise --decode 2 --rows 48)
"$OBCACHE" sweep "${grid[@]}" --plan -o "$dir/s" > "$dir/plan.txt"
check "sweep --plan writes a plan of 2 cells and nothing else" \
  eval '[ -s "$dir/s/plan.json" ] && [ ! -e "$dir/s/cells" ] && grep -q "2 cells" "$dir/plan.txt"'
# A full disk (ulimit -f 0, SIGXFSZ ignored: the write fails with EFBIG): one
# line naming plan.json, and none of the folders --plan made is left.
msg=$( (trap '' XFSZ; ulimit -f 0; "$OBCACHE" sweep "${grid[@]}" --plan -o "$dir/full/a/b") 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 1 ] && [ "$(printf '%s\n' "$msg" | wc -l)" -eq 1 ] &&
  printf '%s' "$msg" | grep -qF "$dir/full/a/b/plan.json" && [ ! -e "$dir/full" ]; then
  pass "--plan on a full disk leaves no folder: $msg"
else
  fail "--plan on a full disk: exit $rc, $msg; left: $(find "$dir/full" 2>/dev/null | tr '\n' ' ')"
fi
fails "--cell out of range" "the plan has cells 0..1" sweep "$dir/s" --cell 2
fails "--shard without a slash" "expected i/N" sweep "$dir/s" --shard 3
fails "--shard i >= N" "expected i/N" sweep "$dir/s" --shard 2/2
fails "a plan option given again" "takes its settings from DIR/plan.json; --decode" \
  sweep "$dir/s" --decode 4
fails "another model file" "not the plan's model" sweep "$dir/s" --model "$dir/s/plan.json"
fails "a merge before any cell ran lists them" "2 of 2 cells are not finished" \
  sweep "$dir/s" --merge --no-figures

"$OBCACHE" sweep "$dir/s" --cell 1 > "$dir/cell1.txt" 2>&1
check "--cell 1 runs cell 1 only" \
  eval '[ -s "$dir/s/cells/1/complete.json" ] && [ ! -e "$dir/s/cells/0" ]'
fails "the merge names the missing cell" "1 of 2 cells are not finished" \
  sweep "$dir/s" --merge --no-figures
check "... and its summary holds the finished cell's rows" \
  eval '[ "$(grep -c "^160,100," "$dir/s/summary.csv")" -eq 11 ] && ! grep -q "^160,0," "$dir/s/summary.csv"'
"$OBCACHE" sweep "$dir/s" --shard 0/2 > "$dir/shard.txt" 2>&1
"$OBCACHE" sweep "$dir/s" --merge --no-figures > "$dir/merge.txt" 2>&1
check "--shard 0/2 runs the rest and the merge succeeds" test $? -eq 0
"$OBCACHE" sweep "$dir/s" > "$dir/again.txt" 2>&1
check "running a finished plan again runs nothing" grep -q "0 ran, 2 already done" "$dir/again.txt"
# The one-command form is plan + run + merge: the same summary, page and heat
# map byte for byte.
"$OBCACHE" sweep "$dir/s" --merge > "$dir/merge-figures.txt" 2>&1
"$OBCACHE" sweep "${grid[@]}" -o "$dir/one" > "$dir/one.txt" 2>&1
check "the one-command sweep equals plan + run + merge" same_sweep "$dir/s" "$dir/one"
fails "another plan in the same folder" "another plan" \
  sweep --lengths 160 --depths 0,50 --haystack noise --decode 2 --rows 48 -o "$dir/s"

# Two processes on the same cell: one runs it, the other leaves it alone.
"$OBCACHE" sweep --lengths 160 --depths 50 --haystack noise --decode 2 --rows 48 --plan \
  -o "$dir/two" > /dev/null
"$OBCACHE" sweep "$dir/two" --cell 0 > "$dir/two1.txt" 2>&1 &
first=$!
"$OBCACHE" sweep "$dir/two" --cell 0 > "$dir/two2.txt" 2>&1
wait $first
check "two processes on one cell: one runs it, the other skips it, the cell verifies" \
  eval '[ "$(cat "$dir"/two[12].txt | grep -c "1 ran,")" -eq 1 ] &&
    "$OBCACHE" sweep "$dir/two" --merge --no-figures > /dev/null'

mkdir -p "$dir/bad"
for text in '{' '{"format": "something else"}' '[1, 2]' \
  "$(sed 's/"id":\t1/"id":\t7/' "$dir/s/plan.json")" \
  "$(sed 's/"fnv1a64":\t"[0-9a-f]*"/"fnv1a64": "xyz"/' "$dir/s/plan.json")"; do
  printf '%s' "$text" > "$dir/bad/plan.json"
  fails "a damaged plan.json: ${text:0:24}..." "plan.json" sweep "$dir/bad"
done

"$OBCACHE" replay --sweep "$dir/s" --no-model --scores attn --budgets 10% --protocol aware \
  -o "$dir/replay" \
  > "$dir/replay.txt" 2>&1
check "replay --sweep reads the 2 finished cells of a sweep folder" \
  eval '[ "$(grep -c "cells/[01]/trace.h5,attn" "$dir/replay/replay_cells.csv")" -eq 2 ]'

finish
