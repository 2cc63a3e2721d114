#!/usr/bin/env bash
# `obcache eval` tried as an adversary. Option values that no plan can run
# (lengths 0, 1, 2^40 or beyond the model's context, a sample count whose
# product with the tasks wraps, a task, length, score or budget given twice,
# 25% beside 0.25, a hexadecimal number) are refused before anything is
# written. Then one small eval is planned and run (two samples of 512
# tokens, knorm at 25%), and copies of its folder are forged with Python
# (tests/eval_forge.py: the edit, then the cell's manifest recomputed, so
# only the content betrays it): a sample.json whose correct flag or RULER
# score contradicts its answer and prompt.json's references, whose kept
# count is not its budget's, whose candidates outnumber the prompt, whose
# oracle row has a recall, whose seed is not the plan's; a plan.json with a
# negative, overflowing or foreign seed, a huge sample count, repeated
# budgets or scores, a repeated sample, a repeated key, or a score name
# with control bytes. `eval DIR --merge` must refuse each with exit 1 and
# one stderr line naming the file (control bytes escaped) and write no
# table; the unforged copy merges.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}"
[ -r "$OBC_MODEL" ] || { echo "SKIP: no model at $OBC_MODEL (run scripts/setup.sh)"; exit 0; }
[ -r /usr/share/dict/words ] || { echo "SKIP: no /usr/share/dict/words (apt-get install wamerican)"; exit 0; }
python3 -c 'import json' 2>/dev/null || { echo "SKIP: no python3"; exit 0; }
scratch eval_forged
here=$(dirname "$0")
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1

# refused NAME PATTERN ARGS...: `fails`, and nothing left at $dir/x.
refused() {
  rm -rf "$dir/x"
  fails "$@"
  [ ! -e "$dir/x" ] || fail "$1: left $dir/x behind"
}

four=niah_single_1,vt,cwe,fwe
refused "--length 0" "--lengths: 0 is outside" eval --length 0 --plan -o "$dir/x"
refused "--length 1" "--lengths: 1 is outside" eval --length 1 --plan -o "$dir/x"
refused "--length 2^40" "--lengths: 1099511627776 is outside" \
  eval --length 1099511627776 --plan -o "$dir/x"
refused "--length beyond the model's context" "--lengths: 100000 is beyond .*context of 8192" \
  eval --length 100000 --plan -o "$dir/x"
mkdir -p "$dir/hf" # a Hugging Face folder's context, from its config.json alone
printf '%s' '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16,
  "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-5, "max_position_embeddings": 256,
  "vocab_size": 40, "rope_theta": 10000.0}' >"$dir/hf/config.json"
refused "--length beyond a Hugging Face folder's context" "--lengths: 512 is beyond hf's context of 256" \
  eval --model "$dir/hf" --length 512 --plan -o "$dir/x"
refused "--samples whose product with 4 tasks wraps to 4" "--samples 4611686018427387905: 4 tasks" \
  eval --tasks $four --samples 4611686018427387905 --plan -o "$dir/x"
refused "--samples beyond a plan" "more than the 4096 samples" eval --samples 5000 --plan -o "$dir/x"
refused "a task twice" "--tasks: vt given twice" eval --tasks vt,niah_single_1,vt --plan -o "$dir/x"
refused "a length twice" "--lengths: 512 given twice" eval --length 512,1024,512 --plan -o "$dir/x"
refused "a score twice" "--scores: knorm given twice" eval --scores knorm,knorm --plan -o "$dir/x"
# The old spelling preset:snapkv is snapkv: its note, then the one error.
rm -rf "$dir/x"
"$OBCACHE" eval --scores snapkv,preset:snapkv --plan -o "$dir/x" >/dev/null 2>"$dir/err"
rc=$?
check "a score twice under two names" eval '[ $rc -eq 1 ] && [ ! -e "$dir/x" ] &&
  [ "$(wc -l <"$dir/err")" -eq 2 ] && grep -q "preset:snapkv is spelled snapkv" "$dir/err" &&
  grep -q -- "--scores: snapkv given twice" "$dir/err"'
