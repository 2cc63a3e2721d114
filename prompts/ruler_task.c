/* RULER's task table and the frame around every task's text: the length
 * search, the chat template and the token spans.
 *
 * The search follows RULER's rule (scripts/data/synthetic/niah.py): the
 * largest haystack size for which tokens(prompt) + tokens_to_generate <=
 * length, the prompt including the chat template. Each trial generates the
 * text afresh from (seed, size). Sizes double from 1 until one does not fit,
 * then bisection keeps "size fits, size + 1 does not", so the result is
 * maximal against its neighbour even where token counts are not monotonic.
 * fwe follows its own generator's rule (freq_words_extraction.py): sizes in
 * steps of 1/32 of the budget, grown once per run on the run's sample and
 * stepped down per sample (search_steps).
 *
 * The user text is tokenized in pieces cut only where the byte-level BPE
 * pre-tokenizers never merge across (after a newline followed by a
 * non-space, before a space followed by a non-space, after a needle's
 * value, which punctuation follows), and the ids are the concatenation, so
 * every span is exact; boundary_consistent reports whether the whole text
 * tokenized at once gives the same ids (prompts/niah.h). */
#include "prompts/ruler_task.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/chat_turn.h"
#include "prompts/ruler_niah.h"
#include "prompts/ruler_words.h"
#include "common/obc_error.h"

#define NIAH_TOKENS 128 /* RULER's tokens_to_generate for niah */

static const RulerTask tasks[] = {
    {.name = "niah_single_1",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "noise",
     .generate = ruler_niah_single_1},
    {.name = "niah_single_2",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "essay",
     .generate = ruler_niah_single_2},
    {.name = "niah_single_3",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "essay",
     .generate = ruler_niah_single_3},
    {.name = "niah_multikey_1",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "essay",
     .generate = ruler_niah_multikey_1},
    {.name = "niah_multikey_2",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "needle",
     .generate = ruler_niah_multikey_2},
    {.name = "niah_multikey_3",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "needle",
     .generate = ruler_niah_multikey_3},
    {.name = "niah_multivalue",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "essay",
     .generate = ruler_niah_multivalue},
    {.name = "niah_multiquery",
     .ruler_task = "niah",
     .tokens_to_generate = NIAH_TOKENS,
     .haystack = "essay",
     .generate = ruler_niah_multiquery},
    {.name = "vt",
     .ruler_task = "variable_tracking",
     .tokens_to_generate = 30,
     .haystack = "noise",
     .min_size = RULER_VT_VARIABLES,
     .generate = ruler_vt_text},
    {.name = "cwe",
     .ruler_task = "common_words_extraction",
     .tokens_to_generate = 120,
     .min_size = RULER_CWE_COMMON,
     .generate = ruler_cwe_text},
    {.name = "fwe",
     .ruler_task = "freq_words_extraction",
     .tokens_to_generate = RULER_FWE_TOKENS_TO_GENERATE,
     .min_size = RULER_FWE_MIN_WORDS,
     .fit_in_steps = true,
     .generate = ruler_fwe_text},
};

size_t ruler_task_count(void) { return sizeof tasks / sizeof *tasks; }

const RulerTask *ruler_task_at(size_t i) { return i < ruler_task_count() ? &tasks[i] : NULL; }

const RulerTask *ruler_task_find(const char *name) {
  for (size_t i = 0; name && i < ruler_task_count(); i++)
    if (!strcmp(tasks[i].name, name)) return &tasks[i];
  return NULL;
}

/* ---- tokenizing in pieces ----------------------------------------------------- */

/* The byte offsets where the user text is cut, and the token offset of each
 * once encoded. */
typedef struct {
  size_t *bytes;  /* (n) ascending, distinct, within (0, length) */
  size_t *tokens; /* (n) ids before each cut */
  size_t n, capacity;
} Cuts;

static int cuts_add(Cuts *c, size_t byte) {
  if (c->n == c->capacity) {
    size_t capacity = c->capacity ? 2 * c->capacity : 64;
    size_t *bytes = realloc(c->bytes, capacity * sizeof *bytes);
    if (!bytes) return obc_fail(OBC_ENOMEM, "ruler: out of memory for %zu cuts", capacity);
    c->bytes = bytes;
    c->capacity = capacity;
  }
  c->bytes[c->n++] = byte;
  return OBC_OK;
}

