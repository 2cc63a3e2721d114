/* Loading the tokenizer from a GGUF file's tokenizer.* metadata, as
 * llama.cpp writes it: tokenizer.ggml.model ("gpt2" = byte-level BPE,
 * "llama" = SentencePiece with .scores, .add_space_prefix and byte-fallback
 * tokens, read as llama.cpp's SPM tokenizer reads them),
 * .tokens, .token_type (3 = control, 4 = user-defined: the special tokens),
 * .merges ("left right"), .pre (the pre-tokenizer), .bos_token_id,
 * .eos_token_id, .add_bos_token, and tokenizer.chat_template. Reads metadata
 * only: no tensor is touched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer_internal.h"

/* A metadata string as a NUL-terminated copy in buf (truncated to fit). */
static void copy_string(const GgufString *s, char *buf, size_t size) {
  size_t n = s->length < size - 1 ? (size_t)s->length : size - 1;
  memcpy(buf, s->data, n);
  buf[n] = '\0';
}

static int read_special_id(const GgufFile *file, const char *key, int32_t *out) {
  uint64_t value = 0;
  int rc = gguf_get_u64(file, key, &value);
  if (rc == OBC_ENOTFOUND) {
    obc_error_clear();
    return OBC_OK;
  }
  if (rc) return rc;
  *out = value > INT32_MAX ? INT32_MAX : (int32_t)value; /* range-checked in tokenizer_finish */
  return OBC_OK;
}

static int read_tokens(Tokenizer *t, const GgufFile *file, const char *path) {
  uint32_t type_kind = 0;
  uint64_t n_types = 0;
  int have_types = gguf_get_array(file, "tokenizer.ggml.token_type", &type_kind, &n_types) == 0;
  if (!have_types) obc_error_clear();
  if (have_types && n_types != t->n_vocab)
    return obc_fail(OBC_EFORMAT,
                    "%s: tokenizer.ggml.token_type has %llu entries (expected %zu, one per token)",
                    path, (unsigned long long)n_types, t->n_vocab);
  for (size_t i = 0; i < t->n_vocab; i++) {
    GgufString s;
    int rc = gguf_get_array_string(file, "tokenizer.ggml.tokens", i, &s);
    if (rc) return obc_fail_context(rc, "%s: tokenizer.ggml.tokens[%zu]", path, i);
    int64_t type = TOKEN_TYPE_NORMAL;
    if (have_types) {
      rc = gguf_get_array_i64(file, "tokenizer.ggml.token_type", i, &type);
      if (rc) return obc_fail_context(rc, "%s: tokenizer.ggml.token_type[%zu]", path, i);
    }
    rc = tokenizer_set_token(t, i, s.data, (size_t)s.length,
                             (uint8_t)(type >= 1 && type <= 6 ? type : 1));
    if (rc) return rc;
  }
  return OBC_OK;
}

static int read_merges(Tokenizer *t, const GgufFile *file, uint64_t n_merges, const char *path) {
  for (uint64_t i = 0; i < n_merges; i++) {
    GgufString s;
    int rc = gguf_get_array_string(file, "tokenizer.ggml.merges", i, &s);
    if (rc)
      return obc_fail_context(rc, "%s: tokenizer.ggml.merges[%llu]", path, (unsigned long long)i);
    /* The separator is the first space after the first byte (a part may be a space itself only
     * in the stand-in spelling, where a space is 'Ġ'). */
    const char *space = s.length > 1 ? memchr(s.data + 1, ' ', (size_t)s.length - 1) : NULL;
    if (!space)
      return obc_fail(OBC_EFORMAT,
                      "%s: tokenizer.ggml.merges[%llu] is '%.*s' (expected \"left right\")", path,
                      (unsigned long long)i, (int)(s.length < 64 ? s.length : 64), s.data);
    size_t left = (size_t)(space - s.data);
    tokenizer_add_merge(t, s.data, left, space + 1, (size_t)s.length - left - 1, (int32_t)i);
  }
  return OBC_OK;
}

