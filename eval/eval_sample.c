/* One sample of an eval (eval/eval.h): its RULER prompt, one capture (the
 * prefill and the full-cache answer), the kept sets of every policy x
 * budget x protocol and of oracle@T, all replayed with the model in one
 * batched call, and in DIR/cells/<id>/ sample.json (every answer, its
 * RULER score and the kept set's recall against oracle@T) and prompt.json
 * (the prompt: text, ids, spans, answers). */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "common/obc_error.h"
#include "common/obc_json.h"
#include "common/obc_time.h"
#include "eval/eval.h"
#include "eval/score_cmd.h"
#include "eval/stats.h"
#include "replay/model_replay.h"
#include "evict/preset.h"
#include "model/hf_config.h"
#include "tokenizer/tokenizer.h"
#include "traces/trace.h"

/* The trace's slabs a sample keeps in memory after their first read: the
 * replayer and every policy read the same K, V, Q and O (about 100 MB for
 * SmolLM2 at 2048 tokens); past this the rest are read from the file. */
#define EVAL_KEPT_SLAB_BYTES ((size_t)1 << 30)

void eval_config_default(EvalConfig *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->tasks[c->n_tasks++], sizeof c->tasks[0], "niah_single_1");
  c->lengths[c->n_lengths++] = 1024;
  c->samples = 8;
  c->seed = 1;
  static const char *const scores[] = {"snapkv", "snapkv+obc_k"};
  for (size_t i = 0; i < sizeof scores / sizeof *scores; i++)
    snprintf(c->scores[c->n_scores++], sizeof c->scores[0], "%s", scores[i]);
  static const char *const budgets[] = {"10%", "25%", "50%"};
  for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++)
    snprintf(c->budgets[c->n_budgets++], sizeof c->budgets[0], "%s", budgets[i]);
  c->protocols[c->n_protocols++] = EVICT_PROTOCOL_AGNOSTIC;
  evict_policy_default(&c->base);
  ruler_options_default(&c->ruler);
}

/* Answer tokens of the sample, N: RULER's tokens_to_generate, capped by
 * --max-new-tokens. As in transformers' max_new_tokens (and kvpress's
 * generate_answer), the prefill's token is the first of them, so the
 * sample decodes N - 1 steps after it (decode_steps). */
static size_t answer_tokens(const EvalConfig *c, const RulerTask *task) {
  size_t n = task->tokens_to_generate;
  if (c->max_new_tokens && c->max_new_tokens < n) n = c->max_new_tokens;
  return n < 2 ? 2 : n > REPLAY_MAX_STEPS ? REPLAY_MAX_STEPS : n;
}
static size_t decode_steps(const EvalConfig *c, const RulerTask *task) {
  return answer_tokens(c, task) - 1;
}

static uint64_t gcd(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* Whether budgets a and b (evict_policy_set_budget texts) keep the same:
 * both tokens or both fractions, of one ratio in lowest terms ("25%" and
 * "0.25" are 1/4). */
static bool same_budget(const char *a, const char *b) {
  uint64_t na = 0, da = 1, nb = 0, db = 1;
  bool ta = false, tb = false;
  if (evict_budget_ratio(a, &na, &da, &ta) || evict_budget_ratio(b, &nb, &db, &tb)) {
    obc_error_clear();
    return !strcmp(a, b);
  }
  uint64_t ga = gcd(na, da), gb = gcd(nb, db); /* num >= 1: never 0 */
  return ta == tb && na / ga == nb / gb && da / ga == db / gb;
}

/* The lists of the configuration: each item once (a repeated task, length,
 * policy or budget would run twice and be refused by its own merge), the
 * counts within the plan's reach. */
static int check_lists(const EvalConfig *c) {
  size_t cells = c->n_tasks * c->n_lengths; /* both <= 16 */
  if (c->samples > SWEEP_PLAN_MAX_CELLS / cells)
    return obc_fail(OBC_EINVAL,
                    "--samples %zu: %zu tasks x %zu lengths x %zu samples is more than the %d "
                    "samples a plan holds",
                    c->samples, c->n_tasks, c->n_lengths, c->samples, SWEEP_PLAN_MAX_CELLS);
  for (size_t i = 0; i < c->n_tasks; i++)
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c->tasks[i], c->tasks[j]))
        return obc_fail(OBC_EINVAL, "--tasks: %s given twice", c->tasks[i]);
  for (size_t i = 0; i < c->n_lengths; i++)
    for (size_t j = 0; j < i; j++)
      if (c->lengths[i] == c->lengths[j])
        return obc_fail(OBC_EINVAL, "--lengths: %zu given twice", c->lengths[i]);
  for (size_t i = 0; i < c->n_scores; i++)
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c->scores[i], c->scores[j]))
        return obc_fail(OBC_EINVAL, "--scores: %s given twice", c->scores[i]);
  for (size_t i = 0; i < c->n_budgets; i++)
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c->budgets[i], c->budgets[j]))
        return obc_fail(OBC_EINVAL, "--budgets: %s given twice", c->budgets[i]);
      else if (same_budget(c->budgets[i], c->budgets[j]))
        return obc_fail(OBC_EINVAL, "--budgets: %s and %s are the same budget", c->budgets[j],
                        c->budgets[i]);
  return OBC_OK;
}

