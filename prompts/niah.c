/* Builds a Needle-in-a-Haystack prompt of a target length in tokens.
 *
 * The user turn is: instruction "\n", context "\n", question. The context is a
 * run of haystack units (whole sentences, then the words of one last partial
 * sentence) with the needles inserted before sentence starts nearest to their
 * depths. Every unit but the first is tokenized with its leading space, the
 * last with its trailing newline, so concatenating the pieces gives the ids of
 * the whole text. The haystack is first filled by cached per-sentence token
 * counts, then trimmed or extended word by word until the assembled prompt has
 * the target length (or the closest length below it). */
#include "prompts/niah.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/niah_haystack.h"
#include "prompts/chat_turn.h"
#include "prompts/niah_task.h"
#include "common/obc_error.h"
#include "common/obc_match.h"

/* ---- growable buffers --------------------------------------------------------- */

typedef struct {
  int32_t *ids; /* (n) */
  size_t n;
  size_t capacity;
} IdBuffer;

typedef struct {
  char *text; /* NUL-terminated, (n + 1) bytes used */
  size_t n;
  size_t capacity;
} TextBuffer;

static int ids_append(IdBuffer *b, const int32_t *ids, size_t n) {
  if (b->n + n > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 1024;
    while (capacity < b->n + n) capacity *= 2;
    int32_t *grown = realloc(b->ids, capacity * sizeof *grown);
    if (!grown) return obc_fail(OBC_ENOMEM, "niah: out of memory for %zu token ids", capacity);
    b->ids = grown;
    b->capacity = capacity;
  }
  if (n) memcpy(b->ids + b->n, ids, n * sizeof *ids);
  b->n += n;
  return OBC_OK;
}

static int text_append(TextBuffer *b, const char *text, size_t n) {
  if (b->n + n + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < b->n + n + 1) capacity *= 2;
    char *grown = realloc(b->text, capacity);
    if (!grown)
      return obc_fail(OBC_ENOMEM, "niah: out of memory for %zu bytes of prompt", capacity);
    b->text = grown;
    b->capacity = capacity;
  }
  memcpy(b->text + b->n, text, n);
  b->n += n;
  b->text[b->n] = '\0';
  return OBC_OK;
}

/* ---- the parts of a prompt -------------------------------------------------- */

/* A haystack unit: a whole sentence, or one word of the last partial one. */
typedef struct {
  const char *text;
  size_t length;
  size_t tokens;       /* with its leading space */
  bool sentence_start; /* a needle may be inserted before it */
} Unit;

typedef struct {
  const Tokenizer *tokenizer;
  const NiahOptions *options;
  NiahHaystack haystack;
  NiahTask task;           /* needles, instruction, question, answer prefix */
  ChatTurn turn;           /* the chat template around the user text, or BOS */
  size_t *sentence_tokens; /* (n_sentence_tokens) cache: tokens of " sentence",
                              by index in the haystack (0 = not yet counted) */
  size_t n_sentence_tokens;
  /* The haystack: `full` whole sentences of the stream, then `words` words
   * of the next one. */
  size_t full;
  size_t words;
} Builder;

/* Tokenizes (space ? " " : "") + text[0, length) + suffix and appends the
 * ids and the text. */
static int encode_piece(const Builder *b, bool space, const char *text, size_t length,
                        const char *suffix, IdBuffer *ids, TextBuffer *out_text) {
  size_t suffix_length = suffix ? strlen(suffix) : 0;
  size_t total = (space ? 1 : 0) + length + suffix_length;
  char *buf = obc_malloc(total + 1, "niah segment");
  if (!buf) return OBC_ENOMEM;
  size_t n = 0;
  if (space) buf[n++] = ' ';
  memcpy(buf + n, text, length);
  n += length;
  if (suffix_length) memcpy(buf + n, suffix, suffix_length);
  n += suffix_length;
  buf[n] = '\0';
  int32_t *piece = NULL;
  size_t n_piece = 0;
  int rc = tokenizer_encode(b->tokenizer, buf, n, &piece, &n_piece);
  if (!rc && ids) rc = ids_append(ids, piece, n_piece);
  if (!rc && out_text) rc = text_append(out_text, buf, n);
  free(piece);
  free(buf);
  return rc;
}

static int count_tokens(const Builder *b, const char *text, size_t length, size_t *count) {
  IdBuffer ids = {0};
  int rc = encode_piece(b, true, text, length, NULL, &ids, NULL);
  *count = ids.n;
  free(ids.ids);
  return rc;
}

/* ---- the haystack ------------------------------------------------------------- */

