#!/usr/bin/env bash
# CLI test of `obcache eval` on the default model: two tasks (niah_single_1
# and vt at 1024 tokens), a baseline and its OBCache pairing, two budgets,
# write accuracy.csv, paired.csv, recall.csv and samples.csv whose numbers an
# independent Python recomputation from samples.csv confirms
# (tests/eval_check.py) (2 samples a task, 1 under the sanitizers); on a
# smaller eval (512 tokens, 2 samples and 2 budgets, 1 budget under the
# sanitizers) a second run into another folder gives the same CSVs
# byte for byte, a plan run as two shards and merged gives them too, a
# finished folder runs nothing again; with --max-new-tokens 8 every answer
# has at most 8 tokens (counted with obcache tokenize; the prefill's token is
# the first of them); --budget-rule kvpress gives a preset, a generic score
# and oracle@T one count; the kept sets, scored in parallel, are those
# `obcache evict` keeps from the sample's trace; bad input fails with one
# line.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
[ -r /usr/share/dict/words ] || { echo "SKIP: no /usr/share/dict/words (apt-get install wamerican)"; exit 0; }
scratch eval
here=$(dirname "$0")

# Under the sanitizers (an obcache built with AddressSanitizer) the evals
# below have fewer samples or budgets: the same commands and code paths on
# less data, which is what the sanitizers check; the numbers are the Release
# suite's.
sanitized=0
if ldd "$OBCACHE" 2> /dev/null | grep -q libasan; then
  sanitized=1
fi

# The done-when command of the issue, with fewer samples and a short answer
# (1 a task under the sanitizers: each sample took 25 to 46 s there on 2
# busy cores, load 3, 2026-12-06).
per_task=$((2 - sanitized))
n_a=$((2 * per_task))
run=(--tasks niah_single_1,vt --samples $per_task --length 1024 --scores snapkv,snapkv+obc_k
  --budgets 25%,50% --protocol agnostic --max-new-tokens 8)
csvs="accuracy.csv paired.csv recall.csv recall_policy.csv samples.csv prompts.jsonl"

"$OBCACHE" eval "${run[@]}" --no-figures -o "$dir/a" > "$dir/a.txt" 2>&1
check "eval writes the five CSVs, prompts.jsonl and eval.json" \
  eval 'for f in $csvs eval.json; do [ -s "$dir/a/$f" ] || exit 1; done'
check "accuracy.csv has the issue's columns" \
  eval 'head -1 "$dir/a/accuracy.csv" | grep -q "^task,length,policy,budget,protocol,n,correct,accuracy,ci_low,ci_high"'
check "the printed table leads with RULER's score, accuracy beside it" \
  eval 'grep -q "^RULER score at 1024 tokens, all tasks" "$dir/a.txt" &&
    grep -Eq "^full cache +[0-9.]+ \[[0-9.]+,[0-9.]+\] [01]\.[0-9]{2}$" "$dir/a.txt"'
check "eval.json's headline is RULER's score, one row per policy, budget and protocol" \
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
assert j["headline"] == "score", j["headline"]
rows = j["headline_rows"]
assert len(rows) == 1 + 3 * 2, len(rows)  # full, then (snapkv, +obc_k, oracle@T) x 2 budgets
assert all(r["score_ci_low"] <= r["score"] <= r["score_ci_high"] for r in rows), rows' \
  "$dir/a/eval.json"
check "a full-cache row for every task" \
  eval '[ "$(grep -c ",1024,full,,," "$dir/a/accuracy.csv")" -eq 3 ]'
check "one line per sample on stdout, with an ETA" \
  eval '[ "$(grep -c "^sample [1-4]/$n_a .*ETA" "$dir/a.txt")" -eq $n_a ]'
check "no trace is left in the cells" eval '[ -z "$(find "$dir/a/cells" -name "*.h5")" ]'
check "prompts.jsonl has one prompt a sample, with its ids and answers" \
  python3 -c 'import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