int eval_config_check(const EvalConfig *c, const Model *model) {
  if (!c->n_tasks || !c->n_lengths || !c->samples || !c->n_scores || !c->n_budgets)
    return obc_fail(OBC_EINVAL,
                    "eval: nothing to run (--tasks, --lengths, --samples, --scores and "
                    "--budgets must not be empty)");
  if (c->max_new_tokens == 1)
    return obc_fail(OBC_EINVAL,
                    "--max-new-tokens 1: expected at least 2 (the prefill's token and one decode "
                    "step, which oracle@T needs)");
  int rc = check_lists(c);
  if (rc) return rc;
  for (size_t t = 0; t < c->n_tasks; t++) {
    const RulerTask *task = ruler_task_find(c->tasks[t]);
    if (!task) return obc_fail(OBC_EINVAL, "--tasks: unknown task '%s'", c->tasks[t]);
    size_t context = model ? model->config.context_length : 0;
    for (size_t l = 0; l < c->n_lengths; l++) {
      /* The prompt takes at least one token beside the answer's. */
      if (c->lengths[l] <= answer_tokens(c, task) || c->lengths[l] > EVAL_MAX_LENGTH)
        return obc_fail(OBC_EINVAL,
                        "--lengths: %zu is outside %zu..%d (%s answers in %zu tokens, after the "
                        "prompt)",
                        c->lengths[l], answer_tokens(c, task) + 1, EVAL_MAX_LENGTH, task->name,
                        answer_tokens(c, task));
      if (context && c->lengths[l] > context)
        return obc_fail(OBC_EINVAL, "--lengths: %zu is beyond %s's context of %zu", c->lengths[l],
                        model->config.name, context);
    }
  }
  EvictPolicy p = c->base;
  for (size_t s = 0; s < c->n_scores; s++) {
    int rc = evict_policy_set_score(&p, c->scores[s]);
    if (rc) return rc;
  }
  for (size_t b = 0; b < c->n_budgets; b++) {
    int rc = evict_policy_set_budget(&p, c->budgets[b]);
    if (rc) return rc;
  }
  return OBC_OK;
}

int eval_config_check_model(const EvalConfig *c, const char *model_path) {
  int rc = eval_config_check(c, NULL);
  bool folder = false;
  char resolved[PATH_MAX];
  if (!rc) rc = model_locate(model_path, &folder, resolved);
  if (rc) return rc;
  /* A Hugging Face folder: its config.json alone (its weights load as fp32);
   * a GGUF file: mapped, its matrices as stored. */
  Model *model = obc_calloc(1, sizeof *model, "the model's configuration");
  if (!model) return OBC_ENOMEM;
  if (folder) {
    rc = hf_config_read(resolved, &model->config);
    if (!rc) rc = eval_config_check(c, model);
    free(model);
    return rc;
  }
  free(model);
  model = NULL;
  rc = model_load(resolved, &model);
  if (!rc) rc = eval_config_check(c, model);
  model_free(model);
  return rc;
}

