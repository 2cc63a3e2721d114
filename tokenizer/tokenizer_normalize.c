/* The normalizer of a tokenizer.json (Hugging Face `tokenizers` semantics):
 * Unicode forms NFC, NFD, NFKC, NFKD, per-character Lowercase, Prepend,
 * Replace of a literal string, Strip of White_Space, plus the replacement and
 * prefix of a Metaspace pre-tokenizer. Steps run in turn over UTF-8 buffers.
 * A Sequence of Replace steps could grow the text without bound, so the
 * result is capped at NORMALIZED_GROWTH times the input (NFKC's longest
 * expansion, U+FDFA, is 18 characters from 1). */
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

#define NORMALIZED_GROWTH 64
#define NORMALIZED_SLACK 4096

static char *copy_bytes(const char *s, size_t n) {
  char *copy = malloc(n + 1);
  if (!copy) return NULL;
  if (n) memcpy(copy, s, n);
  copy[n] = '\0';
  return copy;
}

int tokenizer_normalizer_add(TokenizerNormalizer *normalizer, TokenizerNormalizeKind kind,
                             const char *pattern, const char *text, const char *source,
                             TokenizerNormalizeStep **step) {
  if (normalizer->n_steps == TOKENIZER_MAX_NORMALIZE_STEPS)
    return obc_fail(OBC_EUNSUPPORTED, "%s: more than %d normalizer steps", source,
                    TOKENIZER_MAX_NORMALIZE_STEPS);
  TokenizerNormalizeStep *s = &normalizer->steps[normalizer->n_steps];
  *s = (TokenizerNormalizeStep){.kind = kind};
  if (pattern) {
    s->pattern_length = strlen(pattern);
    s->pattern = copy_bytes(pattern, s->pattern_length);
  }
  if (text) {
    s->text_length = strlen(text);
    s->text = copy_bytes(text, s->text_length);
  }
  if ((pattern && !s->pattern) || (text && !s->text)) {
    free(s->pattern);
    free(s->text);
    return obc_fail(OBC_ENOMEM, "%s: out of memory for a normalizer", source);
  }
  normalizer->n_steps++;
  if (step) *step = s;
  return OBC_OK;
}

void tokenizer_normalizer_free(TokenizerNormalizer *normalizer) {
  for (size_t i = 0; i < normalizer->n_steps; i++) {
    free(normalizer->steps[i].pattern);
    free(normalizer->steps[i].text);
  }
  normalizer->n_steps = 0;
}

/* A text under construction. */
typedef struct {
  char *data;
  size_t length, capacity, limit;
} TextBuffer;

static int text_append(TextBuffer *b, const char *s, size_t n) {
  if (n > b->limit - b->length)
    return obc_fail(OBC_EINVAL,
                    "tokenizer: the normalizer grows the text past %zu bytes (%d times the input)",
                    b->limit, NORMALIZED_GROWTH);
  if (b->length + n + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->length + n + 1) capacity *= 2;
    char *data = realloc(b->data, capacity);
    if (!data) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for %zu bytes", capacity);
    b->data = data;
    b->capacity = capacity;
  }
  if (n) memcpy(b->data + b->length, s, n);
  b->length += n;
  b->data[b->length] = '\0';
  return OBC_OK;
}

static int apply_unicode(const TokenizerNormalizeStep *step, const char *in, size_t n,
                         TextBuffer *out) {
  UnicodeBuffer cps = {0};
  int rc = unicode_decode_utf8(in, n, &cps);
  if (!rc) {
    switch (step->kind) {
      case NORMALIZE_NFC: rc = unicode_normalize(&cps, UNICODE_NFC); break;
      case NORMALIZE_NFD: rc = unicode_normalize(&cps, UNICODE_NFD); break;
      case NORMALIZE_NFKC: rc = unicode_normalize(&cps, UNICODE_NFKC); break;
      case NORMALIZE_NFKD: rc = unicode_normalize(&cps, UNICODE_NFKD); break;
      default: rc = unicode_lowercase(&cps); break;
    }
  }
  char *text = NULL;
  size_t length = 0;
  if (!rc) rc = unicode_encode_utf8(cps.cps, cps.count, &text, &length);
  if (!rc) rc = text_append(out, text, length);
  free(text);
  unicode_buffer_free(&cps);
  return rc;
}

static int apply_step(const TokenizerNormalizeStep *step, const char *in, size_t n, int first,
                      TextBuffer *out) {
  switch (step->kind) {
    case NORMALIZE_PREPEND: {
      if (n == 0) return OBC_OK;
      int rc = text_append(out, step->text, step->text_length);
      return rc ? rc : text_append(out, in, n);
    }
    case NORMALIZE_PREFIX_FIRST:
    case NORMALIZE_PREFIX_ALWAYS: {
      int starts = n >= step->text_length && !memcmp(in, step->text, step->text_length);
      int rc = OBC_OK;
      if (n && !starts && (step->kind == NORMALIZE_PREFIX_ALWAYS || first))
        rc = text_append(out, step->text, step->text_length);
      return rc ? rc : text_append(out, in, n);
    }
    case NORMALIZE_REPLACE: {
      size_t done = 0;
      for (size_t i = 0; i + step->pattern_length <= n;) {
        if (memcmp(in + i, step->pattern, step->pattern_length)) {
          i++;
          continue;
        }
        int rc = text_append(out, in + done, i - done);
        if (!rc) rc = text_append(out, step->text, step->text_length);
        if (rc) return rc;
        i += step->pattern_length;
        done = i;
      }
      return text_append(out, in + done, n - done);
    }
    case NORMALIZE_STRIP: {
      size_t begin = 0, end = n, k;
      while (step->strip_left && begin < end &&
             unicode_is_whitespace(unicode_utf8_next(in + begin, end - begin, &k)))
        begin += k;
      while (step->strip_right && end > begin) {
        size_t start = end - 1;
        while (start > begin && ((unsigned char)in[start] & 0xC0) == 0x80) start--;
        if (!unicode_is_whitespace(unicode_utf8_next(in + start, end - start, &k))) break;
        end = start;
      }
      return text_append(out, in + begin, end - begin);
    }
    default: return apply_unicode(step, in, n, out);
  }
}

int tokenizer_normalize(const TokenizerNormalizer *normalizer, const char *text, size_t length,
                        int first, char **out, size_t *out_length) {
  *out = NULL;
  *out_length = 0;
  size_t limit = length > (SIZE_MAX - NORMALIZED_SLACK) / NORMALIZED_GROWTH
                     ? SIZE_MAX / 2
                     : NORMALIZED_GROWTH * length + NORMALIZED_SLACK;
  TextBuffer current = {.limit = limit};
  int rc = text_append(&current, text, length);
  for (size_t i = 0; i < normalizer->n_steps && !rc; i++) {
    TextBuffer next = {.limit = limit};
    rc = apply_step(&normalizer->steps[i], current.data, current.length, first, &next);
    if (!rc && !next.data) rc = text_append(&next, "", 0);
    free(current.data);
    current = next;
  }
  if (rc) {
    free(current.data);
    return rc;
  }
  *out = current.data;
  *out_length = current.length;
  return OBC_OK;
}
