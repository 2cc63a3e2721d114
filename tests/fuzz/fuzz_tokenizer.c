/* libFuzzer harness: a Hugging Face tokenizer.json, loaded as model_load loads
 * it and used. The input is tokenizer.json, a NUL byte, tokenizer_config.json
 * (not written when empty), a NUL byte, then a text (missing parts are empty).
 * The tokenizer encodes a fixed text and the input's text, decodes both back
 * and renders a chat. Seeds: tests/fuzz/make_seeds.py. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_common.h"
#include "tokenizer/tokenizer.h"

static const char fuzz_text[] =
    "Hello world! The needle is 42.\n<|im_start|>user\nna\xc3\xafve caf\xc3\xa9 \xf0\x9f\x98\x80";

static void round_trip(const Tokenizer *tokenizer, const char *text, size_t length) {
  int32_t *ids = NULL;
  size_t n_ids = 0;
  if (!tokenizer_encode(tokenizer, text, length, &ids, &n_ids)) {
    char *decoded = NULL;
    if (!tokenizer_decode(tokenizer, ids, n_ids, &decoded)) free(decoded);
    char buf[64];
    for (size_t i = 0; i < n_ids && i < 16; i++) {
      tokenizer_token_text(tokenizer, ids[i], buf, sizeof buf);
      tokenizer_is_special(tokenizer, ids[i]);
    }
  }
  free(ids);
}

static void use_tokenizer(const Tokenizer *tokenizer, const uint8_t *text, size_t length) {
  tokenizer_vocab_size(tokenizer);
  tokenizer_bos_id(tokenizer);
  tokenizer_is_stop(tokenizer, tokenizer_eos_id(tokenizer));
  tokenizer_pre_name(tokenizer);
  tokenizer_adds_bos(tokenizer);
  tokenizer_default_system(tokenizer);
  tokenizer_token_id(tokenizer, "<|im_end|>");
  round_trip(tokenizer, fuzz_text, sizeof fuzz_text - 1);
  round_trip(tokenizer, (const char *)text, length);
  int32_t *ids = NULL;
  size_t n_ids = 0;
  tokenizer_encode_chat(tokenizer, NULL, "Where is the needle?", &ids, &n_ids);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t json_n, config_n, text_n, rest_n;
  const uint8_t *rest, *text;
  fuzz_split(data, size, &json_n, &rest, &rest_n);
  fuzz_split(rest, rest_n, &config_n, &text, &text_n);
  char json[8192], config[8192];
  fuzz_write("tokenizer.json", data, json_n, json, sizeof json);
  config[0] = '\0';
  if (config_n) fuzz_write("tokenizer_config.json", rest, config_n, config, sizeof config);
  Tokenizer *tokenizer;
  if (!tokenizer_from_hf(fuzz_scratch(), &tokenizer)) {
    use_tokenizer(tokenizer, text, text_n);
    tokenizer_free(tokenizer);
  }
  unlink(json);
  if (config[0]) unlink(config);
  return 0;
}
