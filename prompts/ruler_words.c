/* RULER's aggregation tasks, cwe and fwe (common_words_extraction.py and
 * freq_words_extraction.py), and what the three generators of
 * prompts/ruler_words.h share: the seeded stream and the text buffers. The
 * texts are written to open_memstream buffers, so a context of any size is
 * one stream of fprintf calls. */
#include "prompts/ruler_words.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_hash.h"

/* ==== Shared by the generators ==== */

void ruler_words_seed(NiahRandom *random, const char *task, uint64_t seed) {
  uint8_t bytes[8];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(seed >> (8 * i));
  uint64_t h = obc_hash_bytes(OBC_HASH_SEED, task, strlen(task));
  niah_random_seed(random, obc_hash_bytes(h, bytes, sizeof bytes));
}

int ruler_words_text_open(RulerWordsText *text) {
  text->data = NULL;
  text->size = 0;
  text->stream = open_memstream(&text->data, &text->size);
  return text->stream ? OBC_OK : obc_fail(OBC_ENOMEM, "out of memory for a RULER text");
}

int ruler_words_text_close(RulerWordsText *text, char **out) {
  int failed = ferror(text->stream);
  if (fclose(text->stream)) failed = 1;
  text->stream = NULL;
  if (failed || !text->data) {
    free(text->data);
    text->data = NULL;
    return obc_fail(OBC_ENOMEM, "out of memory for a RULER text");
  }
  *out = text->data;
  text->data = NULL;
  return OBC_OK;
}

int ruler_words_format(char **out, const char *format, ...) {
  RulerWordsText text;
  int rc = ruler_words_text_open(&text);
  if (rc) return rc;
  va_list args;
  va_start(args, format);
  vfprintf(text.stream, format, args);
  va_end(args);
  return ruler_words_text_close(&text, out);
}

/* Shuffles items (n) in place: Fisher-Yates from the last item down. */
static void shuffle_indices(NiahRandom *random, size_t *items, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = niah_random_below(random, i);
    size_t t = items[i - 1];
    items[i - 1] = items[j];
    items[j] = t;
  }
}

/* ==== cwe: common words extraction ==== */

#define CWE_HEAD                                                                    \
  "Below is a numbered list of words. In these words, some appear more often than " \
  "others. Memorize the ones that appear most often.\n"
#define CWE_QUESTION "\nQuestion: What are the 10 most common words in the above list?"
#define CWE_ANSWER_PREFIX "Answer: The top 10 words that appear most often in the list are:"

/* RULER's repeat counts: the task's (common, uncommon) and the few-shot
 * example's distinct words and repeats, by target length. */
typedef struct {
  size_t common_repeats, uncommon_repeats;
  size_t example_words, example_common_repeats, example_uncommon_repeats;
} CweShape;

static CweShape cwe_shape(size_t length) {
  if (length < RULER_CWE_SHORT_LENGTH) return (CweShape){6, 1, 20, 3, 1};
  return (CweShape){30, 3, 40, 10, 3};
}

/* RULER's get_example: n_distinct words of the list drawn without
 * replacement (the first RULER_CWE_COMMON of them the common ones, into
 * common), each repeated, the whole shuffled and numbered "1. w 2. w ...".
 * pool (n_words) is scratch. */
static void cwe_write_list(FILE *f, NiahRandom *random, const RulerSources *sources, size_t *pool,
                           size_t n_distinct, size_t common_repeats, size_t uncommon_repeats,
                           size_t *items, const char **common) {
  for (size_t i = 0; i < sources->n_words; i++) pool[i] = i;
  for (size_t i = 0; i < n_distinct; i++) { /* partial Fisher-Yates */
    size_t j = i + niah_random_below(random, sources->n_words - i);
    size_t t = pool[i];
    pool[i] = pool[j];
    pool[j] = t;
  }
  size_t n = 0;
  for (size_t r = 0; r < common_repeats; r++)
    for (size_t i = 0; i < RULER_CWE_COMMON; i++) items[n++] = pool[i];
  for (size_t r = 0; r < uncommon_repeats; r++)
    for (size_t i = RULER_CWE_COMMON; i < n_distinct; i++) items[n++] = pool[i];
  shuffle_indices(random, items, n);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%zu. %s", i ? " " : "", i + 1, sources->words[items[i]]);
  for (size_t i = 0; i < RULER_CWE_COMMON; i++) common[i] = sources->words[pool[i]];
}