int eval_config_check_plan(const EvalConfig *c, const SweepPlan *plan) {
  const char *path = plan->path[0] ? plan->path : "plan.json";
  int rc = eval_config_check(c, NULL);
  if (rc) return obc_fail_context(rc, "%s", path);
  if (plan->seed != c->seed)
    return obc_fail(OBC_EFORMAT,
                    "%s: \"seed\" %" PRIu64 " is not the seed of its options (%" PRIu64 ")", path,
                    plan->seed, c->seed);
  /* The cells are exactly the ones its options make, in their order. */
  SweepPlan expected;
  memset(&expected, 0, sizeof expected);
  rc =
      sweep_plan_set_samples(&expected, c->tasks, c->n_tasks, c->lengths, c->n_lengths, c->samples);
  if (rc) return obc_fail_context(rc, "%s", path);
  if (expected.n_cells != plan->n_cells)
    rc = obc_fail(OBC_EFORMAT,
                  "%s: %zu samples, where its options (--tasks, --lengths, --samples) "
                  "make %zu",
                  path, plan->n_cells, expected.n_cells);
  for (size_t i = 0; i < plan->n_cells && !rc; i++) {
    const SweepPlanCell *cell = &plan->cells[i], *want = &expected.cells[i];
    if (strcmp(cell->task, want->task) || cell->length != want->length ||
        cell->sample != want->sample)
      rc = obc_fail(OBC_EFORMAT,
                    "%s: sample %zu (%s) is not one of the plan's options (--tasks, "
                    "--lengths, --samples; expected %s)",
                    path, i, cell->name, want->name);
  }
  sweep_plan_free(&expected);
  return rc;
}

int eval_runner_open(EvalRunner *r, const Model *model, const EvalConfig *config, size_t total) {
  memset(r, 0, sizeof *r);
  r->model = model;
  r->config = config;
  r->total = total;
  r->start = obc_now_seconds();
  if (!model->tokenizer) return obc_fail(OBC_EINVAL, "%s: the model has no tokenizer", model->path);
  return ruler_sources_open(&config->ruler, &r->sources);
}

void eval_runner_close(EvalRunner *r) { ruler_sources_close(&r->sources); }

/* ---- one sample ---------------------------------------------------------- */

/* A replayed kept set and what it is. */
typedef struct {
  size_t score;  /* index into config->scores; n_scores = oracle@T */
  size_t budget; /* index into config->budgets */
  EvictProtocol protocol;
  double recall; /* against oracle@T's kept set; NaN for the oracle itself */
  size_t candidates;
} EvalSet;

typedef struct {
  EvictKeepSet *keeps; /* (n) */
  EvalSet *sets;       /* (n) */
  size_t n, cap;
} EvalSets;

static void sets_free(EvalSets *s) {
  for (size_t i = 0; i < s->n; i++) evict_keep_set_free(&s->keeps[i]);
  free(s->keeps);
  free(s->sets);
  memset(s, 0, sizeof *s);
}

/* Whether any score reads the column sums or query statistics of every
 * prompt row (capture them only then: they cost about half a prefill). */
static bool needs_column_sums(const EvalConfig *c) {
  for (size_t s = 0; s < c->n_scores; s++) {
    EvictPolicy p = c->base;
    if (!evict_policy_set_score(&p, c->scores[s]) &&
        (p.source->reads & (EVICT_READS_SUMS | EVICT_READS_QSTATS)))
      return true;
  }
  obc_error_clear();
  return false;
}

/* Mean over (layer, KV head) of |K n O| / |O| over the candidates, O the
 * oracle's kept candidates, K the policy's. */