per_task = int(sys.argv[2])
assert [l["task"] for l in lines] == ["niah_single_1"] * per_task + ["vt"] * per_task, lines
assert all(len(l["ids"]) == l["tokens"] <= 1024 and l["answers"] for l in lines)' \
  "$dir/a/prompts.jsonl" $per_task
check "the tables agree with an independent recomputation from samples.csv" \
  python3 "$here/eval_check.py" "$dir/a" niah_single_1,vt snapkv,snapkv+obc_k \
  25%,50% agnostic
"$OBCACHE" eval "$dir/a" --samples-for 10% > "$dir/plan-n.txt" 2>&1 || echo "rc $?" >> "$dir/plan-n.txt"
check "--samples-for plans from the folder's discordance, one row per pooled pairing" \
  eval 'grep -q "^samples for an accuracy difference of 10.0 points" "$dir/plan-n.txt" &&
    [ "$(grep -c "^1024 *agnostic *snapkv+obc_k" "$dir/plan-n.txt")" -eq 2 ] &&
    ! grep -q "^rc" "$dir/plan-n.txt"'
check "--samples-for refuses a difference outside (0, 1) and --merge beside it" \
  eval '! "$OBCACHE" eval "$dir/a" --samples-for 150% 2> "$dir/e1" && grep -q "in (0, 1)" "$dir/e1" &&
    ! "$OBCACHE" eval "$dir/a" --samples-for 5% --merge 2> "$dir/e2" && grep -q "two commands" "$dir/e2"'
check "--max-new-tokens 8: every answer, full cache and replays, has at most 8 tokens" \
  python3 -c 'import glob, json, subprocess, sys
obcache, model, folder = sys.argv[1:4]
longest = 0
for path in sorted(glob.glob(folder + "/cells/*/sample.json")):
    s = json.load(open(path))
    assert s["answer_tokens"] == 8 and s["decode"] == 7, (path, s["answer_tokens"], s["decode"])
    for a in [s["full"]] + s["rows"]:
        ids = subprocess.run([obcache, "tokenize", "--model", model, a["answer"]], check=True,
                             capture_output=True, text=True).stdout.split()
        assert len(ids) <= 8, (path, a["answer"], len(ids))
        longest = max(longest, len(ids))
assert longest >= 2, longest  # the answers are not all cut short by a stop token
print("     longest answer: %d tokens" % longest)' "$OBCACHE" "$OBC_MODEL" "$dir/a"
fails "--max-new-tokens 1" "--max-new-tokens 1: expected at least 2" \
  eval --max-new-tokens 1 -o "$dir/x"
"$OBCACHE" eval "$dir/a" --no-figures > "$dir/again.txt" 2>&1
check "running a finished eval again runs nothing" grep -q "0 ran, $n_a already done" "$dir/again.txt"

# Determinism, shards and merge on a smaller eval of 2 samples, so that each
# of the 2 shards runs one; one budget under the sanitizers (a replay of the
# 512-token sample, most of its time, took 1.8 s there, and each budget
# replays every policy).
samples=2
budgets=25%,50%
[ $sanitized -eq 1 ] && budgets=25%
run=(--tasks niah_single_1 --samples $samples --length 512 --scores snapkv,snapkv+obc_k
  --budgets $budgets --max-new-tokens 8)
"$OBCACHE" eval "${run[@]}" --no-figures -o "$dir/s" > "$dir/s.txt" 2>&1
"$OBCACHE" eval "${run[@]}" --no-figures -o "$dir/b" > "$dir/b.txt" 2>&1
check "the same command again gives the same CSVs" \
  eval 'for f in $csvs; do [ -s "$dir/s/$f" ] && cmp -s "$dir/s/$f" "$dir/b/$f" || exit 1; done'

"$OBCACHE" eval "${run[@]}" --plan -o "$dir/c" > "$dir/c.txt" 2>&1
"$OBCACHE" eval "$dir/c" --shard 1/2 > "$dir/c1.txt" 2>&1
fails "a merge of a half-run plan names what is missing" \
  "$((samples / 2)) of $samples samples are not finished" \
  eval "$dir/c" --merge --no-figures