static int read_settings(Tokenizer *t, const GgufFile *file, const char *path) {
  int rc = read_special_id(file, "tokenizer.ggml.bos_token_id", &t->bos_id);
  if (!rc) rc = read_special_id(file, "tokenizer.ggml.eos_token_id", &t->eos_id);
  if (rc) return obc_fail_context(rc, "%s", path);
  char pre_name[64] = "default";
  GgufString s;
  rc = gguf_get_string(file, "tokenizer.ggml.pre", &s);
  if (!rc)
    copy_string(&s, pre_name, sizeof(pre_name));
  else if (rc == OBC_ENOTFOUND)
    obc_error_clear();
  else
    return obc_fail_context(rc, "%s", path);
  rc = tokenizer_pre_from_name(&t->pre, pre_name, path);
  if (rc) return rc;
  /* As llama.cpp: Llama 3 takes a piece that is already a token whole and
   * starts prompts with BOS unless the file says otherwise. */
  int llama3 = !strcmp(pre_name, "llama3") || !strcmp(pre_name, "llama-bpe") ||
               !strcmp(pre_name, "llama-v3");
  t->ignore_merges = llama3;

  bool add_bos = llama3;
  rc = gguf_get_bool(file, "tokenizer.ggml.add_bos_token", &add_bos);
  if (rc == OBC_ENOTFOUND)
    obc_error_clear();
  else if (rc)
    return obc_fail_context(rc, "%s", path);
  t->add_bos = add_bos;

  rc = gguf_get_string(file, "tokenizer.chat_template", &s);
  if (!rc) return tokenizer_set_chat_template(t, s.data, (size_t)s.length);
  if (rc == OBC_ENOTFOUND) {
    obc_error_clear();
    return OBC_OK;
  }
  return obc_fail_context(rc, "%s", path);
}

/* A boolean key; *out keeps its default when the key is absent. */
static int read_optional_bool(const GgufFile *file, const char *key, bool *out) {
  int rc = gguf_get_bool(file, key, out);
  if (rc == OBC_ENOTFOUND) {
    obc_error_clear();
    return OBC_OK;
  }
  return rc;
}

/* The scores of a SentencePiece vocabulary (0 for every token when absent,
 * as llama.cpp takes them). */
static int read_scores(const GgufFile *file, size_t n_vocab, const char *path, float **out) {
  float *scores = obc_calloc(n_vocab, sizeof(*scores), "token scores");
  if (!scores) return OBC_ENOMEM;
  *out = scores;
  uint32_t kind = 0;
  uint64_t n = 0;
  int rc = gguf_get_array(file, "tokenizer.ggml.scores", &kind, &n);
  if (rc == OBC_ENOTFOUND) {
    obc_error_clear();
    return OBC_OK;
  }
  if (rc) return obc_fail_context(rc, "%s: tokenizer.ggml.scores", path);
  if (n != n_vocab)
    return obc_fail(OBC_EFORMAT,
                    "%s: tokenizer.ggml.scores has %llu entries (expected %zu, one per token)",
                    path, (unsigned long long)n, n_vocab);
  for (size_t i = 0; i < n_vocab; i++) {
    double v = 0;
    rc = gguf_get_array_f64(file, "tokenizer.ggml.scores", i, &v);
    if (rc) return obc_fail_context(rc, "%s: tokenizer.ggml.scores[%zu]", path, i);
    scores[i] = (float)v;
  }
  return OBC_OK;
}

/* tokenizer.ggml.model "llama": as llama.cpp, bos 1, eos 2 and unk 0 unless
 * the file names others, BOS added and a space put before the text unless the
 * file says otherwise; spaces are written as U+2581 and the text is one piece
 * (no pre-tokenizer). */