static double keep_recall(const EvictKeepSet *k, const EvictKeepSet *oracle) {
  double sum = 0;
  size_t heads = k->n_layers * k->n_kv_heads;
  for (size_t h = 0; h < heads; h++) {
    const unsigned char *a = k->keep + h * k->n_prompt, *o = oracle->keep + h * k->n_prompt;
    size_t both = 0, kept = 0;
    for (size_t p = 0; p < k->n_candidates; p++) {
      kept += o[p] != 0;
      both += o[p] && a[p];
    }
    sum += kept ? (double)both / (double)kept : 1.0;
  }
  return heads ? sum / (double)heads : NAN;
}

/* The kept sets of score index s (n_scores: the oracle) under protocol,
 * one per budget, into sets->keeps and sets->sets from slot `first` on. */
static int score_sets(const EvalConfig *c, TraceReader *reader, const char *trace, size_t s,
                      EvictProtocol protocol, const char *oracle_steps, EvalSets *sets,
                      size_t first) {
  EvictPolicy p = c->base;
  p.protocol = protocol;
  const TraceMeta *meta = trace_meta(reader);
  int rc = evict_policy_set_score(&p, s < c->n_scores ? c->scores[s] : EVAL_ORACLE);
  if (!rc && s == c->n_scores) rc = evict_policy_set_steps(&p, oracle_steps);
  unsigned char *protect = NULL;
  if (!rc) rc = evict_policy_protected(&p, meta, trace, &protect);
  double *scores = NULL;
  size_t n = 0, window = 0;
  if (!rc) rc = evict_policy_scores(reader, &p, &scores, &n, &window);
  for (size_t b = 0; b < c->n_budgets && !rc; b++) {
    rc = evict_policy_set_budget(&p, c->budgets[b]);
    EvictKeepSet *keep = &sets->keeps[first + b];
    if (!rc)
      rc = evict_keep_from_scores(&p, scores, meta->model.n_layers, meta->model.n_kv_heads,
                                  meta->n_prompt, n, protect, keep);
    if (rc) break;
    keep->window = window;
    sets->sets[first + b] =
        (EvalSet){.score = s, .budget = b, .protocol = protocol, .recall = NAN, .candidates = n};
  }
  free(scores);
  free(protect);
  return rc;
}

/* Every kept set of the sample: per protocol the oracle's (one per budget,
 * over the decode steps oracle_steps) first, then each score's, and each
 * score's recall against the oracle's set of its budget. The scores of a
 * protocol run in parallel, one score a thread (each alone computes the
 * same bits on any thread count, docs/SCIENCE.md); a failure is reported
 * for the first failing score in the order given. */
static int make_sets(const EvalConfig *c, TraceReader *reader, const char *trace,
                     const char *oracle_steps, EvalSets *sets) {
  size_t S = c->n_scores + 1, B = c->n_budgets;
  sets->cap = c->n_protocols * S * B;
  sets->keeps = obc_calloc(sets->cap, sizeof *sets->keeps, "kept sets");
  sets->sets = obc_calloc(sets->cap, sizeof *sets->sets, "kept sets");
  int *codes = obc_calloc(S, sizeof *codes, "score results");
  char(*messages)[1024] = obc_calloc(S, sizeof *messages, "score messages");
  int rc = sets->keeps && sets->sets && codes && messages ? OBC_OK : OBC_ENOMEM;
  for (size_t q = 0; q < c->n_protocols && !rc; q++) {
    size_t first = sets->n;
    /* Slot first + i * B + b: the oracle's (i = 0), then score i - 1's;
     * every slot, filled or not, is freed with the sets. */
    sets->n += S * B;
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < S; i++) {
      size_t s = i ? i - 1 : c->n_scores;
      codes[i] = score_sets(c, reader, trace, s, c->protocols[q], i ? NULL : oracle_steps, sets,
                            first + i * B);
      if (codes[i]) snprintf(messages[i], sizeof messages[i], "%s", obc_error_message());
    }
    for (size_t i = 0; i < S && !rc; i++)
      if (codes[i]) rc = obc_fail(codes[i], "%s", messages[i]);
    for (size_t i = B; i < S * B && !rc; i++)
      sets->sets[first + i].recall =
          keep_recall(&sets->keeps[first + i], &sets->keeps[first + i % B]);
  }
  free(codes);
  free(messages);
  return rc;
}