"$OBCACHE" eval "$dir/c" --shard 0/2 > "$dir/c0.txt" 2>&1
"$OBCACHE" eval "$dir/c" --merge --no-figures > "$dir/cm.txt" 2>&1
check "two shards merged give the one-process CSVs" \
  eval 'for f in $csvs; do cmp -s "$dir/s/$f" "$dir/c/$f" || exit 1; done'

"$OBCACHE" eval --tasks niah_single_1 --samples 1 --length 512 --scores expected_attention \
  --budgets 25% --max-new-tokens 4 --no-figures -o "$dir/e" > "$dir/e.txt" 2>&1
check "expected_attention alone gets the query statistics it reads" \
  grep -q "^sample 1/1 .*replays right" "$dir/e.txt"

# --budget-rule kvpress: eval.json records it, and a preset, a generic score
# and oracle@T keep the same count, kvpress's int(n * (1 - 0.9)) of the n
# candidates.
"$OBCACHE" eval --tasks niah_single_1 --samples 1 --length 512 --scores knorm,attn \
  --budgets 10% --budget-rule kvpress --max-new-tokens 4 --no-figures -o "$dir/k" \
  > "$dir/k.txt" 2>&1
check "--budget-rule kvpress: one count for knorm, attn and oracle@T, recorded in eval.json" \
  python3 -c 'import json, sys
folder = sys.argv[1]
assert json.load(open(folder + "/eval.json"))["budget_rule"] == "kvpress"
s = json.load(open(folder + "/cells/0/sample.json"))
kept = {r["policy"]: r["kept"] for r in s["rows"]}
n = s["rows"][0]["candidates"]
assert set(kept) == {"knorm", "attn", "oracle@T"}, kept
assert set(kept.values()) == {int(n * (1 - 0.9))}, (n, kept)
print("     %d candidates, %d kept by each" % (n, int(n * (1 - 0.9))))' "$dir/k"
check "the accuracy table names the budget rule" grep -q "budget rule kvpress" "$dir/k.txt"

# The eval scores its policies in parallel, one a thread: each kept set is
# the one evict keeps from the sample's trace, one score a process.
"$OBCACHE" eval --tasks niah_single_1 --samples 1 --length 512 --scores snapkv,snapkv+obc_k,tova \
  --budgets 25% --max-new-tokens 4 --threads 2 --keep-traces --no-figures -o "$dir/p" \
  > "$dir/p.txt" 2>&1
check "eval's kept sets, scored in parallel, are evict's" \
  python3 "$here/eval_kept_check.py" "$OBCACHE" "$dir/p"

fails "an unknown task" "unknown task 'niah_single_9'" eval --tasks niah_single_9 -o "$dir/x"
fails "an unknown budget rule" "--budget-rule round: expected floor or kvpress" \
  eval --budget-rule round -o "$dir/x"
fails "oracle@T among the policies" "always replayed" eval --scores oracle@T -o "$dir/x"
fails "a bad budget" "150%: more than the whole prompt" eval --budgets 150% -o "$dir/x"
fails "a plan option given with DIR" "takes its settings from DIR/plan.json; --samples" \
  eval "$dir/a" --samples 4
fails "sweep on an eval folder" "holds an \`obcache eval\` plan" sweep "$dir/a" --merge
fails "another plan in the same folder" "another plan" eval --tasks vt --samples 2 -o "$dir/a"
cp -r "$dir/s" "$dir/f"
sed -i '0,/"length":\t512/s//"length":\t999999/' "$dir/f/plan.json"
fails "a plan whose sample is not one of its options" "not one of the plan's options" \
  eval "$dir/f" --merge --no-figures
cp -r "$dir/s" "$dir/d"
printf '{"task": "vt"}' > "$dir/d/cells/0/sample.json"
fails "a damaged sample is refused by its manifest" "0 .*damaged\|not finished" \
  eval "$dir/d" --merge --no-figures

finish