static int sentence_tokens(Builder *b, size_t i, size_t *count) {
  i %= b->haystack.n_sentences; /* the stream repeats */
  if (i >= b->n_sentence_tokens) {
    size_t capacity = b->n_sentence_tokens ? b->n_sentence_tokens : 256;
    while (capacity <= i) capacity *= 2;
    size_t *grown = realloc(b->sentence_tokens, capacity * sizeof *grown);
    if (!grown) return obc_fail(OBC_ENOMEM, "niah: out of memory for the haystack");
    for (size_t k = b->n_sentence_tokens; k < capacity; k++) grown[k] = 0;
    b->sentence_tokens = grown;
    b->n_sentence_tokens = capacity;
  }
  if (!b->sentence_tokens[i]) {
    size_t length;
    const char *text = niah_haystack_sentence(&b->haystack, i, &length);
    int rc = count_tokens(b, text, length, &b->sentence_tokens[i]);
    if (rc) return rc;
  }
  *count = b->sentence_tokens[i];
  return OBC_OK;
}

static size_t word_count(const char *text, size_t length) {
  size_t n = 1;
  for (size_t i = 0; i < length; i++) n += text[i] == ' ';
  return n;
}

/* The units of the current haystack (full sentences, then words); *units is
 * malloc'ed. */
static int haystack_units(Builder *b, Unit **units, size_t *n_units) {
  size_t n = b->full + b->words;
  Unit *u = obc_calloc(n ? n : 1, sizeof *u, "haystack units");
  if (!u) return OBC_ENOMEM;
  int rc = OBC_OK;
  for (size_t i = 0; !rc && i < b->full; i++) {
    u[i].text = niah_haystack_sentence(&b->haystack, i, &u[i].length);
    u[i].sentence_start = true;
    rc = sentence_tokens(b, i, &u[i].tokens);
  }
  if (!rc && b->words) {
    size_t length;
    const char *p = niah_haystack_sentence(&b->haystack, b->full, &length);
    const char *end = p + length;
    for (size_t w = 0; !rc && w < b->words; w++) {
      const char *space = memchr(p, ' ', (size_t)(end - p));
      size_t word_length = space ? (size_t)(space - p) : (size_t)(end - p);
      Unit *unit = &u[b->full + w];
      unit->text = p;
      unit->length = word_length;
      unit->sentence_start = w == 0;
      rc = count_tokens(b, p, word_length, &unit->tokens);
      p += word_length + 1;
    }
  }
  if (rc) {
    free(u);
    return rc;
  }
  *units = u;
  *n_units = n;
  return OBC_OK;
}

/* Before which unit each needle goes: the sentence start whose token offset is
 * nearest to its depth (ties: the earlier one). Needle j's depth is spread
 * from the first needle's depth toward 100%. */
static void place_needles(const Builder *b, const Unit *units, size_t n_units, size_t *before) {
  size_t total = 0;
  for (size_t i = 0; i < n_units; i++) total += units[i].tokens;
  double depth0 = b->options->depth;
  for (size_t j = 0; j < b->task.n_needles; j++) {
    double depth = depth0 + (100.0 - depth0) * (double)j / (double)b->task.n_needles;
    double target = depth / 100.0 * (double)total;
    size_t best = 0, offset = 0;
    double best_distance = target;
    for (size_t i = 0; i <= n_units; i++) {
      if (i == n_units || units[i].sentence_start) {
        double distance =
            target > (double)offset ? target - (double)offset : (double)offset - target;
        if (distance < best_distance) {
          best_distance = distance;
          best = i;
        }
      }
      if (i < n_units) offset += units[i].tokens;
    }
    before[j] = best;
  }
}

/* ---- assembly ------------------------------------------------------------------ */

static int add_span(NiahPrompt *p, const char *name, size_t index, size_t begin, size_t end) {
  if (p->n_spans >= OBC_TRACE_MAX_SPANS)
    return obc_fail(OBC_EINVAL, "niah: more than %d spans", OBC_TRACE_MAX_SPANS);
  TraceSpan *s = &p->spans[p->n_spans++];
  if (index == 0)
    snprintf(s->name, sizeof s->name, "%s", name);
  else
    snprintf(s->name, sizeof s->name, "%s_%zu", name, index + 1);
  s->begin = (int64_t)begin;
  s->end = (int64_t)end;
  return OBC_OK;
}

static int assemble_needle(const Builder *b, size_t j, bool first, bool last, IdBuffer *ids,
                           TextBuffer *text, NiahPrompt *p) {
  const NiahNeedle *n = &b->task.needles[j];
  size_t begin = ids->n;
  bool has_before = n->before[0] != '\0', has_after = n->after[0] != '\0';
  int rc = OBC_OK;
  if (has_before) rc = encode_piece(b, !first, n->before, strlen(n->before), NULL, ids, text);
  size_t value_begin = ids->n;
  bool value_space = has_before ? n->value_spaced : !first;
  if (!rc)
    rc = encode_piece(b, value_space, n->value, strlen(n->value), last && !has_after ? "\n" : NULL,
                      ids, text);
  size_t value_end = ids->n;
  if (!rc && has_after)
    rc = encode_piece(b, false, n->after, strlen(n->after), last ? "\n" : NULL, ids, text);
  if (!rc) rc = add_span(p, "needle", j, begin, ids->n);
  if (!rc) rc = add_span(p, "needle_value", j, value_begin, value_end);
  return rc;
}