int ruler_cwe_text(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                   RulerText *out) {
  memset(out, 0, sizeof *out);
  CweShape shape = cwe_shape(length);
  if (size < RULER_CWE_COMMON || size > sources->n_words || shape.example_words > sources->n_words)
    return obc_fail(OBC_EINVAL, "cwe: %zu distinct words asked, %d to %zu (the word list) possible",
                    size, RULER_CWE_COMMON, sources->n_words);
  size_t n_items =
      RULER_CWE_COMMON * shape.common_repeats + (size - RULER_CWE_COMMON) * shape.uncommon_repeats;
  size_t n_example = RULER_CWE_COMMON * shape.example_common_repeats +
                     (shape.example_words - RULER_CWE_COMMON) * shape.example_uncommon_repeats;
  size_t *pool = obc_malloc(sources->n_words * sizeof *pool, "cwe word pool");
  size_t *items =
      obc_malloc((n_items > n_example ? n_items : n_example) * sizeof *items, "cwe word list");
  int rc = pool && items ? OBC_OK : OBC_ENOMEM;
  NiahRandom random;
  ruler_words_seed(&random, "cwe", seed);
  const char *common[RULER_CWE_COMMON];
  RulerWordsText before, context;
  if (!rc) rc = ruler_words_text_open(&before);
  if (!rc) {
    /* The few-shot example: the template with its answer, then "\n". */
    fputs(CWE_HEAD, before.stream);
    cwe_write_list(before.stream, &random, sources, pool, shape.example_words,
                   shape.example_common_repeats, shape.example_uncommon_repeats, items, common);
    fputs(CWE_QUESTION " " CWE_ANSWER_PREFIX " ", before.stream);
    for (size_t i = 0; i < RULER_CWE_COMMON; i++)
      fprintf(before.stream, "%s%zu. %s", i ? " " : "", i + 1, common[i]);
    fputs("\n" CWE_HEAD, before.stream);
    rc = ruler_words_text_close(&before, &out->before);
  }
  if (!rc) rc = ruler_words_text_open(&context);
  if (!rc) {
    cwe_write_list(context.stream, &random, sources, pool, size, shape.common_repeats,
                   shape.uncommon_repeats, items, common);
    rc = ruler_words_text_close(&context, &out->context);
  }
  if (!rc) rc = ruler_words_format(&out->after, "%s", CWE_QUESTION);
  if (!rc) rc = ruler_words_format(&out->answer_prefix, "%s", CWE_ANSWER_PREFIX);
  for (size_t i = 0; !rc && i < RULER_CWE_COMMON; i++)
    snprintf(out->answers[out->n_answers++], sizeof out->answers[0], "%s", common[i]);
  free(pool);
  free(items);
  if (rc) ruler_text_free(out);
  return rc;
}

/* ==== fwe: frequent words extraction ==== */

#define FWE_HEAD                                                                        \
  "Read the following coded text and track the frequency of each coded word. Find the " \
  "three most frequently appeared coded words. "
#define FWE_QUESTION                                                                     \
  "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are " \
  "the three most frequently appeared words in the above coded text?"
#define FWE_ANSWER_PREFIX \
  "Answer: According to the coded text above, the three most frequently appeared words are:"
#define FWE_NOISE "..." /* the top-ranked word */
#define FWE_ALPHA 2.0
#define FWE_ZETA_ALPHA (M_PI * M_PI / 6.0) /* zeta(2) */

/* A code as its base-26 number (6 letters < 26^6 < 2^32). */
static uint32_t fwe_draw_code(NiahRandom *random) {
  uint32_t code = 0;
  for (int i = 0; i < RULER_FWE_CODE_LETTERS; i++)
    code = code * 26 + (uint32_t)niah_random_below(random, 26);
  return code;
}

static void fwe_code_text(uint32_t code, char *out) {
  for (int i = RULER_FWE_CODE_LETTERS - 1; i >= 0; i--) {
    out[i] = (char)('a' + code % 26);
    code /= 26;
  }
  out[RULER_FWE_CODE_LETTERS] = '\0';
}

/* RULER's vocabulary: n distinct random codes, in the order drawn. A hash
 * set (open addressing, n_slots a power of two over 2n) finds repeats. */
