#!/usr/bin/env bash
# CLI test of the model runtime on the default model: with the chat template,
# greedy generation answers "What is the capital of France?" with Paris and
# --max-new-tokens N generates N answer tokens (the prefill's token the first); the
# perplexity of the opening of Genesis (KJV, public domain) is that of a real
# language model; bad input (a prompt longer than --context, a missing model,
# a truncated model, an unknown option) gives one line on stderr and a
# non-zero exit.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_MODEL:?}" "${OBC_TMP:?}"
# ctest runs tests side by side on few cores: idle OpenMP threads that spin
# (libgomp's default) then steal the cores the busy ones need.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [ ! -r "$OBC_MODEL" ]; then
  fatal "no model at $OBC_MODEL (run scripts/setup.sh)"
fi
scratch generate_cli
one_line_error() { # one_line_error NAME STATUS STDERR_FILE
  check "$1: non-zero exit" test "$2" -ne 0
  check "$1: one line on stderr" test "$(wc -l < "$3")" -eq 1
  sed 's/^/     /' "$3"
}

"$OBCACHE" generate --model "$OBC_MODEL" --chat --prompt "What is the capital of France?" \
  --max-new-tokens 32 > "$dir/answer.txt" 2> "$dir/stats.txt"
check "generate succeeds" test $? -eq 0
echo "     answer: $(cat "$dir/answer.txt")"
echo "     $(cat "$dir/stats.txt")"
check "the answer names Paris" grep -q "Paris" "$dir/answer.txt"
check "stderr reports prefill and decode tokens/s" grep -q "prefill .* tokens/s.*decode .* tokens/s" "$dir/stats.txt"

# --max-new-tokens N counts answer tokens, the prefill's token included: a prompt
# that does not stop early generates exactly 5, and the answer tokenizes to
# at most 5 (obcache tokenize; --max-new-tokens is the same option).
"$OBCACHE" generate --model "$OBC_MODEL" --prompt "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12," \
  --max-new-tokens 5 > "$dir/count.txt" 2> "$dir/count_stats.txt"
check "generate --max-new-tokens 5 succeeds" test $? -eq 0
check "generate --max-new-tokens 5 generates 5 tokens" \
  grep -q "generated 5 tokens," "$dir/count_stats.txt"
n_answer=$("$OBCACHE" tokenize --model "$OBC_MODEL" "$(cat "$dir/count.txt")" | wc -w)
echo "     answer: $(cat "$dir/count.txt") ($n_answer tokens)"
check "the answer of --max-new-tokens 5 has 1..5 tokens" \
  test "$n_answer" -ge 1 -a "$n_answer" -le 5

# The first 16 verses of Genesis, from the bible-kjv package when installed,
# else its first five verses written here.
if command -v bible > /dev/null 2>&1; then
  bible -f Ge1:1-Ge1:16 | sed -E 's/^[0-9]*[A-Za-z]+[0-9]+:[0-9]+ //' > "$dir/genesis.txt"
else
  cat > "$dir/genesis.txt" <<'TEXT'
In the beginning God created the heaven and the earth.
And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.
And God said, Let there be light: and there was light.
And God saw the light, that it was good: and God divided the light from the darkness.
And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.
TEXT
fi
"$OBCACHE" perplexity --model "$OBC_MODEL" "$dir/genesis.txt" --context 256 --stride 128 \
  > "$dir/ppl.txt" 2> "$dir/ppl_err.txt"
check "perplexity succeeds" test $? -eq 0
echo "     $(cat "$dir/ppl.txt")"
ppl=$(sed -nE 's/^perplexity ([0-9.]+) .*/\1/p' "$dir/ppl.txt")
check "perplexity of Genesis 1:1-16 is that of a language model (1 < ppl < 30)" \
  awk -v p="${ppl:-0}" 'BEGIN { exit !(p > 1 && p < 30) }'

"$OBCACHE" generate --model "$OBC_MODEL" --prompt "$(printf 'word %.0s' $(seq 1 200))" \
  --context 64 > /dev/null 2> "$dir/err_long.txt"
one_line_error "prompt longer than --context" $? "$dir/err_long.txt"
check "prompt longer than --context: the message says so" grep -q "context" "$dir/err_long.txt"

"$OBCACHE" generate --model "$dir/missing.gguf" --prompt "hi" > /dev/null 2> "$dir/err_missing.txt"
one_line_error "missing model file" $? "$dir/err_missing.txt"
check "missing model file: the message names it" grep -q "missing.gguf" "$dir/err_missing.txt"

head -c 3000000 "$OBC_MODEL" > "$dir/truncated.gguf"
"$OBCACHE" generate --model "$dir/truncated.gguf" --prompt "hi" > /dev/null 2> "$dir/err_trunc.txt"
one_line_error "truncated model file" $? "$dir/err_trunc.txt"

"$OBCACHE" logits --model "$OBC_MODEL" --ids 1,2,99999999 -o "$dir/l.f32" > /dev/null 2> "$dir/err_id.txt"
one_line_error "token id outside the vocabulary" $? "$dir/err_id.txt"
check "token id outside the vocabulary: no logits file left" test ! -e "$dir/l.f32"

"$OBCACHE" perplexity --model "$OBC_MODEL" "$dir/genesis.txt" --stride 5000 > /dev/null 2> "$dir/err_stride.txt"
one_line_error "stride larger than the context" $? "$dir/err_stride.txt"

finish