static int read_sentencepiece(Tokenizer *t, const GgufFile *file, const char *path) {
  float *scores = NULL;
  int rc = read_scores(file, t->n_vocab, path, &scores);
  if (!rc) rc = tokenizer_sentencepiece_merges(t, scores, path);
  free(scores);
  if (rc) return rc;
  tokenizer_sentencepiece_bytes(t, 1);
  int32_t defaults[3] = {1, 2, 0}; /* bos, eos, unk */
  for (size_t i = 0; i < 3; i++)
    if (defaults[i] >= (int32_t)t->n_vocab) defaults[i] = -1;
  t->bos_id = defaults[0];
  t->eos_id = defaults[1];
  t->unk_id = defaults[2];
  for (size_t i = 0; i < t->n_vocab; i++)
    if (t->token_types[i] == TOKEN_TYPE_UNKNOWN) t->unk_id = (int32_t)i;
  rc = read_special_id(file, "tokenizer.ggml.bos_token_id", &t->bos_id);
  if (!rc) rc = read_special_id(file, "tokenizer.ggml.eos_token_id", &t->eos_id);
  if (!rc) rc = read_special_id(file, "tokenizer.ggml.unknown_token_id", &t->unk_id);
  if (rc) return obc_fail_context(rc, "%s", path);
  bool add_bos = true, add_space_prefix = true;
  rc = read_optional_bool(file, "tokenizer.ggml.add_bos_token", &add_bos);
  if (!rc) rc = read_optional_bool(file, "tokenizer.ggml.add_space_prefix", &add_space_prefix);
  if (rc) return obc_fail_context(rc, "%s", path);
  t->add_bos = add_bos;
  t->decode_space = add_space_prefix ? DECODE_SPACE_STRIP_ONE : DECODE_SPACE_KEEP;
  snprintf(t->pre.name, sizeof(t->pre.name), "spm");
  /* Every stretch of text follows the start or a special token, where
   * llama.cpp puts the space. */
  if (add_space_prefix)
    rc = tokenizer_normalizer_add(&t->normalizer, NORMALIZE_PREPEND, NULL, " ", path, NULL);
  if (!rc)
    rc = tokenizer_normalizer_add(&t->normalizer, NORMALIZE_REPLACE, " ", t->space_marker, path,
                                  NULL);
  if (rc) return rc;
  GgufString s;
  rc = gguf_get_string(file, "tokenizer.chat_template", &s);
  if (!rc) return tokenizer_set_chat_template(t, s.data, (size_t)s.length);
  if (rc == OBC_ENOTFOUND) {
    obc_error_clear();
    return OBC_OK;
  }
  return obc_fail_context(rc, "%s", path);
}

int tokenizer_from_gguf(const GgufFile *file, const char *path, Tokenizer **out) {
  *out = NULL;
  GgufString model;
  int rc = gguf_get_string(file, "tokenizer.ggml.model", &model);
  if (rc) return obc_fail_context(rc, "%s: no tokenizer (tokenizer.ggml.model)", path);
  char model_name[64];
  copy_string(&model, model_name, sizeof(model_name));
  int sentencepiece = !strcmp(model_name, "llama");
  if (strcmp(model_name, "gpt2") && !sentencepiece)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: tokenizer.ggml.model is '%s' (expected 'gpt2', byte-level BPE, or "
                    "'llama', SentencePiece BPE)",
                    path, model_name);
  uint32_t kind = 0;
  uint64_t n_vocab = 0, n_merges = 0;
  rc = gguf_get_array(file, "tokenizer.ggml.tokens", &kind, &n_vocab);
  if (rc) return obc_fail_context(rc, "%s: tokenizer.ggml.tokens", path);
  if (kind != GGUF_TYPE_STRING || n_vocab == 0 || n_vocab > INT32_MAX)
    return obc_fail(
        OBC_EFORMAT,
        "%s: tokenizer.ggml.tokens is not a non-empty string array (type %u, %llu entries)", path,
        kind, (unsigned long long)n_vocab);
  if (!sentencepiece) {
    rc = gguf_get_array(file, "tokenizer.ggml.merges", &kind, &n_merges);
    if (rc) return obc_fail_context(rc, "%s: tokenizer.ggml.merges", path);
    if (kind != GGUF_TYPE_STRING)
      return obc_fail(OBC_EFORMAT, "%s: tokenizer.ggml.merges is not a string array (type %u)",
                      path, kind);
  }

  Tokenizer *t = NULL;
  rc = tokenizer_alloc((size_t)n_vocab, &t);
  if (!rc) rc = read_tokens(t, file, path);
  if (!rc) rc = tokenizer_index_vocab(t, (size_t)n_merges, path);
  if (!rc)
    rc = sentencepiece ? read_sentencepiece(t, file, path) : read_merges(t, file, n_merges, path);
  if (!rc && !sentencepiece) rc = read_settings(t, file, path);
  if (!rc) rc = tokenizer_finish(t, path);
  if (rc) {
    tokenizer_free(t);
    return rc;
  }
  *out = t;
  return OBC_OK;
}