static cJSON *answer_json(const char *answer, const char *const *refs, size_t n_refs) {
  cJSON *o = cJSON_CreateObject();
  double score = eval_match_all(answer, refs, n_refs);
  cJSON_AddStringToObject(o, "answer", answer);
  cJSON_AddNumberToObject(o, "score", score);
  cJSON_AddBoolToObject(o, "correct", score == 1.0);
  return o;
}

static size_t count_correct(const cJSON *rows) {
  size_t n = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) n += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "correct"));
  return n;
}

/* Wall time of each stage of a sample, in seconds. */
typedef struct {
  double prompt;  /* the RULER prompt, tokenised, and prompt.json */
  double capture; /* the prefill, its captured rows and sums, the full-cache answer */
  double load;    /* the trace reopened and its K/V loaded into the replay cache */
  double scores;  /* the --score-cmd commands, every policy's scores and kept sets */
  double replay;  /* the batched replay of every kept set */
  double total;
} SampleTimes;

static cJSON *times_json(const SampleTimes *t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "prompt", t->prompt);
  cJSON_AddNumberToObject(o, "capture", t->capture);
  cJSON_AddNumberToObject(o, "load", t->load);
  cJSON_AddNumberToObject(o, "scores", t->scores);
  cJSON_AddNumberToObject(o, "replay", t->replay);
  return o;
}

/* out/sample.json. */
static int write_sample(const EvalRunner *r, const SweepPlanCell *cell, uint64_t seed,
                        const NiahPrompt *prompt, const char *full_answer, const EvalSets *sets,
                        const ReplayAnswer *outs, size_t steps, size_t oracle_steps,
                        const SampleTimes *times, const char *out, size_t *right,
                        bool *full_right) {
  const EvalConfig *c = r->config;
  const char *refs[RULER_MAX_ANSWERS];
  for (size_t i = 0; i < prompt->n_answers; i++) refs[i] = prompt->answers[i];
  cJSON *root = cJSON_CreateObject(), *answers = cJSON_CreateArray(), *rows = cJSON_CreateArray();
  char seed_text[32];
  snprintf(seed_text, sizeof seed_text, "%" PRIu64, seed);
  cJSON_AddStringToObject(root, "task", cell->task);
  cJSON_AddNumberToObject(root, "length", (double)cell->length);
  cJSON_AddNumberToObject(root, "sample", (double)cell->sample);
  cJSON_AddStringToObject(root, "seed", seed_text);
  cJSON_AddNumberToObject(root, "tokens", (double)prompt->n_tokens);
  cJSON_AddNumberToObject(root, "answer_tokens", (double)(steps + 1));
  cJSON_AddNumberToObject(root, "decode", (double)steps);
  cJSON_AddNumberToObject(root, "oracle_steps", (double)oracle_steps);
  for (size_t i = 0; i < prompt->n_answers; i++)
    cJSON_AddItemToArray(answers, cJSON_CreateString(prompt->answers[i]));
  cJSON_AddItemToObject(root, "answers", answers);
  cJSON *full = answer_json(full_answer, refs, prompt->n_answers);
  *full_right = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(full, "correct"));
  cJSON_AddItemToObject(root, "full", full);
  for (size_t i = 0; i < sets->n; i++) {
    const EvalSet *s = &sets->sets[i];
    cJSON *row = answer_json(outs[i].answer, refs, prompt->n_answers);
    cJSON_AddStringToObject(row, "policy",
                            s->score < c->n_scores ? c->scores[s->score] : EVAL_ORACLE);
    cJSON_AddStringToObject(row, "budget", c->budgets[s->budget]);
    cJSON_AddStringToObject(row, "protocol", evict_protocol_name(s->protocol));
    cJSON_AddNumberToObject(row, "kept", (double)sets->keeps[i].budget);
    cJSON_AddNumberToObject(row, "candidates", (double)s->candidates);
    if (isnan(s->recall))
      cJSON_AddNullToObject(row, "recall");
    else
      cJSON_AddNumberToObject(row, "recall", s->recall);
    cJSON_AddItemToArray(rows, row);
  }
  *right = count_correct(rows);
  cJSON_AddItemToObject(root, "rows", rows);
  cJSON_AddNumberToObject(root, "seconds", times->total);
  cJSON_AddItemToObject(root, "stage_seconds", times_json(times));
  return obc_json_write(out, "sample.json", root);
}

