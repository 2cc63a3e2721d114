/* RULER's niah task (scripts/data/synthetic/niah.py): needles "One of the
 * special magic {numbers|uuids} for KEY is: VALUE." hidden in a haystack of
 * `size` units, and a question for the values of some of their keys.
 *
 * One spec per variant gives RULER's variables (synthetic.yaml); one
 * generator follows niah.py for all of them. Its draws come from one
 * niah_random stream seeded with seed XOR the FNV-1a 64 hash of the task
 * name (so variants differ at the same seed), in this order: the keys and
 * their values, the needles' order, the queried keys, then what depends on
 * `size` (needle positions, distractor needles). The needles and the
 * question are therefore the same at every size the length search tries.
 * Where obcache differs from RULER (docs/SCIENCE.md, "RULER's tasks"): the
 * essay haystack is prompts/ruler_sources.c's (the King James Bible by
 * default), counted in sentences; keys are niah_random_key's adjective-noun
 * pairs, distinct among the needles, and a distractor of the "needle"
 * haystack never takes a real needle's key; essay items are joined by
 * exactly one space. */
#include "prompts/ruler_niah.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/niah_random.h"
#include "common/obc_error.h"
#include "common/obc_hash.h"

typedef enum { HAYSTACK_NOISE, HAYSTACK_ESSAY, HAYSTACK_NEEDLE } HaystackKind;
typedef enum { DRAW_WORDS, DRAW_NUMBERS, DRAW_UUIDS } DrawKind;

typedef struct {
  const char *name;
  HaystackKind haystack; /* type_haystack */
  DrawKind key, value;   /* type_needle_k, type_needle_v */
  size_t num_k, num_v, num_q;
} NiahSpec;

static const NiahSpec spec_single_1 = {.name = "niah_single_1",
                                       .haystack = HAYSTACK_NOISE,
                                       .key = DRAW_WORDS,
                                       .value = DRAW_NUMBERS,
                                       .num_k = 1,
                                       .num_v = 1,
                                       .num_q = 1};
static const NiahSpec spec_single_2 = {.name = "niah_single_2",
                                       .haystack = HAYSTACK_ESSAY,
                                       .key = DRAW_WORDS,
                                       .value = DRAW_NUMBERS,
                                       .num_k = 1,
                                       .num_v = 1,
                                       .num_q = 1};
static const NiahSpec spec_single_3 = {.name = "niah_single_3",
                                       .haystack = HAYSTACK_ESSAY,
                                       .key = DRAW_WORDS,
                                       .value = DRAW_UUIDS,
                                       .num_k = 1,
                                       .num_v = 1,
                                       .num_q = 1};
static const NiahSpec spec_multikey_1 = {.name = "niah_multikey_1",
                                         .haystack = HAYSTACK_ESSAY,
                                         .key = DRAW_WORDS,
                                         .value = DRAW_NUMBERS,
                                         .num_k = 4,
                                         .num_v = 1,
                                         .num_q = 1};
static const NiahSpec spec_multikey_2 = {.name = "niah_multikey_2",
                                         .haystack = HAYSTACK_NEEDLE,
                                         .key = DRAW_WORDS,
                                         .value = DRAW_NUMBERS,
                                         .num_k = 1,
                                         .num_v = 1,
                                         .num_q = 1};
static const NiahSpec spec_multikey_3 = {.name = "niah_multikey_3",
                                         .haystack = HAYSTACK_NEEDLE,
                                         .key = DRAW_UUIDS,
                                         .value = DRAW_UUIDS,
                                         .num_k = 1,
                                         .num_v = 1,
                                         .num_q = 1};
static const NiahSpec spec_multivalue = {.name = "niah_multivalue",
                                         .haystack = HAYSTACK_ESSAY,
                                         .key = DRAW_WORDS,
                                         .value = DRAW_NUMBERS,
                                         .num_k = 1,
                                         .num_v = 4,
                                         .num_q = 1};
static const NiahSpec spec_multiquery = {.name = "niah_multiquery",
                                         .haystack = HAYSTACK_ESSAY,
                                         .key = DRAW_WORDS,
                                         .value = DRAW_NUMBERS,
                                         .num_k = 1,
                                         .num_v = 1,
                                         .num_q = 4};

/* RULER's template and answer prefix (scripts/data/synthetic/constants.py),
 * cut at {context}; the answer prefix without its leading space. */
static const char template_before[] =
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the {type_needle_v} afterwards.\n";
static const char template_after[] =
    "\nWhat are all the special magic {type_needle_v} for {query} mentioned in the provided "
    "text?";
static const char template_answer[] =
    "The special magic {type_needle_v} for {query} mentioned in the provided text are";

