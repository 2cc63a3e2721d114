#!/usr/bin/env bash
# A Mistral-shaped model with a SentencePiece vocabulary end to end: the
# vocabulary is trained by tests/make_sentencepiece_vocab.py (a GGUF with
# tokenizer.ggml.model "llama", byte-fallback tokens, scores), the random-weight
# model is tests/make_random_gguf.py mistral-small (llama architecture, 8/2
# heads, untied, Q8_0). model-info reports it; `obcache tokenize` starts with
# BOS, spells a space before the text, falls back to byte tokens for
# characters the vocabulary lacks and decodes back to the text; generate runs;
# a capture passes `obcache verify` and `obcache analyze`, replays with the
# model, and an eval runs a sample of niah_single_1.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_TMP:?}" "${OBC_SOURCE_DIR:?}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
scratch sentencepiece_model
tests=$OBC_SOURCE_DIR/tests
python3 "$tests/make_sentencepiece_vocab.py" "$dir/vocab.gguf" || fatal "make_sentencepiece_vocab.py"
python3 "$tests/make_random_gguf.py" mistral-small Q8_0 "$dir/vocab.gguf" "$dir/m.gguf" ||
  fatal "make_random_gguf.py mistral-small"
model=$dir/m.gguf

"$OBCACHE" model-info --model "$model" > "$dir/info.txt" 2>&1
check "model-info reports the llama configuration" grep -q \
  "^config: llama, 2 layers, dim 128, ffn 256, heads 8 (kv 2), head_dim 16, vocab 1024" \
  "$dir/info.txt"

"$OBCACHE" tokenize --model "$model" --show "the city" > "$dir/show.txt"
check "tokenize: BOS first, then the words with their space marker" test \
  "$(cut -f2 "$dir/show.txt" | tr '\n' '|')" = "<s>| the| city|"
"$OBCACHE" tokenize --model "$model" --show "漢" > "$dir/show.txt"
check "tokenize: a character the vocabulary lacks falls back to its bytes" test \
  "$(cut -f2 "$dir/show.txt" | tr '\n' '|')" = "<s>| |\\xe6|\\xbc|\\xa2|"
for text in "The secret number is 42." "  two  spaces, café, 漢字 😀" "tabs	and ü"; do
  ids=$("$OBCACHE" tokenize --model "$model" "$text" | cut -d' ' -f2- | tr ' ' ,)
  check "decode(tokenize('$text')) gives the text back" test \
    "$("$OBCACHE" tokenize --model "$model" --ids "$ids")" = "$text"
done

"$OBCACHE" generate --model "$model" --prompt "The capital of France is" --max-new-tokens 4 \
  > "$dir/gen.txt" 2> "$dir/gen_err.txt"
check "generate runs" grep -q "generated 4 tokens" "$dir/gen_err.txt"
"$OBCACHE" capture --model "$model" --length 400 --depth 50 --haystack noise --decode 4 \
  --rows 32 -o "$dir/t.h5" > "$dir/cap.txt" 2>&1
check "capture succeeds" test $? -eq 0 -a -s "$dir/t.h5"
"$OBCACHE" verify "$dir/t.h5" > "$dir/verify.txt" 2>&1
check "obcache verify passes on the trace" test $? -eq 0
"$OBCACHE" analyze "$dir/t.h5" -o "$dir/analysis" --quiet > "$dir/analyze.txt" 2>&1
check "obcache analyze runs on the trace" test $? -eq 0 -a -s "$dir/analysis/recall.csv"
"$OBCACHE" replay "$dir/t.h5" --model "$model" --score knorm --budget 50% -o "$dir/replay" \
  > "$dir/replay.txt" 2>&1
check "model replay runs on the trace" test $? -eq 0 -a -s "$dir/replay/replay.json"
"$OBCACHE" eval --model "$model" --tasks niah_single_1 --samples 1 --length 512 \
  --scores tova,tova+obc_vk --budgets 50% --max-new-tokens 2 --no-figures -o "$dir/eval" \
  > "$dir/eval.txt" 2>&1
check "eval runs a sample" test $? -eq 0 -a -s "$dir/eval/accuracy.csv"
finish
