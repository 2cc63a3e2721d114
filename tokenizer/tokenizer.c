/* The Tokenizer's lifetime and its simple queries (vocabulary size, token
 * ids, bos/eos, stop tokens, chat kind). Loading lives in tokenizer_gguf.c
 * and tokenizer_hf.c (through tokenizer_build.c), encoding and decoding in
 * tokenizer_encode.c, chat rendering in tokenizer_chat.c. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"

void tokenizer_free(Tokenizer *tokenizer) {
  if (!tokenizer) return;
  for (size_t i = 0; i < tokenizer->n_vocab && tokenizer->tokens; i++) free(tokenizer->tokens[i]);
  free(tokenizer->tokens);
  free(tokenizer->token_lengths);
  free(tokenizer->token_types);
  tokenizer_string_map_free(&tokenizer->vocab);
  tokenizer_pair_map_free(&tokenizer->merges);
  tokenizer_pre_free(&tokenizer->pre);
  tokenizer_normalizer_free(&tokenizer->normalizer);
  free(tokenizer->special_ids);
  free(tokenizer->stop_ids);
  free(tokenizer->chat_template);
  free(tokenizer->default_system);
  free(tokenizer);
}

size_t tokenizer_vocab_size(const Tokenizer *tokenizer) { return tokenizer->n_vocab; }

int32_t tokenizer_bos_id(const Tokenizer *tokenizer) { return tokenizer->bos_id; }

int32_t tokenizer_eos_id(const Tokenizer *tokenizer) { return tokenizer->eos_id; }

int tokenizer_adds_bos(const Tokenizer *tokenizer) { return tokenizer->add_bos; }

TokenizerChatTemplate tokenizer_chat_template(const Tokenizer *tokenizer) {
  return tokenizer->chat;
}

const char *tokenizer_default_system(const Tokenizer *tokenizer) {
  return tokenizer->default_system;
}

const char *tokenizer_pre_name(const Tokenizer *tokenizer) { return tokenizer->pre.name; }

int tokenizer_is_stop(const Tokenizer *tokenizer, int32_t id) {
  for (size_t i = 0; i < tokenizer->n_stop; i++)
    if (tokenizer->stop_ids[i] == id) return 1;
  return 0;
}

int tokenizer_is_special(const Tokenizer *tokenizer, int32_t id) {
  if (id < 0 || (size_t)id >= tokenizer->n_vocab) return 0;
  uint8_t type = tokenizer->token_types[id];
  return type == TOKEN_TYPE_CONTROL || type == TOKEN_TYPE_USER_DEFINED;
}

int32_t tokenizer_token_id(const Tokenizer *tokenizer, const char *token) {
  return tokenizer_string_map_find(&tokenizer->vocab, token, strlen(token));
}