/* The user text (instruction, context, question) with spans relative to it. */
static int assemble_user(Builder *b, IdBuffer *ids, TextBuffer *text, NiahPrompt *p) {
  Unit *units = NULL;
  size_t n_units = 0;
  int rc = haystack_units(b, &units, &n_units);
  if (rc) return rc;
  size_t before[NIAH_MAX_NEEDLES];
  place_needles(b, units, n_units, before);
  ids->n = 0;
  text->n = 0;
  p->n_spans = 0;
  if (b->task.instruction[0])
    rc = encode_piece(b, false, b->task.instruction, strlen(b->task.instruction), NULL, ids, text);
  size_t context_begin = ids->n;
  size_t n_items = n_units + b->task.n_needles, item = 0;
  for (size_t i = 0; !rc && i <= n_units; i++) {
    for (size_t j = 0; !rc && j < b->task.n_needles; j++) {
      if (before[j] != i) continue;
      rc = assemble_needle(b, j, item == 0, item + 1 == n_items, ids, text, p);
      item++;
    }
    if (rc || i == n_units) continue;
    rc = encode_piece(b, item > 0, units[i].text, units[i].length,
                      item + 1 == n_items ? "\n" : NULL, ids, text);
    item++;
  }
  if (!rc) rc = add_span(p, "context", 0, context_begin, ids->n);
  size_t question_begin = ids->n;
  if (!rc)
    rc = encode_piece(b, false, b->task.question, strlen(b->task.question),
                      b->turn.chat ? NULL : "\n", ids, text);
  if (!rc) rc = add_span(p, "question", 0, question_begin, ids->n);
  free(units);
  return rc;
}

/* Tokens of the whole prompt for the current haystack, and the user text. */
static int assemble_prompt(Builder *b, NiahPrompt *p, IdBuffer *user, TextBuffer *user_text,
                           IdBuffer *prompt) {
  int rc = assemble_user(b, user, user_text, p);
  if (rc) return rc;
  prompt->n = 0;
  size_t offset = b->turn.n_head;
  rc = ids_append(prompt, b->turn.head, b->turn.n_head);
  if (!rc) rc = ids_append(prompt, user->ids, user->n);
  if (!rc) rc = ids_append(prompt, b->turn.tail, b->turn.n_tail);
  for (size_t i = 0; i < p->n_spans; i++) {
    p->spans[i].begin += (int64_t)offset;
    p->spans[i].end += (int64_t)offset;
  }
  size_t answer_begin = prompt->n;
  if (!rc && b->task.answer_prefix[0])
    rc = encode_piece(b, false, b->task.answer_prefix, strlen(b->task.answer_prefix), NULL, prompt,
                      NULL);
  if (!rc && b->task.answer_prefix[0])
    rc = add_span(p, "answer_prefix", 0, answer_begin, prompt->n);
  return rc;
}

/* ---- the length search -------------------------------------------------------- */

static int grow_words(Builder *b) {
  size_t length;
  const char *text = niah_haystack_sentence(&b->haystack, b->full, &length);
  if (++b->words == word_count(text, length)) {
    b->full++;
    b->words = 0;
  }
  return OBC_OK;
}

static void shrink_word(Builder *b) {
  if (b->words) {
    b->words--;
    return;
  }
  assert(b->full > 0);
  b->full--;
  size_t length;
  const char *text = niah_haystack_sentence(&b->haystack, b->full, &length);
  b->words = word_count(text, length) - 1;
}

/* Fills the haystack by cached counts up to budget tokens. */
static int fill_haystack(Builder *b, size_t budget) {
  size_t used = 0;
  b->full = b->words = 0;
  for (;;) {
    size_t t;
    int rc = sentence_tokens(b, b->full, &t);
    if (rc) return rc;
    if (used + t > budget) break;
    used += t;
    b->full++;
  }
  size_t length;
  const char *p = niah_haystack_sentence(&b->haystack, b->full, &length);
  const char *end = p + length;
  while (p < end) {
    const char *space = memchr(p, ' ', (size_t)(end - p));
    size_t word_length = space ? (size_t)(space - p) : (size_t)(end - p);
    size_t t;
    int rc = count_tokens(b, p, word_length, &t);
    if (rc) return rc;
    if (used + t > budget || !space) break;
    used += t;
    b->words++;
    p += word_length + 1;
  }
  return OBC_OK;
}