static int fwe_draw_vocabulary(NiahRandom *random, size_t n, uint32_t *vocab) {
  size_t n_slots = 16;
  while (n_slots < 2 * n) n_slots *= 2;
  uint32_t *slots = obc_malloc(n_slots * sizeof *slots, "fwe vocabulary");
  if (!slots) return OBC_ENOMEM;
  const uint32_t empty = UINT32_MAX; /* never a code */
  for (size_t i = 0; i < n_slots; i++) slots[i] = empty;
  for (size_t k = 0; k < n;) {
    uint32_t code = fwe_draw_code(random);
    size_t s = (code * 2654435761u) & (n_slots - 1);
    while (slots[s] != empty && slots[s] != code) s = (s + 1) & (n_slots - 1);
    if (slots[s] == code) continue;
    slots[s] = code;
    vocab[k++] = code;
  }
  free(slots);
  return OBC_OK;
}

/* RULER's count of the word of rank k (1-based) among `size`:
 * int(size * k^-alpha / zeta(alpha)), in RULER's order of operations. */
static size_t fwe_count(size_t size, size_t k) {
  return (size_t)((double)size * pow((double)k, -FWE_ALPHA) / FWE_ZETA_ALPHA);
}

int ruler_fwe_text(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                   RulerText *out) {
  (void)sources;
  memset(out, 0, sizeof *out);
  size_t n_vocab = length > RULER_FWE_TOKENS_TO_GENERATE
                       ? (length - RULER_FWE_TOKENS_TO_GENERATE) / RULER_FWE_TOKENS_PER_CODE
                       : 0;
  if (n_vocab < RULER_FWE_ANSWERS + 1)
    return obc_fail(OBC_EINVAL, "fwe: %zu tokens give %zu coded words, at least %d needed", length,
                    n_vocab, RULER_FWE_ANSWERS + 1);
  if (n_vocab > RULER_FWE_MAX_CODES)
    return obc_fail(OBC_EINVAL, "fwe: %zu tokens give %zu coded words, at most %d possible", length,
                    n_vocab, RULER_FWE_MAX_CODES);
  if (fwe_count(size, RULER_FWE_ANSWERS + 1) == 0)
    return obc_fail(OBC_EINVAL, "fwe: %zu words leave the answer of rank %d out", size,
                    RULER_FWE_ANSWERS + 1);
  uint32_t *vocab = obc_malloc(n_vocab * sizeof *vocab, "fwe vocabulary");
  size_t n_items = 0;
  for (size_t k = 1; k <= n_vocab; k++) n_items += fwe_count(size, k);
  size_t *items = obc_malloc(n_items * sizeof *items, "fwe words");
  int rc = vocab && items ? OBC_OK : OBC_ENOMEM;
  NiahRandom random;
  ruler_words_seed(&random, "fwe", seed);
  if (!rc) rc = fwe_draw_vocabulary(&random, n_vocab, vocab);
  if (!rc) {
    size_t n = 0;
    for (size_t k = 1; k <= n_vocab; k++)
      for (size_t c = fwe_count(size, k); c > 0; c--) items[n++] = k - 1;
    shuffle_indices(&random, items, n_items);
  }
  RulerWordsText context;
  if (!rc) rc = ruler_words_text_open(&context);
  if (!rc) {
    char code[RULER_FWE_CODE_LETTERS + 1];
    for (size_t i = 0; i < n_items; i++) {
      if (items[i] == 0)
        snprintf(code, sizeof code, "%s", FWE_NOISE);
      else
        fwe_code_text(vocab[items[i]], code);
      fprintf(context.stream, "%s%s", i ? " " : "", code);
    }
    rc = ruler_words_text_close(&context, &out->context);
  }
  if (!rc) rc = ruler_words_format(&out->before, "%s", FWE_HEAD);
  if (!rc) rc = ruler_words_format(&out->after, "%s", FWE_QUESTION);
  if (!rc) rc = ruler_words_format(&out->answer_prefix, "%s", FWE_ANSWER_PREFIX);
  for (size_t k = 1; !rc && k <= RULER_FWE_ANSWERS; k++)
    fwe_code_text(vocab[k], out->answers[out->n_answers++]);
  free(vocab);
  free(items);
  if (rc) ruler_text_free(out);
  return rc;
}