static int byte_order(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* The token offset of the cut made for byte (the last cut at or before it:
 * clean_cut moves cuts back, never past another), or of the text's ends. */
static size_t cut_token(const Cuts *c, size_t byte, size_t length, size_t n_ids) {
  if (byte >= length) return n_ids;
  size_t lo = 0, hi = c->n; /* the first cut after byte */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->bytes[mid] <= byte)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? c->tokens[lo - 1] : 0;
}

/* Encodes text[0, length) piece by piece between the cuts (sorted and made
 * distinct here); *ids is malloc'ed. */
static int encode_pieces(const Tokenizer *tokenizer, const char *text, size_t length, Cuts *c,
                         int32_t **ids, size_t *n_ids) {
  qsort(c->bytes, c->n, sizeof *c->bytes, byte_order);
  size_t kept = 0;
  for (size_t i = 0; i < c->n; i++)
    if (c->bytes[i] > 0 && c->bytes[i] < length && (!kept || c->bytes[kept - 1] != c->bytes[i]))
      c->bytes[kept++] = c->bytes[i];
  c->n = kept;
  c->tokens = obc_malloc((c->n ? c->n : 1) * sizeof *c->tokens, "cut tokens");
  if (!c->tokens) return OBC_ENOMEM;
  int32_t *all = NULL;
  size_t n_all = 0;
  int rc = OBC_OK;
  for (size_t i = 0, begin = 0; !rc && i <= c->n; i++) {
    size_t end = i < c->n ? c->bytes[i] : length;
    int32_t *piece = NULL;
    size_t n_piece = 0;
    rc = tokenizer_encode(tokenizer, text + begin, end - begin, &piece, &n_piece);
    int32_t *grown = rc ? NULL : realloc(all, (n_all + n_piece + 1) * sizeof *all);
    if (!rc && !grown) rc = obc_fail(OBC_ENOMEM, "ruler: out of memory for the prompt's ids");
    if (!rc) {
      all = grown;
      if (n_piece) memcpy(all + n_all, piece, n_piece * sizeof *piece);
      n_all += n_piece;
      if (i < c->n) c->tokens[i] = n_all;
    }
    free(piece);
    begin = end;
  }
  if (rc) {
    free(all);
    return rc;
  }
  *ids = all;
  *n_ids = n_all;
  return OBC_OK;
}

/* ---- one sample at one size --------------------------------------------------- */

typedef struct {
  const Tokenizer *tokenizer;
  const RulerSources *sources;
  const RulerTask *task;
  size_t length; /* the target length, which some generators read */
  uint64_t seed;
  bool answer_space; /* RulerOptions.answer_space */
  ChatTurn turn;
} Frame;

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static int add_span(NiahPrompt *p, const char *name, size_t begin, size_t end) {
  if (p->n_spans >= OBC_TRACE_MAX_SPANS)
    return obc_fail(OBC_EINVAL, "ruler: more than %d spans", OBC_TRACE_MAX_SPANS);
  TraceSpan *s = &p->spans[p->n_spans++];
  snprintf(s->name, sizeof s->name, "%s", name);
  s->begin = (int64_t)begin;
  s->end = (int64_t)end;
  return OBC_OK;
}

/* The cuts around mark m in the user text: before the space that precedes
 * it, after the newline that follows it (a newline merges with the
 * punctuation before it in Llama 3's pre-tokenizer). */
static void mark_cuts(const RulerText *t, size_t m, const char *user, size_t length, size_t *begin,
                      size_t *end) {
  size_t before = strlen(t->before);
  *begin = before + t->marks[m].begin;
  *end = before + t->marks[m].end;
  if (*begin > 0 && user[*begin - 1] == ' ') --*begin;
  if (*end < length && user[*end] == '\n') ++*end;
}

/* Whether cutting text[0, length) at byte b leaves the tokens of the bytes
 * around it as tokenizing them in one go gives them: the pieces
 * [b - CUT_REACH, b) and [b, b + CUT_REACH) against the whole window (the
 * window's own edges are the same on both sides). */