static int build(Builder *b, NiahPrompt *out) {
  const NiahOptions *o = b->options;
  IdBuffer user = {0}, prompt = {0};
  TextBuffer user_text = {0};
  int rc = chat_turn_open(b->tokenizer, o->no_chat_template, &b->turn);
  /* With no haystack: what the needles, question and template take. */
  b->full = b->words = 0;
  if (!rc) rc = assemble_prompt(b, out, &user, &user_text, &prompt);
  if (!rc && prompt.n > o->length)
    rc = obc_fail(OBC_EINVAL,
                  "niah: the needles, question and template take %zu tokens, more "
                  "than --length %zu",
                  prompt.n, o->length);
  if (!rc) rc = fill_haystack(b, o->length - prompt.n);
  /* Trim or extend word by word; stop below the target if a word overshoots. */
  bool shrunk = false;
  for (size_t iteration = 0; !rc && iteration < 4096; iteration++) {
    rc = assemble_prompt(b, out, &user, &user_text, &prompt);
    if (rc || prompt.n == o->length) break;
    if (prompt.n > o->length) {
      if (!b->full && !b->words) break; /* cannot happen: checked above */
      shrink_word(b);
      shrunk = true;
    } else {
      if (shrunk) break;
      rc = grow_words(b);
    }
  }
  size_t answer_tokens = 0;
  const TraceSpan *answer = NULL;
  for (size_t i = 0; i < out->n_spans; i++)
    if (!strcmp(out->spans[i].name, "answer_prefix")) answer = &out->spans[i];
  if (answer) answer_tokens = (size_t)(answer->end - answer->begin);
  if (!rc)
    rc = chat_turn_consistent(b->tokenizer, &b->turn, user_text.text, user_text.n, prompt.ids,
                              prompt.n - answer_tokens, &out->boundary_consistent);
  if (!rc) rc = tokenizer_decode(b->tokenizer, prompt.ids, prompt.n, &out->text);
  if (!rc) {
    out->tokens = prompt.ids;
    out->n_tokens = prompt.n;
    prompt.ids = NULL;
  }
  free(prompt.ids);
  free(user.ids);
  free(user_text.text);
  return rc;
}

/* ---- public ------------------------------------------------------------------- */

void niah_options_default(NiahOptions *options) {
  memset(options, 0, sizeof *options);
  options->length = 1024;
  options->depth = 50.0;
  options->seed = 1;
  options->haystack = "kjv";
  options->n_needles = 1;
}

int niah_build(const Tokenizer *tokenizer, const NiahOptions *options, NiahPrompt *out) {
  assert(tokenizer && options && out);
  memset(out, 0, sizeof *out);
  if (!(options->depth >= 0.0 && options->depth <= 100.0))
    return obc_fail(OBC_EINVAL, "niah: --depth %g is outside 0..100 (a percentage of the context)",
                    options->depth);
  if (options->n_needles < 1 || options->n_needles > NIAH_MAX_NEEDLES)
    return obc_fail(OBC_EINVAL, "niah: --needles %zu is outside 1..%d", options->n_needles,
                    NIAH_MAX_NEEDLES);
  Builder *b = obc_calloc(1, sizeof *b, "niah builder");
  if (!b) return OBC_ENOMEM;
  b->tokenizer = tokenizer;
  b->options = options;
  bool custom = options->needle_text || options->question_text || options->answer_text;
  int rc = niah_task_make(options, &b->task);
  if (!rc) rc = niah_haystack_open(options->haystack ? options->haystack : "kjv", &b->haystack);
  if (!rc) rc = build(b, out);
  if (!rc) {
    bool all_values = custom || options->multi_value;
    out->n_answers = all_values ? b->task.n_needles : 1;
    for (size_t j = 0; j < out->n_answers; j++)
      snprintf(out->answers[j], sizeof out->answers[j], "%s", b->task.needles[j].value);
    snprintf(out->question, sizeof out->question, "%s", b->task.question);
    snprintf(out->haystack_source, sizeof out->haystack_source, "%s", b->haystack.source);
  }
  if (rc) niah_prompt_free(out);
  niah_haystack_close(&b->haystack);
  free(b->sentence_tokens);
  chat_turn_close(&b->turn);
  free(b);
  return rc;
}

void niah_prompt_free(NiahPrompt *prompt) {
  if (!prompt) return;
  free(prompt->tokens);
  free(prompt->text);
  memset(prompt, 0, sizeof *prompt);
}

int niah_answer_found(const NiahPrompt *prompt, const char *text) {
  const char *values[NIAH_MAX_NEEDLES];
  for (size_t j = 0; j < prompt->n_answers; j++) values[j] = prompt->answers[j];
  return obc_match_needle(text, values, prompt->n_answers) == 1;
}
