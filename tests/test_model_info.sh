#!/usr/bin/env bash
# CLI test of `obcache model-info`: on the default SmolLM2 GGUF it reports the
# tensor table as stored (Q4_1, Q8_0 and F32) and the configuration model_load
# derives; a missing or damaged model is a one-line error and exit status 1,
# and every command that takes a model refuses a missing one with that line.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${OBCACHE:?}" "${OBC_TMP:?}"
scratch model_info

if [ -n "${OBC_MODEL:-}" ] && [ -r "$OBC_MODEL" ]; then
  out=$("$OBCACHE" model-info --model "$OBC_MODEL")
  echo "$out"
  grep -q "^format: GGUF v3" <<<"$out"
  grep -q "^tensors: 272 (F32 61, Q4_1 210, Q8_0 1)" <<<"$out"
  grep -q "^config: llama, 30 layers, dim 576, ffn 1536, heads 9 (kv 3), head_dim 64, vocab 49152" <<<"$out"
  grep -q "tied embeddings yes" <<<"$out"
  listed=$("$OBCACHE" model-info --model "$OBC_MODEL" --tensors --no-load | grep -c "^  blk\.")
  [ "$listed" = 270 ] || fatal "expected 270 blk tensors, listed $listed"
else
  echo "SKIP (real model): OBC_MODEL missing; run scripts/setup.sh"
fi

expect_error() { # expect_error FRAGMENT ARGS...: exit 1, one line on stderr naming FRAGMENT
  local fragment=$1; shift
  set +e
  "$OBCACHE" model-info "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  set -e
  [ "$rc" = 1 ] || fatal "model-info $*: exit $rc, expected 1"
  [ "$(wc -l <"$dir/err")" = 1 ] || fatal "model-info $*: not one line: $(cat "$dir/err")"
  grep -qF -- "$fragment" "$dir/err" || fatal "model-info $*: no '$fragment' in: $(cat "$dir/err")"
  pass "$(cat "$dir/err")"
}
expect_error "$dir/none.gguf" --model "$dir/none.gguf"
printf 'GGUF\003\000\000\000' >"$dir/short.gguf"
expect_error "truncated at offset 8" --model "$dir/short.gguf"
printf 'not a model at all' >"$dir/text.gguf"
expect_error "not a GGUF file" --model "$dir/text.gguf"
mkdir -p "$dir/folder"
echo '{"model_type": "mistral"}' >"$dir/folder/config.json"
printf '\010\000\000\000\000\000\000\000{}      ' >"$dir/folder/model.safetensors"
expect_error "config.json: model_type" --model "$dir/folder"
expect_error "unknown option '--bogus' (try obcache model-info --help)" --bogus

# Every command that takes a model refuses a missing one with the same line
# (model_locate), and writes nothing.
missing="$dir/no-such-model.gguf"
set +e # fails runs commands that exit 1
for cmd in "model-info" "tokenize x" "generate --prompt x" "capture --length 256 -o $dir/t.h5" \
  "eval -o $dir/ev" "sweep -o $dir/sw"; do
  # shellcheck disable=SC2086 # the command's words
  fails "$cmd: a missing model" \
    "^obcache ${cmd%% *}: $missing: no such model file or folder (hint: run scripts/setup.sh" \
    $cmd --model "$missing"
done
check "the refused capture, eval and sweep wrote nothing" \
  eval '[ ! -e "$dir/t.h5" ] && [ ! -e "$dir/ev" ] && [ ! -e "$dir/sw" ]'
set -e
finish
