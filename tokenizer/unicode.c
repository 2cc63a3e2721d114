/* Unicode normalization (UAX #15) and lowercase over code point buffers, for
 * the tokenizer's normalizers (tokenizer_normalize.c). The tables are
 * tokenizer/unicode_tables.c; Hangul syllables are decomposed and composed by
 * the formula of the Unicode standard (section 3.12), not by table. */
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/unicode.h"

/* Hangul: S = SBASE + (L - LBASE) * NCOUNT + (V - VBASE) * TCOUNT + (T - TBASE). */
enum {
  HANGUL_SBASE = 0xAC00,
  HANGUL_LBASE = 0x1100,
  HANGUL_VBASE = 0x1161,
  HANGUL_TBASE = 0x11A7,
  HANGUL_LCOUNT = 19,
  HANGUL_VCOUNT = 21,
  HANGUL_TCOUNT = 28,
  HANGUL_NCOUNT = HANGUL_VCOUNT * HANGUL_TCOUNT,
  HANGUL_SCOUNT = HANGUL_LCOUNT * HANGUL_NCOUNT
};

/* The deepest chain of one-level decompositions in the tables is 4. */
#define UNICODE_MAX_DEPTH 8

void unicode_buffer_free(UnicodeBuffer *buffer) {
  free(buffer->cps);
  memset(buffer, 0, sizeof(*buffer));
}

static int buffer_push(UnicodeBuffer *buffer, uint32_t cp) {
  if (buffer->count == buffer->capacity) {
    size_t capacity = buffer->capacity ? 2 * buffer->capacity : 64;
    uint32_t *cps = realloc(buffer->cps, capacity * sizeof(*cps));
    if (!cps) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for %zu characters", capacity);
    buffer->cps = cps;
    buffer->capacity = capacity;
  }
  buffer->cps[buffer->count++] = cp;
  return OBC_OK;
}

uint32_t unicode_utf8_next(const char *s, size_t left, size_t *width) {
  const unsigned char *u = (const unsigned char *)s;
  unsigned char c = u[0];
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (n > left) n = left;
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1Fu : n == 3 ? c & 0x0Fu : c & 0x07u;
  for (size_t k = 1; k < n; k++) cp = cp << 6 | (u[k] & 0x3Fu);
  *width = n;
  return cp;
}

int unicode_decode_utf8(const char *text, size_t length, UnicodeBuffer *out) {
  out->count = 0;
  for (size_t i = 0; i < length;) {
    size_t width = 1;
    int rc = buffer_push(out, unicode_utf8_next(text + i, length - i, &width));
    if (rc) return rc;
    i += width;
  }
  return OBC_OK;
}