/* niah.py's singular rewrite (num_needle_q * num_needle_v == 1), applied in
 * this order to the template before formatting, as its str.replace calls. */
static const char *const singular_rewrite[][2] = {
    {"Some", "A"}, {"are all", "is"}, {"are", "is"}, {"answers", "answer"}};

#define DEPTH_COUNT 40
#define DRAW_SIZE 64 /* a key or value with its NUL: uuid 37, key < 40 */

typedef struct {
  size_t key; /* index into the keys */
  char value[DRAW_SIZE];
} Needle;

typedef struct {
  const NiahSpec *spec;
  const char *type; /* type_needle_v inside the needles: "numbers", "uuids" */
  NiahRandom random;
  char keys[NIAH_MAX_NEEDLES][DRAW_SIZE]; /* (n_keys) */
  size_t n_keys;                          /* max(num_k, num_q) */
  Needle needles[NIAH_MAX_NEEDLES];       /* (n_needles) in RULER's shuffled order */
  size_t n_needles;
  size_t queried[NIAH_MAX_NEEDLES]; /* (spec->num_q) key indices */
} Draws;

static void draw(NiahRandom *random, DrawKind kind, char *out) {
  if (kind == DRAW_WORDS)
    niah_random_key(random, out, DRAW_SIZE);
  else if (kind == DRAW_NUMBERS)
    niah_random_number(random, out, DRAW_SIZE);
  else
    niah_random_uuid(random, out, DRAW_SIZE);
}

static bool is_key(const Draws *d, const char *key) {
  for (size_t i = 0; i < d->n_keys; i++)
    if (!strcmp(d->keys[i], key)) return true;
  return false;
}

/* The keys (distinct), their values (distinct), the needles' order and the
 * queried keys: what does not depend on the haystack's size. */
static void draw_needles(const NiahSpec *spec, uint64_t seed, Draws *d) {
  memset(d, 0, sizeof *d);
  d->spec = spec;
  d->type = spec->value == DRAW_UUIDS ? "uuids" : "numbers";
  niah_random_seed(&d->random,
                   seed ^ obc_hash_bytes(OBC_HASH_SEED, spec->name, strlen(spec->name)));
  size_t n_keys = spec->num_k > spec->num_q ? spec->num_k : spec->num_q;
  assert(n_keys * spec->num_v <= NIAH_MAX_NEEDLES);
  for (size_t k = 0; k < n_keys; k++) {
    char key[DRAW_SIZE];
    do draw(&d->random, spec->key, key);
    while (is_key(d, key));
    memcpy(d->keys[d->n_keys++], key, DRAW_SIZE);
    for (size_t v = 0; v < spec->num_v; v++) {
      Needle *n = &d->needles[d->n_needles];
      bool fresh;
      do {
        draw(&d->random, spec->value, n->value);
        fresh = true;
        for (size_t i = 0; i < d->n_needles; i++)
          fresh &= strcmp(d->needles[i].value, n->value) != 0;
      } while (!fresh);
      n->key = k;
      d->n_needles++;
    }
  }
  for (size_t i = d->n_needles; i > 1; i--) { /* Fisher-Yates */
    size_t j = niah_random_below(&d->random, i);
    Needle t = d->needles[i - 1];
    d->needles[i - 1] = d->needles[j];
    d->needles[j] = t;
  }
  size_t order[NIAH_MAX_NEEDLES];
  for (size_t i = 0; i < n_keys; i++) order[i] = i;
  for (size_t i = 0; i < spec->num_q; i++) { /* a sample without replacement */
    size_t j = i + niah_random_below(&d->random, n_keys - i);
    size_t t = order[i];
    order[i] = order[j];
    order[j] = t;
    d->queried[i] = order[i];
  }
}

/* ---- text ----------------------------------------------------------------------- */

/* A copy of text with every `from` replaced by `to`; NULL when out of memory. */
static char *replace_all(const char *text, const char *from, const char *to) {
  char *out = NULL;
  size_t size = 0;
  FILE *fp = open_memstream(&out, &size);
  if (!fp) return NULL;
  size_t n = strlen(from);
  for (const char *p = text, *hit; *p; p = hit + n) {
    hit = strstr(p, from);
    if (!hit) {
      fputs(p, fp);
      break;
    }
    fwrite(p, 1, (size_t)(hit - p), fp);
    fputs(to, fp);
  }
  if (fclose(fp)) {
    free(out);
    return NULL;
  }
  return out;
}