static void progress(const EvalRunner *r, const SweepPlanCell *cell, const char *what) {
  if (!isatty(STDERR_FILENO)) return;
  fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s", r->done + 1, r->total, cell->name, what);
}

/* "2m05s" of s seconds. */
static void duration_text(double s, char *out, size_t size) {
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(out, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60)
    snprintf(out, size, "%ldm%02lds", t / 60, t % 60);
  else
    snprintf(out, size, "%lds", t);
}

/* The decode steps of the full-cache answer: step t (1-based) feeds answer
 * token t - 1 and predicts token t, so the steps that predict the answer's
 * tokens after the first, its stop token included, are 1..k, k the index of
 * the first stop token (all captured steps without one; step 1 when the
 * first token stops). As oracle steps: "1-k", or "T". */
static void answer_steps(const Replayer *replayer, const Tokenizer *tokenizer, size_t steps,
                         char *out, size_t size, size_t *k) {
  *k = steps;
  for (size_t t = 0; t <= steps; t++)
    if (tokenizer_is_stop(tokenizer, replay_model_full_token(replayer, t))) {
      *k = t ? t : 1;
      break;
    }
  if (*k == steps)
    snprintf(out, size, "T");
  else
    snprintf(out, size, "1-%zu", *k);
}

static int replay_sets(const EvalRunner *r, Replayer *replayer, EvalSets *sets,
                       ReplayAnswer **outs) {
  *outs = obc_malloc(sets->n * sizeof **outs + 1, "replay results");
  if (!*outs) return OBC_ENOMEM;
  return replay_model_run_batch(replayer, sets->keeps, sets->n, r->config->batch, *outs);
}

/* The capture options of the sample: the rows the policies' windows need
 * (the question and template tail plus EVAL_ROWS_BEFORE_QUESTION), the
 * decode steps, column sums only when a score reads them. */
static CaptureOptions capture_options(const EvalConfig *c, const NiahPrompt *prompt, size_t steps,
                                      const char *producer) {
  CaptureOptions o;
  capture_options_default(&o);
  size_t tail = prompt->n_tokens;
  for (size_t i = 0; i < prompt->n_spans; i++)
    if (!strcmp(prompt->spans[i].name, "question"))
      tail = prompt->n_tokens - (size_t)prompt->spans[i].begin;
  o.rows = tail + EVAL_ROWS_BEFORE_QUESTION;
  o.decode = steps;
  o.skip_column_sums = !needs_column_sums(c);
  o.threads = c->threads;
  o.device = c->device;
  o.producer = producer;
  return o;
}

/* Seconds since *mark, which moves to now. */
static double lap(double *mark) {
  double now = obc_now_seconds(), t = now - *mark;
  *mark = now;
  return t;
}