#define CUT_REACH 48
static int cut_is_clean(const Tokenizer *tokenizer, const char *text, size_t length, size_t b,
                        bool *clean) {
  size_t lo = b > CUT_REACH ? b - CUT_REACH : 0,
         hi = b + CUT_REACH < length ? b + CUT_REACH : length;
  int32_t *whole = NULL, *left = NULL, *right = NULL;
  size_t n_whole = 0, n_left = 0, n_right = 0;
  int rc = tokenizer_encode(tokenizer, text + lo, hi - lo, &whole, &n_whole);
  if (!rc) rc = tokenizer_encode(tokenizer, text + lo, b - lo, &left, &n_left);
  if (!rc) rc = tokenizer_encode(tokenizer, text + b, hi - b, &right, &n_right);
  *clean = !rc && n_left + n_right == n_whole && !memcmp(whole, left, n_left * sizeof *whole) &&
           !memcmp(whole + n_left, right, n_right * sizeof *whole);
  free(whole);
  free(left);
  free(right);
  return rc;
}

/* The cut nearest at or before b (by at most CUT_REACH / 2 bytes) that the
 * tokenizer does not see (a run of whitespace before a word, a space that
 * belongs to the next word, punctuation that merges with a newline in
 * Llama 3's pre-tokenizer); b itself when none is. */
static int clean_cut(const Tokenizer *tokenizer, const char *text, size_t length, size_t b,
                     size_t *out) {
  *out = b;
  for (size_t shift = 0; shift <= CUT_REACH / 2 && shift < b; shift++) {
    bool clean = false;
    int rc = cut_is_clean(tokenizer, text, length, b - shift, &clean);
    if (rc) return rc;
    if (clean) {
      *out = b - shift;
      return OBC_OK;
    }
  }
  return OBC_OK;
}

static int add_clean_cut(const Tokenizer *tokenizer, const char *text, size_t length, size_t b,
                         Cuts *c) {
  if (b == 0 || b >= length) return OBC_OK;
  size_t at = b;
  int rc = clean_cut(tokenizer, text, length, b, &at);
  return rc ? rc : cuts_add(c, at);
}

/* Where the user text is cut: around the context and the question, after
 * its newlines, and around the marks, each moved back to where the
 * tokenizer sees no cut (clean_cut). */
static int user_cuts(const Tokenizer *tokenizer, const RulerText *t, const char *user,
                     size_t length, size_t context_end, Cuts *c) {
  size_t before = strlen(t->before);
  int rc = add_clean_cut(tokenizer, user, length, before, c);
  if (!rc) rc = add_clean_cut(tokenizer, user, length, context_end, c);
  for (size_t i = 1; !rc && i < length; i++)
    if (user[i - 1] == '\n' && !is_space(user[i]))
      rc = add_clean_cut(tokenizer, user, length, i, c);
  for (size_t m = 0; !rc && m < t->n_marks; m++) {
    size_t begin, end;
    mark_cuts(t, m, user, length, &begin, &end);
    rc = add_clean_cut(tokenizer, user, length, begin, c);
    if (!rc) rc = add_clean_cut(tokenizer, user, length, end, c);
  }
  return rc;
}