/* RULER's template piece, rewritten to the singular when asked, formatted. */
static char *format_template(const char *template, bool singular, const char *type,
                             const char *query) {
  char *text = strdup(template);
  for (size_t i = 0; singular && text && i < sizeof singular_rewrite / sizeof *singular_rewrite;
       i++) {
    char *next = replace_all(text, singular_rewrite[i][0], singular_rewrite[i][1]);
    free(text);
    text = next;
  }
  char *typed = text ? replace_all(text, "{type_needle_v}", type) : NULL;
  char *out = typed ? replace_all(typed, "{query}", query) : NULL;
  free(text);
  free(typed);
  return out;
}

/* The context being written, and the marks of the real needles in it. */
typedef struct {
  FILE *fp;
  RulerText *text;
  Draws *draws;
  size_t n_items; /* essay: items written, joined by " " */
} Context;

static void put_needle_line(FILE *fp, const char *type, const char *key, const char *value) {
  fprintf(fp, "One of the special magic %s for %s is: %s.", type, key, value);
}

static void put_real_needle(Context *c, size_t j) {
  const Needle *n = &c->draws->needles[j];
  size_t m = c->text->n_marks / 2; /* needles already marked, in context order */
  long begin = ftell(c->fp);
  fprintf(c->fp, "One of the special magic %s for %s is: ", c->draws->type, c->draws->keys[n->key]);
  long value_begin = ftell(c->fp);
  fputs(n->value, c->fp);
  long value_end = ftell(c->fp);
  fputc('.', c->fp);
  long end = ftell(c->fp);
  RulerMark *needle = &c->text->marks[c->text->n_marks++];
  RulerMark *value = &c->text->marks[c->text->n_marks++];
  if (m == 0) {
    snprintf(needle->name, sizeof needle->name, "needle");
    snprintf(value->name, sizeof value->name, "needle_value");
  } else {
    snprintf(needle->name, sizeof needle->name, "needle_%zu", m + 1);
    snprintf(value->name, sizeof value->name, "needle_value_%zu", m + 1);
  }
  needle->begin = (size_t)begin;
  needle->end = (size_t)end;
  value->begin = (size_t)value_begin;
  value->end = (size_t)value_end;
}

/* noise and needle haystacks: `size` lines joined by "\n", the real needles
 * inserted before distinct line indices (the first needle before the
 * highest index, as niah.py's reverse-sorted inserts). */
static int put_lines(Context *c, size_t size) {
  Draws *d = c->draws;
  if (size < d->n_needles)
    return obc_fail(OBC_EINVAL, "%s: a haystack of %zu lines cannot hold %zu needles",
                    d->spec->name, size, d->n_needles);
  NiahRandom *random = &d->random;
  size_t at[NIAH_MAX_NEEDLES];
  for (size_t j = 0; j < d->n_needles; j++) {
    bool fresh;
    do {
      at[j] = niah_random_below(random, size);
      fresh = true;
      for (size_t i = 0; i < j; i++) fresh &= at[i] != at[j];
    } while (!fresh);
  }
  for (size_t j = 1; j < d->n_needles; j++) /* descending */
    for (size_t i = j; i > 0 && at[i - 1] < at[i]; i--) {
      size_t t = at[i];
      at[i] = at[i - 1];
      at[i - 1] = t;
    }
  for (size_t line = 0; line < size; line++) {
    for (size_t j = d->n_needles; j-- > 0;)
      if (at[j] == line) {
        put_real_needle(c, j);
        fputc('\n', c->fp);
      }
    if (d->spec->haystack == HAYSTACK_NOISE) {
      fputs(niah_haystack_noise_text, c->fp);
    } else {
      char key[DRAW_SIZE], value[DRAW_SIZE];
      do draw(random, d->spec->key, key);
      while (is_key(d, key));
      draw(random, d->spec->value, value);
      put_needle_line(c->fp, d->type, key, value);
    }
    if (line + 1 < size) fputc('\n', c->fp);
  }
  return OBC_OK;
}

static void put_item_space(Context *c) {
  if (c->n_items++) fputc(' ', c->fp);
}

/* essay: `size` sentences, the needles inserted at sentence positions
 * int(size * depth / 100) for depths drawn without replacement from RULER's
 * 40 (round(linspace(0, 100, 40))), in niah.py's double arithmetic. */