int eval_run_sample(void *context, const SweepPlanCell *cell, const char *out) {
  EvalRunner *r = context;
  const EvalConfig *c = r->config;
  double start = obc_now_seconds(), mark = start;
  SampleTimes times = {0};
  const RulerTask *task = ruler_task_find(cell->task);
  if (!task) return obc_fail(OBC_EINVAL, "sample %zu: unknown task '%s'", cell->id, cell->task);
  uint64_t seed = c->seed + cell->sample;
  size_t steps = decode_steps(c, task);
  char trace[4096], producer[1024];
  if (snprintf(trace, sizeof trace, "%s/trace.h5", out) >= (int)sizeof trace)
    return obc_fail(OBC_EINVAL, "%s: path too long", out);
  snprintf(producer, sizeof producer, "%s [sample %zu: %s]",
           c->command_line ? c->command_line : "obcache eval", cell->id, cell->name);
  progress(r, cell, "building the prompt");
  RulerSample sample;
  RulerOptions ruler = c->ruler; /* fwe fits its size once, on sample 0's seed */
  ruler.run_seed = c->seed;
  ruler.has_run_seed = true;
  int rc = ruler_sample_build(r->model->tokenizer, &r->sources, &ruler, task, cell->length, seed,
                              &sample);
  const NiahPrompt *p = &sample.prompt;
  cJSON *prompt_json = NULL;
  if (!rc) rc = ruler_prompt_json(task, cell->length, seed, &sample, &prompt_json);
  if (!rc) rc = obc_json_write(out, "prompt.json", prompt_json);
  if (rc) {
    ruler_sample_free(&sample);
    return obc_fail_context(rc, "sample %zu (%s)", cell->id, cell->name);
  }
  times.prompt = lap(&mark);
  CaptureOptions capture = capture_options(c, p, steps, producer);
  CaptureResult captured;
  progress(r, cell, "prefill and full-cache answer");
  if (!rc) rc = capture_run(r->model, p, &capture, trace, &captured);
  times.capture = lap(&mark);
  TraceReader *reader = NULL;
  if (!rc) rc = trace_open(trace, &reader);
  if (!rc) rc = trace_keep_slabs(reader, EVAL_KEPT_SLAB_BYTES);
  Replayer *replayer = NULL;
  if (!rc) rc = replay_model_open(r->model, reader, steps, c->threads, c->device, &replayer);
  if (!rc) rc = replay_model_free_running_only(replayer, true);
  char oracle_steps[32] = "T", full_answer[4096] = "";
  size_t answer = steps;
  if (!rc)
    answer_steps(replayer, r->model->tokenizer, steps, oracle_steps, sizeof oracle_steps, &answer);
  /* g0 and the steps' predictions: the answer tokens, as every replay's */
  if (!rc)
    snprintf(full_answer, sizeof full_answer, "%s", replay_model_full_answer(replayer, NULL));
  EvalSets sets = {0};
  ReplayAnswer *outs = NULL;
  times.load = lap(&mark);
  if (!rc && c->n_score_cmds) {
    progress(r, cell, "running the --score-cmd commands");
    rc = eval_score_cmds_run(c, r->model->path, cell->name, out, trace);
  }
  if (!rc) rc = make_sets(c, reader, trace, oracle_steps, &sets);
  times.scores = lap(&mark);
  char what[64];
  snprintf(what, sizeof what, "replaying %zu kept sets", sets.n);
  progress(r, cell, what);
  if (!rc) rc = replay_sets(r, replayer, &sets, &outs);
  times.replay = lap(&mark);
  replay_model_close(replayer);
  trace_close(reader);
  size_t right = 0;
  bool full_right = false;
  times.total = obc_now_seconds() - start;
  if (!rc)
    rc = write_sample(r, cell, seed, p, full_answer, &sets, outs, steps, answer, &times, out,
                      &right, &full_right);
  if (!rc && !c->keep_traces) eval_score_cmds_clean(c, out);
  if (!rc && !c->keep_traces && unlink(trace))
    rc = obc_fail(OBC_EIO, "%s: cannot remove the trace", trace);
  if (!rc) {
    r->done++;
    double elapsed = obc_now_seconds() - r->start;
    char eta[32] = "0s";
    duration_text(elapsed / (double)r->done * (double)(r->total - r->done), eta, sizeof eta);
    if (isatty(STDERR_FILENO)) fprintf(stderr, "\r\033[K");
    printf(
        "sample %zu/%zu %s: %zu tokens, full cache %s, %zu of %zu replays right; %.1f s; "
        "ETA %s\n",
        r->done, r->total, cell->name, p->n_tokens, full_right ? "right" : "wrong", right, sets.n,
        times.total, eta);
    fflush(stdout);
  }
  free(outs);
  sets_free(&sets);
  ruler_sample_free(&sample);
  if (rc) obc_fail_context(rc, "sample %zu (%s)", cell->id, cell->name);
  return rc;
}
