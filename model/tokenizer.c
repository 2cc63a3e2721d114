/* The Tokenizer's lifetime and its simple queries (vocabulary, special ids,
 * stop tokens, token text). Loading, encoding and chat rendering live in the
 * other tokenizer_*.c files; this first version of the file defines them as
 * not-yet-supported so that the rest of the runtime links. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "model/tokenizer_internal.h"

void tokenizer_free(Tokenizer *tokenizer) {
  if (!tokenizer) return;
  for (size_t i = 0; i < tokenizer->n_vocab; i++) free(tokenizer->tokens ? tokenizer->tokens[i] : NULL);
  free(tokenizer->tokens);
  free(tokenizer->token_lengths);
  free(tokenizer->token_types);
  free(tokenizer->vocab.keys);
  free(tokenizer->vocab.key_lengths);
  free(tokenizer->vocab.values);
  free(tokenizer->merges.keys);
  free(tokenizer->merges.ranks);
  free(tokenizer->merges.merged);
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

ObcChatTemplate tokenizer_chat_template(const Tokenizer *tokenizer) { return tokenizer->chat; }

int tokenizer_is_stop(const Tokenizer *tokenizer, int32_t id) {
  for (size_t i = 0; i < tokenizer->n_stop; i++)
    if (tokenizer->stop_ids[i] == id) return 1;
  return 0;
}

int32_t tokenizer_token_id(const Tokenizer *tokenizer, const char *token) {
  size_t length = strlen(token);
  for (size_t i = 0; i < tokenizer->n_vocab; i++)
    if (tokenizer->token_lengths[i] == length && !memcmp(tokenizer->tokens[i], token, length))
      return (int32_t)i;
  return -1;
}

int tokenizer_from_gguf(const GgufFile *file, const char *path, Tokenizer **out) {
  *out = NULL;
  return obc_fail(OBC_EUNSUPPORTED, "%s: tokenizer from GGUF metadata not implemented yet", path);
}

int tokenizer_from_hf(const char *folder, Tokenizer **out) {
  *out = NULL;
  return obc_fail(OBC_EUNSUPPORTED, "%s: tokenizer.json loading not implemented yet", folder);
}

int tokenizer_encode(const Tokenizer *tokenizer, const char *text, size_t length, int32_t **ids,
                     size_t *n_ids) {
  *ids = NULL;
  *n_ids = 0;
  return obc_fail(OBC_EUNSUPPORTED, "tokenizer_encode: not implemented yet");
}

int tokenizer_decode(const Tokenizer *tokenizer, const int32_t *ids, size_t n_ids, char **text) {
  *text = NULL;
  return obc_fail(OBC_EUNSUPPORTED, "tokenizer_decode: not implemented yet");
}

int tokenizer_token_text(const Tokenizer *tokenizer, int32_t id, char *buf, size_t size) {
  assert(size > 0);
  buf[0] = '\0';
  return obc_fail(OBC_EUNSUPPORTED, "tokenizer_token_text: not implemented yet");
}

int tokenizer_encode_chat(const Tokenizer *tokenizer, const char *system, const char *user,
                          int32_t **ids, size_t *n_ids) {
  *ids = NULL;
  *n_ids = 0;
  return obc_fail(OBC_EUNSUPPORTED, "tokenizer_encode_chat: not implemented yet");
}