/* The prompt of text t into *out: ids, spans, answers and question. */
static int assemble(const Frame *f, const RulerText *t, RulerSample *out) {
  int rc = OBC_OK;
  size_t n_before = strlen(t->before), n_context = strlen(t->context), n_after = strlen(t->after);
  size_t length = n_before + n_context + n_after;
  out->user = obc_malloc(length + 1, "ruler user turn");
  out->answer_prefix = strdup(t->answer_prefix);
  if (!out->user || !out->answer_prefix) rc = obc_fail(OBC_ENOMEM, "ruler: out of memory");
  if (rc) return rc;
  memcpy(out->user, t->before, n_before);
  memcpy(out->user + n_before, t->context, n_context);
  memcpy(out->user + n_before + n_context, t->after, n_after + 1);
  /* The context span ends after the newline that opens the question. */
  size_t context_end = n_before + n_context + (n_after && t->after[0] == '\n' ? 1 : 0);
  Cuts cuts = {0};
  int32_t *user_ids = NULL, *answer_ids = NULL;
  size_t n_user = 0, n_answer = 0;
  rc = user_cuts(f->tokenizer, t, out->user, length, context_end, &cuts);
  if (!rc) rc = encode_pieces(f->tokenizer, out->user, length, &cuts, &user_ids, &n_user);
  char *answer = NULL;
  bool has_answer = t->answer_prefix[0] != '\0';
  /* RULER's base template: user turn, a space, the answer prefix; after a
   * chat template the space only with answer_space. */
  if (!rc && has_answer) {
    size_t n = strlen(t->answer_prefix) + 2;
    answer = obc_malloc(n, "answer prefix");
    if (!answer) rc = OBC_ENOMEM;
    bool space = !f->turn.chat || f->answer_space;
    if (!rc) snprintf(answer, n, "%s%s", space ? " " : "", t->answer_prefix);
    if (!rc) rc = tokenizer_encode(f->tokenizer, answer, strlen(answer), &answer_ids, &n_answer);
  }
  NiahPrompt *p = &out->prompt;
  size_t head = f->turn.n_head, n_ids = head + n_user + f->turn.n_tail + n_answer;
  if (!rc) p->tokens = obc_malloc(n_ids * sizeof *p->tokens, "ruler prompt ids");
  if (!rc && !p->tokens) rc = OBC_ENOMEM;
  if (!rc) {
    int32_t *at = p->tokens;
    memcpy(at, f->turn.head, head * sizeof *at);
    memcpy(at += head, user_ids, n_user * sizeof *at);
    memcpy(at += n_user, f->turn.tail, f->turn.n_tail * sizeof *at);
    memcpy(at += f->turn.n_tail, answer_ids, n_answer * sizeof *at);
    p->n_tokens = n_ids;
  }
#define USER_TOKEN(byte) (head + cut_token(&cuts, (byte), length, n_user))
  if (!rc) rc = add_span(p, "context", USER_TOKEN(n_before), USER_TOKEN(context_end));
  for (size_t m = 0; !rc && m < t->n_marks; m++) {
    size_t begin, end;
    mark_cuts(t, m, out->user, length, &begin, &end);
    rc = add_span(p, t->marks[m].name, USER_TOKEN(begin), USER_TOKEN(end));
  }
#undef USER_TOKEN
  if (!rc)
    rc = add_span(p, "question", head + cut_token(&cuts, context_end, length, n_user),
                  head + n_user);
  if (!rc && has_answer) rc = add_span(p, "answer_prefix", n_ids - n_answer, n_ids);
  if (!rc) {
    p->n_answers = t->n_answers;
    memcpy(p->answers, t->answers, sizeof t->answers);
    snprintf(p->question, sizeof p->question, "%s", out->user + context_end);
  }
  free(answer);
  free(answer_ids);
  free(user_ids);
  free(cuts.bytes);
  free(cuts.tokens);
  return rc;
}

/* The sample at `size` into *out, without the checks and text that only the
 * final sample needs. */
static int build_at(const Frame *f, size_t size, RulerSample *out) {
  memset(out, 0, sizeof *out);
  RulerText t;
  int rc = f->task->generate(f->sources, f->length, f->seed, size, &t);
  if (rc) return rc;
  out->size = size;
  rc = assemble(f, &t, out);
  ruler_text_free(&t);
  if (rc) ruler_sample_free(out);
  return rc;
}

/* The tokens of the sample at `size`. */
static int tokens_at(const Frame *f, size_t size, size_t *n_tokens) {
  RulerSample s;
  int rc = build_at(f, size, &s);
  *n_tokens = rc ? 0 : s.prompt.n_tokens;
  ruler_sample_free(&s);
  return rc;
}

/* ---- the search ---------------------------------------------------------------- */

static int search(const Frame *f, size_t length, RulerSample *out) {
  size_t budget = length > f->task->tokens_to_generate ? length - f->task->tokens_to_generate : 0;
  size_t lo = f->task->min_size ? f->task->min_size : 1, hi = 2 * lo, n_lo = 0, n_hi = 0;
  int rc = tokens_at(f, lo, &n_lo);
  if (!rc && n_lo > budget)
    return obc_fail(OBC_EINVAL,
                    "%s: --length %zu is too short: the smallest haystack takes %zu tokens, "
                    "plus %zu to generate",
                    f->task->name, length, n_lo, f->task->tokens_to_generate);
  /* Every unit adds at least a token, so sizes past 2 * budget + 2 never fit. */
  for (; !rc; lo = hi, hi *= 2) {
    rc = tokens_at(f, hi, &n_hi);
    if (rc || n_hi > budget || hi > 2 * budget + 2) break;
  }
  while (!rc && hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2, n_mid = 0;
    rc = tokens_at(f, mid, &n_mid);
    if (rc) break;
    if (n_mid <= budget)
      lo = mid;
    else
      hi = mid, n_hi = n_mid;
  }
  if (!rc) rc = build_at(f, lo, out);
  if (!rc) out->next_tokens = n_hi;
  return rc;
}