refused "a budget twice" "--budgets: 25% given twice" eval --budgets 25%,25% --plan -o "$dir/x"
refused "25% and 0.25" "--budgets: 25% and 0.25 are the same budget" \
  eval --budgets 25%,0.25 --plan -o "$dir/x"
refused "a hexadecimal budget" "--budget '0x10': expected" eval --budgets 0x10 --plan -o "$dir/x"
refused "a hexadecimal number" "--stale-after: expected a number, got '0x10'" \
  eval --stale-after 0x10 --plan -o "$dir/x"

# The eval the forgeries start from: planned and run, not merged.
good=$dir/good
"$OBCACHE" eval --tasks niah_single_1 --samples 2 --length 512 --scores knorm --budgets 25% \
  --max-new-tokens 4 --plan -o "$good" >"$dir/plan.txt" 2>&1 || fatal "plan: $(cat "$dir/plan.txt")"
"$OBCACHE" eval "$good" >"$dir/run.txt" 2>&1 || fatal "run: $(cat "$dir/run.txt")"

# merge_refused KIND PATTERN FILE: the copy forged as KIND refused by the merge.
merge_refused() {
  local kind=$1 pattern=$2 file=$3 copy=$dir/$1
  python3 "$here/eval_forge.py" "$kind" "$good" "$copy" || { fail "$kind: not forged"; return; }
  fails "$kind" "$pattern" eval "$copy" --merge --no-figures
  grep -qF "$copy/$file" "$dir/err" || fail "$kind: the message does not name $copy/$file"
  [ ! -e "$copy/accuracy.csv" ] || fail "$kind: the merge wrote accuracy.csv"
}

merge_refused flag-contradicts-answer "scores 0 (wrong) against prompt.json's answers" \
  cells/0/sample.json
merge_refused score-contradicts-answer "scores 0 (wrong) .*not the recorded 1 (wrong)" \
  cells/0/sample.json
merge_refused answer-holds-the-needle "scores 1 (correct) .*not the recorded 0 (wrong)" \
  cells/0/sample.json
merge_refused references-changed "against prompt.json's answers" cells/1/sample.json
merge_refused answers-not-the-prompts "\"answers\" are not prompt.json's" cells/0/sample.json
merge_refused kept-not-the-budget "kept 82 of 324 candidates, where the budget keeps 81" \
  cells/0/sample.json
merge_refused kept-above-candidates "where the budget keeps" cells/0/sample.json
merge_refused candidates-above-tokens "\"candidates\" must be a count 1..362" cells/0/sample.json
merge_refused recall-of-the-oracle "row oracle@T 25% agnostic: \"recall\" must be null" \
  cells/0/sample.json
merge_refused seed-not-the-plans "seed \"5\" is not the plan's 2 (seed + sample 1)" \
  cells/1/sample.json
merge_refused plan-seed-negative "\"seed\" must be a string of digits" plan.json
merge_refused plan-seed-2^64 "\"seed\" must be a string of digits" plan.json
merge_refused plan-seed-foreign "\"seed\" 7 is not the seed of its options (1)" plan.json
merge_refused plan-samples-huge "--samples 100000: .*more than the 4096" plan.json
merge_refused plan-budgets-twice "--budgets: 25% and 0.25 are the same budget" plan.json
merge_refused plan-scores-twice "--scores: knorm given twice" plan.json
merge_refused plan-sample-twice "sample 1 (niah_single_1_L512_S0) is not one of" plan.json
merge_refused plan-key-twice "the key \"seed\" appears twice in one object" plan.json
merge_refused plan-score-escapes 'knorm\\x1b\[31m\\nred' plan.json
if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$dir/err"; then
  fail "a score name from plan.json printed raw: $(od -c "$dir/err" | head -3)"
fi

fails "--samples-for in hexadecimal" "--samples-for: expected an accuracy difference" \
  eval "$good" --samples-for 0x0.1
python3 "$here/eval_forge.py" untouched "$good" "$dir/untouched" || fatal "untouched copy"
check "the unforged copy, its manifests rewritten, merges" \
  "$OBCACHE" eval "$dir/untouched" --merge --no-figures
finish
