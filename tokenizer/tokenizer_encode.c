/* Text <-> ids. Encoding checks the text is UTF-8, splits out the special
 * (control and user-defined) tokens by exact match, longest first, then
 * pre-tokenizes each stretch between them and runs BPE on every piece.
 * Decoding maps each normal token's stand-in characters back to bytes and
 * writes special tokens as their text. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"

/* Length of the valid UTF-8 prefix (no overlongs, surrogates or > U+10FFFF). */
static size_t utf8_valid_prefix(const unsigned char *s, size_t length) {
  size_t i = 0;
  while (i < length) {
    unsigned char c = s[i];
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      cp = c & 0x07;
    } else
      return i;
    if (i + n > length) return i;
    for (size_t k = 1; k < n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return i;
    i += n;
  }
  return i;
}

typedef struct {
  const Tokenizer *tokenizer;
  TokenizerIdList *out;
} PieceContext;

static int encode_piece(void *context, const char *start, size_t length) {
  PieceContext *c = context;
  return tokenizer_bpe_piece(c->tokenizer, start, length, c->out);
}

/* One stretch of text between special tokens: normalized (when the
 * tokenizer has a normalizer), pre-tokenized, and each piece encoded. */
static int encode_stretch(const Tokenizer *tokenizer, const char *text, size_t length, int first,
                          PieceContext *context) {
  if (tokenizer->normalizer.n_steps == 0)
    return tokenizer_pre_split(&tokenizer->pre, text, length, encode_piece, context);
  char *normalized = NULL;
  size_t n = 0;
  int rc = tokenizer_normalize(&tokenizer->normalizer, text, length, first, &normalized, &n);
  if (!rc) rc = tokenizer_pre_split(&tokenizer->pre, normalized, n, encode_piece, context);
  free(normalized);
  return rc;
}

/* The special token starting at text (longest first), or -1. */
static int32_t special_at(const Tokenizer *tokenizer, const char *text, size_t left) {
  if (!tokenizer->special_first_byte[(unsigned char)text[0]]) return -1;
  for (size_t k = 0; k < tokenizer->n_special; k++) {
    int32_t id = tokenizer->special_ids[k];
    uint32_t n = tokenizer->token_lengths[id];
    if (n <= left && !memcmp(text, tokenizer->tokens[id], n)) return id;
  }
  return -1;
}

int tokenizer_encode(const Tokenizer *tokenizer, const char *text, size_t length, int32_t **ids,
                     size_t *n_ids) {
  *ids = NULL;
  *n_ids = 0;
  size_t valid = utf8_valid_prefix((const unsigned char *)text, length);
  if (valid != length)
    return obc_fail(OBC_EINVAL, "tokenizer: text is not valid UTF-8 at byte %zu (of %zu)", valid,
                    length);
  TokenizerIdList out = {0};
  PieceContext context = {tokenizer, &out};
  int rc = 0;
  size_t plain_start = 0;
  for (size_t i = 0; i <= length && !rc;) {
    int32_t special = i < length ? special_at(tokenizer, text + i, length - i) : -1;
    if (special < 0 && i < length) {
      i++;
      continue;
    }
    rc = encode_stretch(tokenizer, text + plain_start, i - plain_start, plain_start == 0, &context);
    if (!rc && special >= 0) rc = tokenizer_id_list_push(&out, special);
    if (special < 0) break;
    i += tokenizer->token_lengths[special];
    plain_start = i;
  }
  if (rc) {
    free(out.ids);
    return rc;
  }
  if (!out.ids) out.ids = malloc(sizeof(int32_t)); /* a valid pointer even for empty text */
  if (!out.ids) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory");
  *ids = out.ids;
  *n_ids = out.count;
  return OBC_OK;
}

/* A SentencePiece token: a byte-fallback token <0xXX> is its byte, any other
 * token its text with the space marker turned back into spaces. */
static size_t sentencepiece_bytes(const Tokenizer *tokenizer, int32_t id, int drop_markers,
                                  char *out) {
  const char *s = tokenizer->tokens[id];
  size_t length = tokenizer->token_lengths[id];
  if (tokenizer->token_types[id] == TOKEN_TYPE_BYTE && length == 6 && !memcmp(s, "<0x", 3)) {
    char hex[3] = {s[3], s[4], '\0'};
    out[0] = (char)strtol(hex, NULL, 16);
    return 1;
  }
  const char *marker = tokenizer->space_marker;
  size_t marker_length = strlen(marker), k = 0;
  for (size_t i = 0; i < length;) {
    if (marker_length && i + marker_length <= length && !memcmp(s + i, marker, marker_length)) {
      if (!drop_markers) out[k++] = ' ';
      i += marker_length;
    } else {
      out[k++] = s[i++];
    }
  }
  return k;
}