int unicode_encode_utf8(const uint32_t *cps, size_t count, char **text, size_t *length) {
  char *out = malloc(4 * count + 1);
  if (!out) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for %zu characters", count);
  size_t k = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t cp = cps[i];
    if (cp < 0x80) {
      out[k++] = (char)cp;
    } else if (cp < 0x800) {
      out[k++] = (char)(0xC0 | cp >> 6);
      out[k++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out[k++] = (char)(0xE0 | cp >> 12);
      out[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[k++] = (char)(0x80 | (cp & 0x3F));
    } else {
      out[k++] = (char)(0xF0 | cp >> 18);
      out[k++] = (char)(0x80 | (cp >> 12 & 0x3F));
      out[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
      out[k++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  out[k] = '\0';
  *text = out;
  *length = k;
  return OBC_OK;
}

int unicode_is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

/* Index of key in keys[count] (sorted), compared after shifting by shift; -1 when absent. */
static long find_sorted(const uint32_t *keys, size_t count, uint32_t key, unsigned shift) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    uint32_t k = keys[mid] >> shift;
    if (k == key) return (long)mid;
    if (k < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

static unsigned combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  long i = find_sorted(unicode_combining, unicode_combining_count, cp, 8);
  return i < 0 ? 0 : unicode_combining[i] & 0xFF;
}

static int decompose_into(UnicodeBuffer *out, uint32_t cp, int compat, int depth) {
  if (cp >= HANGUL_SBASE && cp < HANGUL_SBASE + HANGUL_SCOUNT) {
    uint32_t s = cp - HANGUL_SBASE, t = s % HANGUL_TCOUNT;
    int rc = buffer_push(out, HANGUL_LBASE + s / HANGUL_NCOUNT);
    if (!rc) rc = buffer_push(out, HANGUL_VBASE + s % HANGUL_NCOUNT / HANGUL_TCOUNT);
    if (!rc && t) rc = buffer_push(out, HANGUL_TBASE + t);
    return rc;
  }
  long i = cp < 0xA0 || depth >= UNICODE_MAX_DEPTH
               ? -1
               : find_sorted(unicode_decomposition_keys, unicode_decomposition_count, cp, 1);
  if (i < 0 || (!compat && (unicode_decomposition_keys[i] & 1))) return buffer_push(out, cp);
  uint32_t span = unicode_decomposition_spans[i];
  const uint32_t *mapping = unicode_mapping_pool + (span >> 5);
  for (uint32_t k = 0; k < (span & 31); k++) {
    int rc = decompose_into(out, mapping[k], compat, depth + 1);
    if (rc) return rc;
  }
  return OBC_OK;
}

/* Stable sort of each run of non-starters by combining class: insertion sort
 * for short runs, a counting sort (classes are 1..255) for long ones, so that
 * a text of many combining marks stays linear. */
static int canonical_order(UnicodeBuffer *b) {
  uint32_t *scratch = NULL;
  for (size_t i = 0; i < b->count;) {
    if (!combining_class(b->cps[i])) {
      i++;
      continue;
    }
    size_t end = i;
    while (end < b->count && combining_class(b->cps[end])) end++;
    uint32_t *run = b->cps + i;
    size_t n = end - i;
    if (n <= 32) {
      for (size_t k = 1; k < n; k++) {
        uint32_t cp = run[k];
        unsigned c = combining_class(cp);
        size_t j = k;
        for (; j > 0 && combining_class(run[j - 1]) > c; j--) run[j] = run[j - 1];
        run[j] = cp;
      }
    } else {
      if (!scratch && !(scratch = malloc(b->count * sizeof(*scratch))))
        return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for %zu characters", b->count);
      size_t start[257] = {0};
      for (size_t k = 0; k < n; k++) start[combining_class(run[k]) + 1]++;
      for (int c = 1; c <= 256; c++) start[c] += start[c - 1];
      for (size_t k = 0; k < n; k++) scratch[start[combining_class(run[k])]++] = run[k];
      memcpy(run, scratch, n * sizeof(*run));
    }
    i = end;
  }
  free(scratch);
  return OBC_OK;
}

/* The primary composite of (first, second), or 0. */
static uint32_t compose_pair(uint32_t first, uint32_t second) {
  if (first >= HANGUL_LBASE && first < HANGUL_LBASE + HANGUL_LCOUNT && second >= HANGUL_VBASE &&
      second < HANGUL_VBASE + HANGUL_VCOUNT)
    return HANGUL_SBASE +
           ((first - HANGUL_LBASE) * HANGUL_VCOUNT + (second - HANGUL_VBASE)) * HANGUL_TCOUNT;
  if (first >= HANGUL_SBASE && first < HANGUL_SBASE + HANGUL_SCOUNT &&
      (first - HANGUL_SBASE) % HANGUL_TCOUNT == 0 && second > HANGUL_TBASE &&
      second < HANGUL_TBASE + HANGUL_TCOUNT)
    return first + (second - HANGUL_TBASE);
  size_t lo = 0, hi = unicode_composition_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const uint32_t *e = unicode_compositions[mid];
    if (e[0] == first && e[1] == second) return e[2];
    if (e[0] < first || (e[0] == first && e[1] < second))
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

/* Canonical composition in place (UAX #15's algorithm): a character joins the
 * last starter when nothing between them blocks it (a starter, or a mark of
 * the same or a higher class). */
static void compose(UnicodeBuffer *b) {
  if (b->count == 0) return;
  size_t starter = 0, out = 1;
  unsigned last_class = combining_class(b->cps[0]) ? 256 : 0;
  for (size_t i = 1; i < b->count; i++) {
    uint32_t cp = b->cps[i];
    unsigned c = combining_class(cp);
    uint32_t composite = compose_pair(b->cps[starter], cp);
    if (composite && (last_class < c || last_class == 0)) {
      b->cps[starter] = composite;
      continue;
    }
    if (c == 0) starter = out;
    last_class = c;
    b->cps[out++] = cp;
  }
  b->count = out;
}

int unicode_normalize(UnicodeBuffer *buffer, UnicodeForm form) {
  int compat = form == UNICODE_NFKC || form == UNICODE_NFKD;
  UnicodeBuffer out = {0};
  int rc = OBC_OK;
  for (size_t i = 0; i < buffer->count && !rc; i++)
    rc = decompose_into(&out, buffer->cps[i], compat, 0);
  if (!rc) rc = canonical_order(&out);
  if (rc) {
    unicode_buffer_free(&out);
    return rc;
  }
  if (form == UNICODE_NFC || form == UNICODE_NFKC) compose(&out);
  unicode_buffer_free(buffer);
  *buffer = out;
  return OBC_OK;
}

int unicode_lowercase(UnicodeBuffer *buffer) {
  UnicodeBuffer out = {0};
  int rc = OBC_OK;
  for (size_t i = 0; i < buffer->count && !rc; i++) {
    uint32_t cp = buffer->cps[i];
    long k = cp >= 'A' ? find_sorted(unicode_lowercase_keys, unicode_lowercase_count, cp, 0) : -1;
    if (k < 0) {
      rc = buffer_push(&out, cp);
      continue;
    }
    uint32_t span = unicode_lowercase_spans[k];
    for (uint32_t j = 0; j < (span & 31) && !rc; j++)
      rc = buffer_push(&out, unicode_mapping_pool[(span >> 5) + j]);
  }
  if (rc) {
    unicode_buffer_free(&out);
    return rc;
  }
  unicode_buffer_free(buffer);
  *buffer = out;
  return OBC_OK;
}