static int put_essay(Context *c, const NiahHaystack *essay, size_t size) {
  Draws *d = c->draws;
  NiahRandom *random = &d->random;
  int depths[DEPTH_COUNT];
  for (int i = 0; i < DEPTH_COUNT; i++) /* 100 i / 39 is never a half: floor(x + 1/2) */
    depths[i] = (200 * i + DEPTH_COUNT - 1) / (2 * (DEPTH_COUNT - 1));
  size_t at[NIAH_MAX_NEEDLES];
  for (size_t j = 0; j < d->n_needles; j++) {
    size_t k = j + niah_random_below(random, (size_t)DEPTH_COUNT - j);
    int t = depths[j];
    depths[j] = depths[k];
    depths[k] = t;
    at[j] = (size_t)((double)size * ((double)depths[j] / 100.0));
  }
  for (size_t j = 1; j < d->n_needles; j++) /* ascending */
    for (size_t i = j; i > 0 && at[i - 1] > at[i]; i--) {
      size_t t = at[i];
      at[i] = at[i - 1];
      at[i - 1] = t;
    }
  size_t sentence = 0;
  for (size_t j = 0; j <= d->n_needles; j++) {
    size_t until = j < d->n_needles ? at[j] : size;
    for (; sentence < until; sentence++) {
      size_t length;
      const char *text = niah_haystack_sentence(essay, sentence, &length);
      put_item_space(c);
      fwrite(text, 1, length, c->fp);
    }
    if (j < d->n_needles) {
      put_item_space(c);
      put_real_needle(c, j);
    }
  }
  return OBC_OK;
}

/* The query "a, b, and c" and the answers: every value of the queried keys. */
static void put_query(const Draws *d, RulerText *out, char *query, size_t size) {
  query[0] = '\0';
  size_t used = 0;
  for (size_t i = 0; i < d->spec->num_q; i++) {
    const char *sep = i == 0 ? "" : i + 1 < d->spec->num_q ? ", " : ", and ";
    used += (size_t)snprintf(query + used, size - used, "%s%s", sep, d->keys[d->queried[i]]);
    for (size_t j = 0; j < d->n_needles; j++)
      if (d->needles[j].key == d->queried[i] && out->n_answers < RULER_MAX_ANSWERS)
        snprintf(out->answers[out->n_answers++], sizeof out->answers[0], "%s", d->needles[j].value);
  }
}

static int generate(const NiahSpec *spec, const RulerSources *sources, uint64_t seed, size_t size,
                    RulerText *out) {
  memset(out, 0, sizeof *out);
  if (size < 1) return obc_fail(OBC_EINVAL, "%s: the haystack needs at least one unit", spec->name);
  Draws d;
  draw_needles(spec, seed, &d);
  char query[NIAH_MAX_NEEDLES * (DRAW_SIZE + 8)];
  put_query(&d, out, query, sizeof query);
  size_t context_size = 0;
  Context c = {.text = out, .draws = &d};
  c.fp = open_memstream(&out->context, &context_size);
  if (!c.fp) return obc_fail(OBC_ENOMEM, "%s: out of memory for the context", spec->name);
  int rc =
      spec->haystack == HAYSTACK_ESSAY ? put_essay(&c, &sources->essay, size) : put_lines(&c, size);
  if (fclose(c.fp) && !rc)
    rc = obc_fail(OBC_ENOMEM, "%s: out of memory for the context", spec->name);
  bool singular = spec->num_q * spec->num_v == 1;
  char type_singular[16];
  snprintf(type_singular, sizeof type_singular, "%.*s", (int)strlen(d.type) - 1, d.type);
  const char *type = singular ? type_singular : d.type;
  if (!rc) {
    out->before = format_template(template_before, singular, type, query);
    out->after = format_template(template_after, singular, type, query);
    out->answer_prefix = format_template(template_answer, singular, type, query);
    if (!out->before || !out->after || !out->answer_prefix)
      rc = obc_fail(OBC_ENOMEM, "%s: out of memory for the template", spec->name);
  }
  if (rc) ruler_text_free(out);
  return rc;
}

/* ---- the variants ---------------------------------------------------------------- */

/* The length selects nothing in RULER's niah. */
#define RULER_NIAH_VARIANT(fn, spec)                                                               \
  int fn(const RulerSources *sources, size_t length, uint64_t seed, size_t size, RulerText *out) { \
    (void)length;                                                                                  \
    return generate(&spec, sources, seed, size, out);                                              \
  }

RULER_NIAH_VARIANT(ruler_niah_single_1, spec_single_1)
RULER_NIAH_VARIANT(ruler_niah_single_2, spec_single_2)
RULER_NIAH_VARIANT(ruler_niah_single_3, spec_single_3)
RULER_NIAH_VARIANT(ruler_niah_multikey_1, spec_multikey_1)
RULER_NIAH_VARIANT(ruler_niah_multikey_2, spec_multikey_2)
RULER_NIAH_VARIANT(ruler_niah_multikey_3, spec_multikey_3)
RULER_NIAH_VARIANT(ruler_niah_multivalue, spec_multivalue)
RULER_NIAH_VARIANT(ruler_niah_multiquery, spec_multiquery)