/* Writes the bytes of token id to out (room for its length, which is never
 * less than the decoded size); returns the byte count. */
static size_t token_bytes(const Tokenizer *tokenizer, int32_t id, char *out) {
  const char *s = tokenizer->tokens[id];
  size_t length = tokenizer->token_lengths[id];
  uint8_t type = tokenizer->token_types[id];
  if (type == TOKEN_TYPE_CONTROL || type == TOKEN_TYPE_USER_DEFINED) {
    memcpy(out, s, length);
    return length;
  }
  if (tokenizer->kind == TOKENIZER_SENTENCEPIECE) return sentencepiece_bytes(tokenizer, id, 0, out);
  size_t k = 0;
  for (size_t i = 0; i < length;) {
    unsigned char c = (unsigned char)s[i];
    uint32_t cp = c;
    size_t n = 1;
    if (c >= 0xC0 && c < 0xE0 && i + 1 < length) {
      cp = (uint32_t)(c & 0x1F) << 6 | ((unsigned char)s[i + 1] & 0x3F);
      n = 2;
    }
    if (cp < 512 && tokenizer->codepoint_byte[cp] >= 0 && (n == 2 || c < 0x80)) {
      out[k++] = (char)tokenizer->codepoint_byte[cp];
    } else { /* not a stand-in character: keep it as written */
      while (n < 4 && i + n < length && ((unsigned char)s[i + n] & 0xC0) == 0x80) n++;
      memcpy(out + k, s + i, n);
      k += n;
    }
    i += n;
  }
  return k;
}

int tokenizer_decode(const Tokenizer *tokenizer, const int32_t *ids, size_t n_ids, char **text) {
  *text = NULL;
  size_t total = 1;
  for (size_t i = 0; i < n_ids; i++) {
    if (ids[i] < 0 || (size_t)ids[i] >= tokenizer->n_vocab)
      return obc_fail(OBC_EINVAL, "tokenizer: token id %d out of range (vocabulary of %zu)", ids[i],
                      tokenizer->n_vocab);
    total += tokenizer->token_lengths[ids[i]];
  }
  char *out = malloc(total);
  if (!out) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for %zu bytes of text", total);
  size_t k = 0;
  for (size_t i = 0; i < n_ids; i++) {
    uint8_t type = tokenizer->token_types[ids[i]];
    int plain = type != TOKEN_TYPE_CONTROL && type != TOKEN_TYPE_USER_DEFINED;
    size_t n;
    if (i == 0 && plain && tokenizer->decode_space == DECODE_SPACE_DROP_FIRST_MARKERS)
      n = sentencepiece_bytes(tokenizer, ids[i], 1, out);
    else
      n = token_bytes(tokenizer, ids[i], out + k);
    if (i == 0 && tokenizer->decode_space == DECODE_SPACE_STRIP_ONE && n > 0 && out[0] == ' ') {
      memmove(out, out + 1, n - 1); /* the space the encoder put before the text */
      n--;
    }
    k += n;
  }
  out[k] = '\0';
  *text = out;
  return OBC_OK;
}

int tokenizer_token_text(const Tokenizer *tokenizer, int32_t id, char *buf, size_t size) {
  assert(size > 0);
  buf[0] = '\0';
  if (id < 0 || (size_t)id >= tokenizer->n_vocab)
    return obc_fail(OBC_EINVAL, "tokenizer: token id %d out of range (vocabulary of %zu)", id,
                    tokenizer->n_vocab);
  size_t need = tokenizer->token_lengths[id] + 1;
  if (need > size) {
    char *tmp = malloc(need);
    if (!tmp) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory");
    size_t n = token_bytes(tokenizer, id, tmp);
    int fits = n < size;
    if (fits) {
      memcpy(buf, tmp, n);
      buf[n] = '\0';
    }
    free(tmp);
    if (!fits)
      return obc_fail(OBC_EINVAL, "tokenizer: text of token %d needs %zu bytes (buffer of %zu)", id,
                      n + 1, size);
    return OBC_OK;
  }
  size_t n = token_bytes(tokenizer, id, buf);
  buf[n] = '\0';
  return OBC_OK;
}