/* RULER's fit in steps (RulerTask.fit_in_steps), as freq_words_extraction.py
 * fits fwe: the first size is budget / 6 (max_len // coded_wordlen), the
 * step budget / 32 (at least 1: RULER's 0 would never end). */
enum { STEP_FIRST_DIVISOR = 6, STEP_DIVISOR = 32 };

static int search_steps(const Frame *f, uint64_t run_seed, size_t length, RulerSample *out) {
  size_t budget = length > f->task->tokens_to_generate ? length - f->task->tokens_to_generate : 0;
  size_t step = budget / STEP_DIVISOR ? budget / STEP_DIVISOR : 1;
  size_t min = f->task->min_size ? f->task->min_size : 1, size = budget / STEP_FIRST_DIVISOR;
  size_t n = 0;
  if (size < min) size = min;
  /* Once per run: grow on the run's sample while it is under the budget,
   * then step back once (unconditionally, as RULER does). A unit is a word
   * of at least one token, less the rounding of the counts, so sizes past
   * 2 * budget + 2 are over the budget. */
  Frame run = *f;
  run.seed = run_seed;
  int rc = tokens_at(&run, size, &n);
  while (!rc && n < budget && size <= 2 * budget + 2) {
    size += step;
    rc = tokens_at(&run, size, &n);
  }
  size = size >= min + step ? size - step : min;
  /* Per sample: step down while it is over the budget. */
  if (!rc) rc = tokens_at(f, size, &n);
  while (!rc && n > budget && size >= min + step) {
    size -= step;
    rc = tokens_at(f, size, &n);
  }
  if (!rc && n > budget)
    return obc_fail(OBC_EINVAL,
                    "%s: --length %zu is too short: a haystack of %zu takes %zu tokens, plus %zu "
                    "to generate",
                    f->task->name, length, size, n, f->task->tokens_to_generate);
  if (!rc) rc = tokens_at(f, size + step, &n);
  if (!rc) rc = build_at(f, size, out);
  if (!rc) out->next_tokens = n;
  return rc;
}

int ruler_sample_build(const Tokenizer *tokenizer, const RulerSources *sources,
                       const RulerOptions *options, const RulerTask *task, size_t length,
                       uint64_t seed, RulerSample *out) {
  assert(tokenizer && sources && options && task && out);
  memset(out, 0, sizeof *out);
  Frame f = {.tokenizer = tokenizer,
             .sources = sources,
             .task = task,
             .length = length,
             .seed = seed,
             .answer_space = options->answer_space};
  uint64_t run_seed = options->has_run_seed ? options->run_seed : seed;
  int rc = chat_turn_open(tokenizer, options->no_chat_template, &f.turn);
  if (!rc)
    rc = task->fit_in_steps ? search_steps(&f, run_seed, length, out) : search(&f, length, out);
  NiahPrompt *p = &out->prompt;
  const TraceSpan *answer = NULL;
  for (size_t i = 0; !rc && i < p->n_spans; i++)
    if (!strcmp(p->spans[i].name, "answer_prefix")) answer = &p->spans[i];
  size_t n_answer = answer ? (size_t)(answer->end - answer->begin) : 0;
  if (!rc)
    rc = chat_turn_consistent(tokenizer, &f.turn, out->user, strlen(out->user), p->tokens,
                              p->n_tokens - n_answer, &p->boundary_consistent);
  if (!rc) rc = tokenizer_decode(tokenizer, p->tokens, p->n_tokens, &p->text);
  if (!rc) {
    bool essay = task->haystack && !strcmp(task->haystack, "essay");
    snprintf(p->haystack_source, sizeof p->haystack_source, "%s",
             essay            ? sources->essay.source
             : task->haystack ? task->haystack
                              : "");
  }
  chat_turn_close(&f.turn);
  if (rc) ruler_sample_free(out);
  return rc;
}

