#!/usr/bin/env bash
# Commands given token ids read no tokenizer: `obcache logits --ids` runs a
# tiny random-weight Qwen3 folder (tests/make_tiny_hf.py) whose tokenizer.json
# has an empty normalizer Sequence, one whose normalizer obcache does not read
# (BertNormalizer), and one with no tokenizer.json at all; the same logits come
# out of each. --text still needs the tokenizer and says in one line why it
# cannot have it.
set -u
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_TMP:?}" "${OBC_SOURCE_DIR:?}"
scratch tokenizer_optional
for kind in empty unknown none; do
  python3 "$OBC_SOURCE_DIR/tests/make_tiny_hf.py" "$dir/$kind" --tokenizer $kind ||
    fatal "make_tiny_hf.py --tokenizer $kind"
  "$OBCACHE" logits --model "$dir/$kind" --ids 1,2,3 -o "$dir/$kind.f32" > /dev/null 2> "$dir/err"
  check "$kind: logits --ids runs" test $? -eq 0 -a -s "$dir/$kind.f32"
done
check "the three folders give the same logits" cmp -s "$dir/empty.f32" "$dir/unknown.f32"
check "a folder without tokenizer.json gives them too" cmp -s "$dir/empty.f32" "$dir/none.f32"
fails "unknown normalizer: logits --text refused in one line naming it" \
  "tokenizer.json: .*BertNormalizer" logits --model "$dir/unknown" --text hi -o "$dir/t.f32"
fails "no tokenizer.json: logits --text refused in one line" "has no tokenizer" \
  logits --model "$dir/none" --text hi -o "$dir/t.f32"
finish