void ruler_sample_free(RulerSample *sample) {
  niah_prompt_free(&sample->prompt);
  free(sample->user);
  free(sample->answer_prefix);
  memset(sample, 0, sizeof *sample);
}

int ruler_task_build(const Tokenizer *tokenizer, const RulerSources *sources,
                     const RulerOptions *options, const RulerTask *task, size_t length,
                     uint64_t seed, NiahPrompt *out) {
  RulerSample s;
  int rc = ruler_sample_build(tokenizer, sources, options, task, length, seed, &s);
  memset(out, 0, sizeof *out);
  if (!rc) {
    *out = s.prompt;
    memset(&s.prompt, 0, sizeof s.prompt);
  }
  ruler_sample_free(&s);
  return rc;
}

/* ---- JSON ------------------------------------------------------------------------ */

int ruler_prompt_json(const RulerTask *task, size_t length, uint64_t seed,
                      const RulerSample *sample, cJSON **out) {
  const NiahPrompt *p = &sample->prompt;
  cJSON *o = cJSON_CreateObject();
  cJSON *ids = cJSON_CreateArray(), *answers = cJSON_CreateArray(), *spans = cJSON_CreateArray();
  bool ok = o && ids && answers && spans;
  if (ok) {
    cJSON_AddItemToObject(o, "task", cJSON_CreateString(task->name));
    cJSON_AddItemToObject(o, "length", cJSON_CreateNumber((double)length));
    char seed_text[24]; /* a uint64 is exact only as text */
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    cJSON_AddItemToObject(o, "seed", cJSON_CreateRaw(seed_text));
    cJSON_AddItemToObject(o, "size", cJSON_CreateNumber((double)sample->size));
    cJSON_AddItemToObject(o, "tokens", cJSON_CreateNumber((double)p->n_tokens));
    cJSON_AddItemToObject(o, "next_tokens", cJSON_CreateNumber((double)sample->next_tokens));
    cJSON_AddItemToObject(o, "tokens_to_generate",
                          cJSON_CreateNumber((double)task->tokens_to_generate));
    cJSON_AddItemToObject(o, "boundary_consistent", cJSON_CreateBool(p->boundary_consistent));
    cJSON_AddItemToObject(o, "haystack_source", cJSON_CreateString(p->haystack_source));
    cJSON_AddItemToObject(o, "text", cJSON_CreateString(p->text));
    cJSON_AddItemToObject(o, "user", cJSON_CreateString(sample->user));
    cJSON_AddItemToObject(o, "answer_prefix", cJSON_CreateString(sample->answer_prefix));
    cJSON_AddItemToObject(o, "question", cJSON_CreateString(p->question));
    for (size_t i = 0; i < p->n_answers; i++)
      cJSON_AddItemToArray(answers, cJSON_CreateString(p->answers[i]));
    cJSON_AddItemToObject(o, "answers", answers);
    for (size_t i = 0; i < p->n_spans; i++) {
      cJSON *s = cJSON_CreateObject();
      if (!s) break;
      cJSON_AddItemToObject(s, "name", cJSON_CreateString(p->spans[i].name));
      cJSON_AddItemToObject(s, "begin", cJSON_CreateNumber((double)p->spans[i].begin));
      cJSON_AddItemToObject(s, "end", cJSON_CreateNumber((double)p->spans[i].end));
      cJSON_AddItemToArray(spans, s);
    }
    cJSON_AddItemToObject(o, "spans", spans);
    for (size_t i = 0; i < p->n_tokens; i++)
      cJSON_AddItemToArray(ids, cJSON_CreateNumber(p->tokens[i]));
    cJSON_AddItemToObject(o, "ids", ids);
    ok = cJSON_GetArraySize(spans) == (int)p->n_spans &&
         cJSON_GetArraySize(ids) == (int)p->n_tokens &&
         cJSON_GetArraySize(answers) == (int)p->n_answers;
  } else {
    cJSON_Delete(ids);
    cJSON_Delete(answers);
    cJSON_Delete(spans);
  }
  if (!ok) {
    cJSON_Delete(o);
    return obc_fail(OBC_ENOMEM, "ruler: out of memory for the prompt's JSON");
  }
  *out = o;
  return OBC_OK;
}
