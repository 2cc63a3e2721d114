/* The merge of an eval (eval/eval.h): every finished sample's sample.json
 * read back and checked against the configuration, then the tables.
 *
 *   accuracy.csv  one row per (task or "all", length, policy, budget,
 *                 protocol): n, correct (every answer found), accuracy with
 *                 its Wilson 95% interval, RULER's score (mean
 *                 string_match_all; over all tasks the mean of the task
 *                 means) with its bootstrap 95% interval (task-stratified
 *                 over all tasks), mean recall against oracle@T, mean kept
 *                 share of the candidates; policy "full" is the uncompressed
 *                 cache (budget and protocol empty)
 *   paired.csv    each pairing X vs X+obc_S on the same samples: the counts,
 *                 the accuracy difference with a paired bootstrap interval,
 *                 the exact McNemar p; beside them RULER's score of each,
 *                 its difference with a paired bootstrap interval and the
 *                 sign-flip p; the discordant pairs and the accuracy
 *                 difference detectable with 80% power (exact McNemar at
 *                 alpha 0.05, at the observed discordance); over the pooled
 *                 rows (task "all") the Holm-adjusted McNemar p and the
 *                 verdict on the pairing's claim (holds, fails, undecided)
 *   recall.csv    accuracy by quartile of recall (per budget and pooled),
 *                 with the AUC of recall as a predictor of correctness
 *   recall_policy.csv  the same AUC within each policy, budget and protocol,
 *                 and the mean recall of the right and of the wrong answers
 *   samples.csv   every answer
 *   prompts.jsonl every sample's prompt (text, ids, spans, answers), a line each
 *   eval.json     the configuration, the plan's model, the counts */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "common/obc_text.h"
#include "eval/eval.h"
#include "eval/stats.h"
#include "formats/json_file.h"
#include "sweep/cell.h"
#include "sweep/grid.h"
#include "sweep/replay_pairs.h"

#define WILSON_Z 1.959963984540054

/* One answer of a sample. */
typedef struct {
  double score; /* RULER's string_match_all */
  int correct;
  double recall; /* NaN: none (full, oracle@T) */
  size_t kept, candidates;
  char *answer; /* owned */
} EvalAnswer;

typedef struct {
  size_t cell;         /* its id in the plan */
  size_t task, length; /* indices into the configuration */
  size_t sample;
  char seed[32];
  size_t tokens;
  EvalAnswer full;
  EvalAnswer *rows; /* (n_protocols, n_scores + 1, n_budgets); score n_scores = oracle@T */
} EvalSample;

/* A pairing on the samples of one (task, length, protocol, budget). */
typedef struct {
  size_t n, baseline, paired, baseline_only, paired_only;
  double difference, low, high, p;
  /* RULER's score: each method's, the difference, its interval, sign-flip p */
  double baseline_score, paired_score, score_difference, score_low, score_high, sign_flip_p;
  /* Power: the accuracy difference the exact McNemar test detects with 80%
   * power at alpha 0.05 for this n at the observed discordance
   * (discordant / n); over the pooled rows the Holm-adjusted McNemar p and
   * the verdict on the pairing's claim (EVAL_VERDICT_GAIN). */
  size_t discordant;
  double mde80, holm_p;
  const char *verdict;
} PairedResult;

/* The smallest gain the paper reports (2 points of accuracy): a pooled
 * pairing whose interval lies below it, with an MDE below it too, refutes
 * a gain of that size. */
#define EVAL_VERDICT_GAIN 0.02
#define EVAL_ALPHA 0.05

/* RULER's score of one accuracy row and its bootstrap interval. */
typedef struct {
  double score, low, high;
} ScoreResult;

typedef struct {
  const EvalConfig *config;
  const char *dir;
  EvalSample *samples; /* (n_samples) in plan order */
  size_t n_samples;
  size_t n_policies;                /* n_scores + 1 */
  SweepPair pairs[EVAL_MAX_SCORES]; /* (n_pairs) X vs X+obc_S among the scores */
  size_t n_pairs;
  PairedResult *paired; /* (n_tasks + 1, n_lengths, n_pairs, n_protocols, n_budgets), once */
  ScoreResult *scores;  /* (n_tasks + 1, n_lengths, 1 + rows): full, then row_index, once */
} EvalData;

static size_t row_index(const EvalData *d, size_t q, size_t s, size_t b) {
  return (q * d->n_policies + s) * d->config->n_budgets + b;
}

static void data_free(EvalData *d) {
  free(d->paired);
  free(d->scores);
  size_t rows = d->config->n_protocols * d->n_policies * d->config->n_budgets;
  for (size_t i = 0; i < d->n_samples; i++) {
    free(d->samples[i].full.answer);
    for (size_t r = 0; d->samples[i].rows && r < rows; r++) free(d->samples[i].rows[r].answer);
    free(d->samples[i].rows);
  }
  free(d->samples);
}

/* ---- reading sample.json ------------------------------------------------- */

static const char *get_text(const cJSON *o, const char *name) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, name);
  return cJSON_IsString(item) ? item->valuestring : NULL;
}

static bool get_number(const cJSON *o, const char *name, double lo, double hi, double *out) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsNumber(item) || !(item->valuedouble >= lo && item->valuedouble <= hi)) return false;
  *out = item->valuedouble;
  return true;
}

static size_t find_name(const char (*names)[32], size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return i;
  return n;
}

/* The references an answer is scored against: prompt.json's "answers". */
typedef struct {
  const char *refs[RULER_MAX_ANSWERS]; /* (n) point into the prompt's tree */
  size_t n;
} EvalRefs;

/* Text from a file, escaped for a message (common/obc_text.h). */
typedef struct {
  char text[OBC_ESCAPED_SIZE(48)];
} Escaped;

static const char *escaped(Escaped *e, const char *text) {
  return obc_text_escape(e->text, sizeof e->text, text, true);
}

/* An answer, its score and correct flag recomputed from the references
 * (RULER's string_match_all, as the sample computed them): a file whose
 * flag or score contradicts its answer is refused, not believed. */
static int read_answer(const cJSON *o, const char *path, const EvalRefs *refs, EvalAnswer *a) {
  const char *answer = get_text(o, "answer");
  const cJSON *correct = cJSON_GetObjectItemCaseSensitive(o, "correct");
  if (!cJSON_IsObject(o) || !answer || !get_number(o, "score", 0, 1, &a->score) ||
      !cJSON_IsBool(correct))
    return obc_fail(OBC_EFORMAT, "%s: an answer needs \"answer\", \"score\" 0..1 and \"correct\"",
                    path);
  double score = eval_match_all(answer, refs->refs, refs->n);
  Escaped e;
  /* The score is k / n for k of n references found, printed by cJSON to
   * 17 significant digits: it reads back exactly. */
  if (a->score != score || cJSON_IsTrue(correct) != (score == 1.0))
    return obc_fail(OBC_EFORMAT,
                    "%s: the answer \"%s\" scores %g (%s) against prompt.json's answers, not the "
                    "recorded %g (%s)",
                    path, escaped(&e, answer), score, score == 1.0 ? "correct" : "wrong", a->score,
                    cJSON_IsTrue(correct) ? "correct" : "wrong");
  a->correct = score == 1.0;
  a->recall = NAN;
  a->answer = strdup(answer);
  return a->answer ? OBC_OK : obc_fail(OBC_ENOMEM, "%s: out of memory", path);
}

/* x as samples.csv prints it (9 significant digits): recalls equal but for
 * the rounding of their per-head sums tie in the AUC and the quartiles. */
static double printed(double x) {
  char text[32];
  snprintf(text, sizeof text, "%.9g", x);
  return strtod(text, NULL);
}

/* The kept count the plan's budget gives the policy of a row over its
 * candidates (evict_policy_budget_tokens, as the sample counted). */
static int planned_kept(const EvalConfig *c, size_t p, size_t b, size_t q, size_t candidates,
                        size_t *kept) {
  EvictPolicy policy = c->base;
  int rc = evict_policy_set_score(&policy, p < c->n_scores ? c->scores[p] : EVAL_ORACLE);
  if (!rc) rc = evict_policy_set_budget(&policy, c->budgets[b]);
  policy.protocol = c->protocols[q];
  if (!rc) rc = evict_policy_budget_tokens(&policy, candidates, kept);
  return rc;
}

static int read_row(const EvalData *d, const cJSON *o, const char *path, const EvalRefs *refs,
                    EvalSample *s) {
  const EvalConfig *c = d->config;
  const char *policy = get_text(o, "policy"), *budget = get_text(o, "budget");
  const char *protocol = get_text(o, "protocol");
  if (!policy || !budget || !protocol)
    return obc_fail(OBC_EFORMAT, "%s: a row needs \"policy\", \"budget\" and \"protocol\"", path);
  Escaped e1, e2, e3;
  char row[3 * sizeof e1.text + 8];
  snprintf(row, sizeof row, "%s %s %s", escaped(&e1, policy), escaped(&e2, budget),
           escaped(&e3, protocol));
  /* the name as recorded now: a folder of an earlier version may write a
   * method as preset:NAME */
  char name[64];
  evict_policy_canonical_score(policy, name, sizeof name);
  bool oracle = !strcmp(name, EVAL_ORACLE);
  size_t p = oracle ? c->n_scores : find_name(c->scores, c->n_scores, name);
  size_t b = find_name(c->budgets, c->n_budgets, budget), q = c->n_protocols;
  for (size_t i = 0; i < c->n_protocols; i++)
    if (!strcmp(evict_protocol_name(c->protocols[i]), protocol)) q = i;
  if ((!oracle && p == c->n_scores) || b == c->n_budgets || q == c->n_protocols)
    return obc_fail(OBC_EFORMAT, "%s: row %s is not in the eval's plan", path, row);
  EvalAnswer *a = &s->rows[row_index(d, q, p, b)];
  if (a->answer) return obc_fail(OBC_EFORMAT, "%s: row %s twice", path, row);
  double kept = 0, candidates = 0;
  size_t planned = 0;
  const cJSON *recall = cJSON_GetObjectItemCaseSensitive(o, "recall");
  int rc = read_answer(o, path, refs, a);
  if (!rc && (!get_number(o, "kept", 0, 1e12, &kept) ||
              !get_number(o, "candidates", 1, (double)s->tokens, &candidates) ||
              kept != floor(kept) || candidates != floor(candidates)))
    rc = obc_fail(OBC_EFORMAT,
                  "%s: row %s: \"candidates\" must be a count 1..%zu (the prompt's tokens) and "
                  "\"kept\" a count",
                  path, row, s->tokens);
  if (!rc && planned_kept(c, p, b, q, (size_t)candidates, &planned))
    rc = obc_fail_context(OBC_EFORMAT, "%s: row %s", path, row);
  if (!rc && (size_t)kept != planned)
    rc = obc_fail(OBC_EFORMAT, "%s: row %s: kept %zu of %zu candidates, where the budget keeps %zu",
                  path, row, (size_t)kept, (size_t)candidates, planned);
  /* Recall is against oracle@T's kept set: null for the oracle itself. */
  if (!rc &&
      (oracle ? !cJSON_IsNull(recall)
              : !(cJSON_IsNumber(recall) && recall->valuedouble >= 0 && recall->valuedouble <= 1)))
    rc = obc_fail(OBC_EFORMAT, "%s: row %s: \"recall\" must be %s", path, row,
                  oracle ? "null (oracle@T is the reference)" : "0..1");
  if (!rc) {
    a->kept = (size_t)kept;
    a->candidates = (size_t)candidates;
    a->recall = cJSON_IsNumber(recall) ? printed(recall->valuedouble) : NAN;
  }
  return rc;
}

/* The references of the sample's prompt.json, which must be the answers
 * its sample.json records; the prompt's tree is kept in *prompt (the
 * references point into it). */
static int read_refs(const char *dir, const SweepPlanCell *cell, uint64_t seed, const cJSON *sample,
                     cJSON **prompt, EvalRefs *refs) {
  char path[4096];
  snprintf(path, sizeof path, "%s/cells/%zu/prompt.json", dir, cell->id);
  int rc = json_file_read(path, prompt);
  if (rc) return rc;
  const cJSON *answers = cJSON_GetObjectItemCaseSensitive(*prompt, "answers");
  const cJSON *recorded = cJSON_GetObjectItemCaseSensitive(sample, "answers");
  const cJSON *task = cJSON_GetObjectItemCaseSensitive(*prompt, "task");
  double length = 0, prompt_seed = -1;
  refs->n = 0;
  if (!cJSON_IsArray(answers) || cJSON_GetArraySize(answers) < 1 ||
      cJSON_GetArraySize(answers) > RULER_MAX_ANSWERS || !cJSON_IsString(task) ||
      strcmp(task->valuestring, cell->task) || !get_number(*prompt, "length", 0, 1e12, &length) ||
      length != (double)cell->length || !get_number(*prompt, "seed", 0, 2e19, &prompt_seed) ||
      prompt_seed != (double)seed)
    return obc_fail(OBC_EFORMAT,
                    "%s: expected the prompt of %s (task, length, seed %" PRIu64
                    ") and 1..%d \"answers\"",
                    path, cell->name, seed, RULER_MAX_ANSWERS);
  const cJSON *item;
  cJSON_ArrayForEach(item, answers) {
    if (!cJSON_IsString(item))
      return obc_fail(OBC_EFORMAT, "%s: \"answers\" must be strings", path);
    refs->refs[refs->n++] = item->valuestring;
  }
  bool same = cJSON_IsArray(recorded) && (size_t)cJSON_GetArraySize(recorded) == refs->n;
  size_t i = 0;
  cJSON_ArrayForEach(item, recorded) {
    same = same && cJSON_IsString(item) && !strcmp(item->valuestring, refs->refs[i]);
    i++;
  }
  if (!same)
    return obc_fail(OBC_EFORMAT, "%s/cells/%zu/sample.json: \"answers\" are not prompt.json's", dir,
                    cell->id);
  return OBC_OK;
}

static int read_sample(EvalData *d, const char *dir, const SweepPlanCell *cell, EvalSample *s) {
  const EvalConfig *c = d->config;
  char path[4096];
  snprintf(path, sizeof path, "%s/cells/%zu/sample.json", dir, cell->id);
  cJSON *root = NULL, *prompt = NULL;
  int rc = json_file_read(path, &root);
  if (rc) return rc;
  s->cell = cell->id;
  s->task = find_name(c->tasks, c->n_tasks, cell->task);
  s->length = c->n_lengths;
  for (size_t l = 0; l < c->n_lengths; l++)
    if (c->lengths[l] == cell->length) s->length = l;
  s->sample = cell->sample;
  /* The plan's seed and the sample's index make its seed (eval/eval.h). */
  uint64_t seed = c->seed + cell->sample;
  char want_seed[32];
  snprintf(want_seed, sizeof want_seed, "%" PRIu64, seed);
  double tokens = 0, length = 0, index = 0;
  const char *task = get_text(root, "task"), *seed_text = get_text(root, "seed");
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "rows");
  size_t n_rows = c->n_protocols * d->n_policies * c->n_budgets;
  if (s->task == c->n_tasks || s->length == c->n_lengths)
    rc = obc_fail(OBC_EFORMAT, "%s: sample %s is not in the configuration", path, cell->name);
  if (!rc &&
      (!task || strcmp(task, cell->task) || !get_number(root, "length", 0, 1e12, &length) ||
       length != (double)cell->length || !get_number(root, "sample", 0, 1e12, &index) ||
       index != (double)cell->sample ||
       !get_number(root, "tokens", 1, (double)cell->length, &tokens) || tokens != floor(tokens) ||
       !cJSON_IsArray(rows) || (size_t)cJSON_GetArraySize(rows) != n_rows))
    rc = obc_fail(OBC_EFORMAT,
                  "%s: expected the task %s, length %zu and sample %zu of the plan, the tokens "
                  "(1..%zu) and %zu rows (one per policy, budget and protocol)",
                  path, cell->task, cell->length, cell->sample, cell->length, n_rows);
  if (!rc && (!seed_text || strcmp(seed_text, want_seed))) {
    Escaped e;
    rc = obc_fail(OBC_EFORMAT, "%s: seed \"%s\" is not the plan's %s (seed + sample %zu)", path,
                  seed_text ? escaped(&e, seed_text) : "(none)", want_seed, cell->sample);
  }
  EvalRefs refs;
  if (!rc) rc = read_refs(dir, cell, seed, root, &prompt, &refs);
  if (!rc) {
    snprintf(s->seed, sizeof s->seed, "%s", want_seed);
    s->tokens = (size_t)tokens;
    s->rows = obc_calloc(n_rows, sizeof *s->rows, "sample rows");
    if (!s->rows) rc = OBC_ENOMEM;
  }
  if (!rc) rc = read_answer(cJSON_GetObjectItemCaseSensitive(root, "full"), path, &refs, &s->full);
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) {
    if (rc) break;
    rc = read_row(d, row, path, &refs, s);
  }
  cJSON_Delete(prompt);
  cJSON_Delete(root);
  return rc;
}

/* The finished samples, in plan order; *done of plan->n_cells. */
static int read_samples(const char *dir, const SweepPlan *plan, double stale_after, EvalData *d,
                        SweepGridStatus *status) {
  memset(status, 0, sizeof *status);
  status->states = obc_calloc(plan->n_cells, sizeof *status->states, "sample states");
  status->details = obc_calloc(plan->n_cells, sizeof *status->details, "sample states");
  d->samples = obc_calloc(plan->n_cells, sizeof *d->samples, "samples");
  if (!status->states || !status->details || !d->samples) return OBC_ENOMEM;
  for (size_t i = 0; i < plan->n_cells; i++) {
    int rc = sweep_cell_state(dir, &plan->cells[i], stale_after, &status->states[i],
                              status->details[i], sizeof status->details[i]);
    if (!rc && status->states[i] == SWEEP_CELL_DONE)
      rc = read_sample(d, dir, &plan->cells[i], &d->samples[d->n_samples++]);
    if (rc) return rc;
    status->n_done += status->states[i] == SWEEP_CELL_DONE;
  }
  return OBC_OK;
}

/* ---- accuracy ------------------------------------------------------------ */

typedef struct {
  size_t n, correct;
  double recall, fraction;
  size_t n_recall;
} Tally;

static void tally_add(Tally *t, const EvalAnswer *a) {
  t->n++;
  t->correct += a->correct != 0;
  if (a->candidates) t->fraction += (double)a->kept / (double)a->candidates;
  if (!isnan(a->recall)) {
    t->recall += a->recall;
    t->n_recall++;
  }
}

/* Whether sample s counts for task index t (n_tasks: every task). */
static bool in_task(const EvalData *d, const EvalSample *s, size_t t, size_t l) {
  return s->length == l && (t == d->config->n_tasks || s->task == t);
}

static const char *task_name(const EvalConfig *c, size_t t) {
  return t < c->n_tasks ? c->tasks[t] : "all";
}

static const char *policy_name(const EvalConfig *c, size_t p) {
  return p < c->n_scores ? c->scores[p] : EVAL_ORACLE;
}

static void write_tally(FILE *fp, const Tally *t, const ScoreResult *score, bool full) {
  double low = 0, high = 1;
  eval_wilson(t->correct, t->n, WILSON_Z, &low, &high);
  double accuracy = t->n ? (double)t->correct / (double)t->n : NAN;
  fprintf(fp, "%zu,%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,", t->n, t->correct, accuracy, low, high,
          score->score, score->low, score->high);
  if (t->n_recall) fprintf(fp, "%.9g", t->recall / (double)t->n_recall);
  fputc(',', fp);
  if (!full && t->n) fprintf(fp, "%.9g", t->fraction / (double)t->n);
  fputc('\n', fp);
}

/* The answer of sample s in accuracy row r: 0 the full cache, else
 * 1 + row_index. */
static const EvalAnswer *row_answer(const EvalSample *s, size_t r) {
  return r ? &s->rows[r - 1] : &s->full;
}

static size_t score_index(const EvalData *d, size_t t, size_t l, size_t r) {
  size_t rows = 1 + d->config->n_protocols * d->n_policies * d->config->n_budgets;
  return (t * d->config->n_lengths + l) * rows + r;
}

/* RULER's score of every accuracy row, computed once for the file and the
 * printed table (each holds a bootstrap): the mean string_match_all of the
 * row's answers, over all tasks the mean of the task means, and its
 * percentile bootstrap interval, stratified by task over all tasks. */
static int compute_scores(EvalData *d) {
  const EvalConfig *c = d->config;
  size_t rows = 1 + c->n_protocols * d->n_policies * c->n_budgets;
  d->scores = obc_calloc((c->n_tasks + 1) * c->n_lengths * rows + 1, sizeof *d->scores, "scores");
  double *x = obc_malloc((d->n_samples + 1) * sizeof *x, "score values");
  size_t *task = obc_malloc((d->n_samples + 1) * sizeof *task, "score values");
  int rc = d->scores && x && task ? OBC_OK : OBC_ENOMEM;
  for (size_t t = 0; !rc && t <= c->n_tasks; t++)
    for (size_t l = 0; l < c->n_lengths; l++)
      for (size_t r = 0; r < rows; r++) {
        size_t n = 0;
        for (size_t i = 0; i < d->n_samples; i++)
          if (in_task(d, &d->samples[i], t, l)) {
            x[n] = row_answer(&d->samples[i], r)->score;
            task[n++] = d->samples[i].task;
          }
        ScoreResult *out = &d->scores[score_index(d, t, l, r)];
        out->score = eval_stratified_mean(x, task, n, c->n_tasks);
        eval_stratified_bootstrap(x, task, n, c->n_tasks, EVAL_BOOTSTRAP_RESAMPLES, 0.95,
                                  EVAL_BOOTSTRAP_SEED, &out->low, &out->high);
      }
  free(x);
  free(task);
  return rc;
}

static void write_accuracy(FILE *fp, const EvalData *d) {
  const EvalConfig *c = d->config;
  fprintf(fp,
          "task,length,policy,budget,protocol,n,correct,accuracy,ci_low,ci_high,score,"
          "score_ci_low,score_ci_high,recall,fraction\n");
  for (size_t t = 0; t <= c->n_tasks; t++)
    for (size_t l = 0; l < c->n_lengths; l++) {
      Tally full = {0};
      for (size_t i = 0; i < d->n_samples; i++)
        if (in_task(d, &d->samples[i], t, l)) tally_add(&full, &d->samples[i].full);
      fprintf(fp, "%s,%zu,%s,,,", task_name(c, t), c->lengths[l], EVAL_FULL);
      write_tally(fp, &full, &d->scores[score_index(d, t, l, 0)], true);
      for (size_t q = 0; q < c->n_protocols; q++)
        for (size_t p = 0; p < d->n_policies; p++)
          for (size_t b = 0; b < c->n_budgets; b++) {
            Tally x = {0};
            for (size_t i = 0; i < d->n_samples; i++)
              if (in_task(d, &d->samples[i], t, l))
                tally_add(&x, &d->samples[i].rows[row_index(d, q, p, b)]);
            fprintf(fp, "%s,%zu,%s,%s,%s,", task_name(c, t), c->lengths[l], policy_name(c, p),
                    c->budgets[b], evict_protocol_name(c->protocols[q]));
            write_tally(fp, &x, &d->scores[score_index(d, t, l, 1 + row_index(d, q, p, b))], false);
          }
    }
}

/* ---- paired tests -------------------------------------------------------- */

static int paired_result(const EvalData *d, size_t t, size_t l, const SweepPair *pair, size_t q,
                         size_t b, PairedResult *r) {
  memset(r, 0, sizeof *r);
  const EvalConfig *c = d->config;
  size_t n_max = d->n_samples + 1;
  double *x = obc_malloc(n_max * sizeof *x, "paired values");
  double *y = obc_malloc(n_max * sizeof *y, "paired values");
  double *sx = obc_malloc(n_max * sizeof *sx, "paired values"); /* scores */
  double *sy = obc_malloc(n_max * sizeof *sy, "paired values");
  double *dz = obc_malloc(n_max * sizeof *dz, "paired values"); /* sy - sx */
  size_t *task = obc_malloc(n_max * sizeof *task, "paired values");
  size_t *per_task = obc_calloc(c->n_tasks + 1, sizeof *per_task, "paired values");
  if (!x || !y || !sx || !sy || !dz || !task || !per_task) {
    free(x), free(y), free(sx), free(sy), free(dz), free(task), free(per_task);
    return OBC_ENOMEM;
  }
  for (size_t i = 0; i < d->n_samples; i++) {
    const EvalSample *s = &d->samples[i];
    if (!in_task(d, s, t, l)) continue;
    const EvalAnswer *ba = &s->rows[row_index(d, q, pair->baseline, b)];
    const EvalAnswer *pa = &s->rows[row_index(d, q, pair->paired, b)];
    int a = ba->correct, z = pa->correct;
    sx[r->n] = ba->score;
    sy[r->n] = pa->score;
    dz[r->n] = pa->score - ba->score;
    task[r->n] = s->task;
    per_task[s->task]++;
    x[r->n] = a;
    y[r->n++] = z;
    r->baseline += a != 0;
    r->paired += z != 0;
    r->baseline_only += a && !z;
    r->paired_only += z && !a;
  }
  r->difference = r->n ? ((double)r->paired - (double)r->baseline) / (double)r->n : NAN;
  eval_paired_bootstrap(x, y, r->n, EVAL_BOOTSTRAP_RESAMPLES, 0.95, EVAL_BOOTSTRAP_SEED, &r->low,
                        &r->high);
  r->p = eval_mcnemar_exact(r->baseline_only, r->paired_only);
  r->discordant = r->baseline_only + r->paired_only;
  r->mde80 =
      r->n ? eval_mcnemar_mde(r->n, (double)r->discordant / (double)r->n, EVAL_ALPHA, 0.8) : NAN;
  r->holm_p = NAN;
  r->verdict = "";
  /* RULER's score: the difference of the (task-averaged) means is the
   * task-averaged mean of the differences, resampled by task; the sign-flip
   * statistic weighs each difference by 1 / its task's count, the same
   * average up to the number of tasks. */
  r->baseline_score = eval_stratified_mean(sx, task, r->n, c->n_tasks);
  r->paired_score = eval_stratified_mean(sy, task, r->n, c->n_tasks);
  r->score_difference = eval_stratified_mean(dz, task, r->n, c->n_tasks);
  eval_stratified_bootstrap(dz, task, r->n, c->n_tasks, EVAL_BOOTSTRAP_RESAMPLES, 0.95,
                            EVAL_BOOTSTRAP_SEED, &r->score_low, &r->score_high);
  for (size_t i = 0; i < r->n; i++) dz[i] /= (double)per_task[task[i]];
  r->sign_flip_p =
      r->n ? eval_sign_flip_p(dz, r->n, EVAL_BOOTSTRAP_RESAMPLES, EVAL_BOOTSTRAP_SEED) : NAN;
  free(x), free(y), free(sx), free(sy), free(dz), free(task), free(per_task);
  return OBC_OK;
}

static size_t paired_index(const EvalData *d, size_t t, size_t l, size_t k, size_t q, size_t b) {
  const EvalConfig *c = d->config;
  return (((t * c->n_lengths + l) * d->n_pairs + k) * c->n_protocols + q) * c->n_budgets + b;
}

/* The claim of pooled pairing r: holds (Holm-adjusted p < alpha, a gain),
 * fails (significant loss, or an interval below EVAL_VERDICT_GAIN with the
 * MDE below it: a gain that large would have been seen), else undecided. */
static const char *verdict(const PairedResult *r) {
  if (r->holm_p < EVAL_ALPHA && r->difference > 0) return "holds";
  if (r->holm_p < EVAL_ALPHA && r->difference < 0) return "fails";
  if (r->high < EVAL_VERDICT_GAIN && r->mde80 < EVAL_VERDICT_GAIN) return "fails";
  return "undecided";
}

/* Holm's adjustment over the family of every pooled row (task "all": each
 * length, pairing, protocol and budget), and each one's verdict. */
static int pooled_verdicts(EvalData *d) {
  const EvalConfig *c = d->config;
  size_t first = paired_index(d, c->n_tasks, 0, 0, 0, 0);
  size_t n = c->n_lengths * d->n_pairs * c->n_protocols * c->n_budgets;
  double *p = obc_malloc(n * sizeof *p + 1, "Holm's adjustment");
  if (!p) return OBC_ENOMEM;
  for (size_t i = 0; i < n; i++) p[i] = d->paired[first + i].p;
  eval_holm(p, n);
  for (size_t i = 0; i < n; i++) {
    PairedResult *r = &d->paired[first + i];
    r->holm_p = r->n ? p[i] : NAN;
    r->verdict = r->n ? verdict(r) : "";
  }
  free(p);
  return OBC_OK;
}

/* Every pairing's result, computed once for the file and the printed table
 * (each holds a bootstrap). */
static int compute_paired(EvalData *d) {
  const EvalConfig *c = d->config;
  d->n_pairs = sweep_pairs_find(c->scores, c->n_scores, d->pairs, EVAL_MAX_SCORES);
  size_t n = (c->n_tasks + 1) * c->n_lengths * d->n_pairs * c->n_protocols * c->n_budgets;
  d->paired = obc_calloc(n + 1, sizeof *d->paired, "paired results");
  if (!d->paired) return OBC_ENOMEM;
  int rc = OBC_OK;
  for (size_t t = 0; t <= c->n_tasks; t++)
    for (size_t l = 0; l < c->n_lengths; l++)
      for (size_t k = 0; k < d->n_pairs; k++)
        for (size_t q = 0; q < c->n_protocols; q++)
          for (size_t b = 0; b < c->n_budgets && !rc; b++)
            rc = paired_result(d, t, l, &d->pairs[k], q, b,
                               &d->paired[paired_index(d, t, l, k, q, b)]);
  if (!rc) rc = pooled_verdicts(d);
  return rc;
}

static void write_paired(FILE *fp, const EvalData *d) {
  const EvalConfig *c = d->config;
  const SweepPair *pairs = d->pairs;
  fprintf(fp,
          "task,length,baseline,paired,budget,protocol,n,baseline_correct,paired_correct,"
          "baseline_only,paired_only,difference,ci_low,ci_high,mcnemar_p,baseline_score,"
          "paired_score,score_difference,score_ci_low,score_ci_high,sign_flip_p,discordant,"
          "mde80,holm_p,verdict\n");
  for (size_t t = 0; t <= c->n_tasks; t++)
    for (size_t l = 0; l < c->n_lengths; l++)
      for (size_t k = 0; k < d->n_pairs; k++)
        for (size_t q = 0; q < c->n_protocols; q++)
          for (size_t b = 0; b < c->n_budgets; b++) {
            const PairedResult r = d->paired[paired_index(d, t, l, k, q, b)];
            fprintf(fp,
                    "%s,%zu,%s,%s,%s,%s,%zu,%zu,%zu,%zu,%zu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
                    "%.9g,%.9g,%.9g,%zu,%.9g,%.9g,%s\n",
                    task_name(c, t), c->lengths[l], c->scores[pairs[k].baseline],
                    c->scores[pairs[k].paired], c->budgets[b], evict_protocol_name(c->protocols[q]),
                    r.n, r.baseline, r.paired, r.baseline_only, r.paired_only, r.difference, r.low,
                    r.high, r.p, r.baseline_score, r.paired_score, r.score_difference, r.score_low,
                    r.score_high, r.sign_flip_p, r.discordant, r.mde80, r.holm_p, r.verdict);
          }
}

/* ---- recall against correctness ------------------------------------------ */

typedef struct {
  double recall;
  unsigned char correct;
  size_t index; /* stable order among equal recalls */
} RecallPoint;

static int by_recall(const void *a, const void *b) {
  const RecallPoint *x = a, *y = b;
  if (x->recall != y->recall) return x->recall < y->recall ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The recall points of budget b (n_budgets: every budget): the rows of
 * every policy but oracle@T, every protocol, task and length. */
static size_t recall_points(const EvalData *d, size_t b, RecallPoint *points) {
  const EvalConfig *c = d->config;
  size_t n = 0;
  for (size_t i = 0; i < d->n_samples; i++)
    for (size_t q = 0; q < c->n_protocols; q++)
      for (size_t p = 0; p < c->n_scores; p++)
        for (size_t k = 0; k < c->n_budgets; k++) {
          const EvalAnswer *a = &d->samples[i].rows[row_index(d, q, p, k)];
          if ((b == c->n_budgets || k == b) && !isnan(a->recall))
            points[n] = (RecallPoint){a->recall, (unsigned char)(a->correct != 0), n}, n++;
        }
  return n;
}

static int write_recall(FILE *fp, const EvalData *d) {
  const EvalConfig *c = d->config;
  size_t cap = d->n_samples * c->n_protocols * c->n_scores * c->n_budgets + 1;
  RecallPoint *points = obc_malloc(cap * sizeof *points, "recall points");
  double *value = obc_malloc(cap * sizeof *value, "recall points");
  unsigned char *label = obc_malloc(cap, "recall points");
  if (!points || !value || !label) {
    free(points);
    free(value);
    free(label);
    return OBC_ENOMEM;
  }
  fprintf(fp, "budget,quartile,recall_low,recall_high,n,correct,accuracy,ci_low,ci_high,auc\n");
  for (size_t b = 0; b <= c->n_budgets; b++) {
    size_t n = recall_points(d, b, points);
    for (size_t i = 0; i < n; i++) value[i] = points[i].recall, label[i] = points[i].correct;
    double auc = eval_auc(value, label, n);
    qsort(points, n, sizeof *points, by_recall);
    for (size_t quartile = 0; quartile < 4 && n; quartile++) {
      size_t lo = quartile * n / 4, hi = (quartile + 1) * n / 4, correct = 0;
      if (hi == lo) continue;
      for (size_t i = lo; i < hi; i++) correct += points[i].correct;
      double low = 0, high = 1;
      eval_wilson(correct, hi - lo, WILSON_Z, &low, &high);
      fprintf(fp, "%s,%zu,%.9g,%.9g,%zu,%zu,%.9g,%.9g,%.9g,%.9g\n",
              b < c->n_budgets ? c->budgets[b] : "all", quartile + 1, points[lo].recall,
              points[hi - 1].recall, hi - lo, correct, (double)correct / (double)(hi - lo), low,
              high, auc);
    }
  }
  free(points);
  free(value);
  free(label);
  return OBC_OK;
}

/* recall_policy.csv: within one policy, budget and protocol (neither the
 * budget nor the method confounds it), how well recall separates the
 * right answers from the wrong ones: the AUC and the mean recall of each. */
static int write_recall_policy(FILE *fp, const EvalData *d) {
  const EvalConfig *c = d->config;
  double *value = obc_malloc((d->n_samples + 1) * sizeof *value, "recall points");
  unsigned char *label = obc_malloc(d->n_samples + 1, "recall points");
  if (!value || !label) {
    free(value);
    free(label);
    return OBC_ENOMEM;
  }
  fprintf(fp, "policy,budget,protocol,n,correct,auc,recall_right,recall_wrong\n");
  for (size_t q = 0; q < c->n_protocols; q++)
    for (size_t p = 0; p < c->n_scores; p++)
      for (size_t b = 0; b < c->n_budgets; b++) {
        size_t n = 0, right = 0;
        double sum_right = 0, sum_wrong = 0;
        for (size_t i = 0; i < d->n_samples; i++) {
          const EvalAnswer *a = &d->samples[i].rows[row_index(d, q, p, b)];
          if (isnan(a->recall)) continue;
          value[n] = a->recall;
          label[n++] = (unsigned char)(a->correct != 0);
          right += a->correct != 0;
          if (a->correct)
            sum_right += a->recall;
          else
            sum_wrong += a->recall;
        }
        fprintf(fp, "%s,%s,%s,%zu,%zu,", c->scores[p], c->budgets[b],
                evict_protocol_name(c->protocols[q]), n, right);
        double auc = eval_auc(value, label, n);
        if (!isnan(auc)) fprintf(fp, "%.9g", auc);
        fputc(',', fp);
        if (right) fprintf(fp, "%.9g", sum_right / (double)right);
        fputc(',', fp);
        if (n > right) fprintf(fp, "%.9g", sum_wrong / (double)(n - right));
        fputc('\n', fp);
      }
  free(value);
  free(label);
  return OBC_OK;
}

/* ---- samples.csv ----------------------------------------------------------- */

/* The answer, double-quoted, quotes doubled, newlines as \n. */
static void csv_answer(FILE *fp, const char *text) {
  fputc('"', fp);
  for (const char *p = text; *p; p++) {
    if (*p == '"')
      fputs("\"\"", fp);
    else if (*p == '\n')
      fputs("\\n", fp);
    else if (*p == '\r')
      fputs("\\r", fp);
    else
      fputc(*p, fp);
  }
  fputs("\"\n", fp);
}

static void sample_row(FILE *fp, const EvalData *d, const EvalSample *s, const char *policy,
                       const char *budget, const char *protocol, const EvalAnswer *a) {
  const EvalConfig *c = d->config;
  fprintf(fp, "%s,%zu,%zu,%s,%zu,%s,%s,%s,", c->tasks[s->task], c->lengths[s->length], s->sample,
          s->seed, s->tokens, policy, budget, protocol);
  if (budget[0]) fprintf(fp, "%zu", a->kept);
  fprintf(fp, ",%d,%.9g,", a->correct, a->score);
  if (!isnan(a->recall)) fprintf(fp, "%.9g", a->recall);
  fputc(',', fp);
  csv_answer(fp, a->answer);
}

static void write_samples(FILE *fp, const EvalData *d) {
  const EvalConfig *c = d->config;
  fprintf(fp,
          "task,length,sample,seed,tokens,policy,budget,protocol,kept,correct,score,recall,"
          "answer\n");
  for (size_t i = 0; i < d->n_samples; i++) {
    const EvalSample *s = &d->samples[i];
    sample_row(fp, d, s, EVAL_FULL, "", "", &s->full);
    for (size_t q = 0; q < c->n_protocols; q++)
      for (size_t p = 0; p < d->n_policies; p++)
        for (size_t b = 0; b < c->n_budgets; b++)
          sample_row(fp, d, s, policy_name(c, p), c->budgets[b],
                     evict_protocol_name(c->protocols[q]), &s->rows[row_index(d, q, p, b)]);
  }
}

/* prompts.jsonl: every sample's prompt.json on one line, in plan order. */
static int write_prompts(FILE *fp, const EvalData *d) {
  for (size_t i = 0; i < d->n_samples; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cells/%zu/prompt.json", d->dir, d->samples[i].cell);
    cJSON *root = NULL;
    int rc = json_file_read(path, &root);
    if (!rc && !cJSON_IsObject(root)) rc = obc_fail(OBC_EFORMAT, "%s: not a JSON object", path);
    char *line = rc ? NULL : cJSON_PrintUnformatted(root);
    if (!rc && !line) rc = obc_fail(OBC_ENOMEM, "%s: out of memory", path);
    if (!rc) fprintf(fp, "%s\n", line);
    free(line);
    cJSON_Delete(root);
    if (rc) return rc;
  }
  return OBC_OK;
}

/* ---- eval.json and the printed tables ------------------------------------- */

static cJSON *string_array(const char (*names)[32], size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
  return a;
}

static cJSON *eval_json(const EvalData *d, const SweepPlan *plan, size_t done) {
  const EvalConfig *c = d->config;
  cJSON *root = cJSON_CreateObject(), *lengths = cJSON_CreateArray();
  cJSON *protocols = cJSON_CreateArray(), *options = cJSON_CreateArray();
  char seed[32], hash[17];
  snprintf(seed, sizeof seed, "%" PRIu64, c->seed);
  snprintf(hash, sizeof hash, "%016" PRIx64, plan->model_hash);
  cJSON_AddStringToObject(root, "format", "obcache-eval/1");
  cJSON_AddStringToObject(root, "obcache_version", plan->version);
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "path", plan->model_path);
  cJSON_AddStringToObject(model, "fnv1a64", hash);
  cJSON_AddItemToObject(root, "tasks", string_array(c->tasks, c->n_tasks));
  for (size_t l = 0; l < c->n_lengths; l++)
    cJSON_AddItemToArray(lengths, cJSON_CreateNumber((double)c->lengths[l]));
  cJSON_AddItemToObject(root, "lengths", lengths);
  cJSON_AddNumberToObject(root, "samples_per_task", (double)c->samples);
  cJSON_AddStringToObject(root, "seed", seed);
  cJSON_AddItemToObject(root, "policies", string_array(c->scores, c->n_scores));
  cJSON_AddItemToObject(root, "budgets", string_array(c->budgets, c->n_budgets));
  cJSON_AddStringToObject(root, "budget_rule", evict_budget_rule_name(c->base.budget_rule));
  for (size_t q = 0; q < c->n_protocols; q++)
    cJSON_AddItemToArray(protocols, cJSON_CreateString(evict_protocol_name(c->protocols[q])));
  cJSON_AddItemToObject(root, "protocols", protocols);
  cJSON_AddStringToObject(root, "reference", EVAL_ORACLE);
  cJSON_AddStringToObject(root, "correct", "every answer found (RULER string_match_all = 1)");
  cJSON_AddStringToObject(root, "interval", "Wilson 95%");
  cJSON_AddStringToObject(root, "paired_test", "exact McNemar; paired bootstrap 95% interval");
  cJSON_AddStringToObject(root, "power",
                          "mde80: the accuracy difference the exact McNemar test detects with "
                          "80% power at alpha 0.05, unconditional over the discordant count "
                          "~ Bin(n, discordant / n)");
  cJSON_AddStringToObject(root, "multiple_testing",
                          "holm_p: Holm over every pooled row (task all) of paired.csv");
  cJSON_AddStringToObject(root, "verdict",
                          "holds: holm_p < 0.05 and a gain; fails: holm_p < 0.05 and a loss, or "
                          "ci_high < +0.02 with mde80 < 0.02; else undecided");
  cJSON_AddStringToObject(root, "headline", "score");
  cJSON_AddStringToObject(root, "score",
                          "RULER's: mean string_match_all (0..1; tables print x100), over all "
                          "tasks the mean of the task means");
  cJSON_AddStringToObject(root, "score_interval",
                          "percentile bootstrap 95%, stratified by task over all tasks");
  cJSON_AddStringToObject(root, "score_paired_test",
                          "sign-flip p (exact with <= 16 non-zero differences, else Monte Carlo "
                          "of bootstrap_resamples draws); paired bootstrap 95% interval");
  cJSON_AddNumberToObject(root, "bootstrap_resamples", EVAL_BOOTSTRAP_RESAMPLES);
  cJSON_AddNumberToObject(root, "bootstrap_seed", EVAL_BOOTSTRAP_SEED);
  cJSON *headline = cJSON_AddArrayToObject(root, "headline_rows");
  size_t rows = 1 + c->n_protocols * d->n_policies * c->n_budgets;
  for (size_t l = 0; l < c->n_lengths; l++)
    for (size_t r = 0; r < rows; r++) {
      /* r - 1 = row_index(q, p, b) = (q * n_policies + p) * n_budgets + b */
      size_t b = r ? (r - 1) % c->n_budgets : 0, p = r ? (r - 1) / c->n_budgets % d->n_policies : 0;
      size_t q = r ? (r - 1) / c->n_budgets / d->n_policies : 0;
      const ScoreResult *sr = &d->scores[score_index(d, c->n_tasks, l, r)];
      Tally x = {0};
      for (size_t i = 0; i < d->n_samples; i++)
        if (in_task(d, &d->samples[i], c->n_tasks, l)) tally_add(&x, row_answer(&d->samples[i], r));
      cJSON *o = cJSON_CreateObject();
      cJSON_AddNumberToObject(o, "length", (double)c->lengths[l]);
      cJSON_AddStringToObject(o, "policy", r ? policy_name(c, p) : EVAL_FULL);
      cJSON_AddStringToObject(o, "budget", r ? c->budgets[b] : "");
      cJSON_AddStringToObject(o, "protocol", r ? evict_protocol_name(c->protocols[q]) : "");
      cJSON_AddNumberToObject(o, "n", (double)x.n);
      if (x.n) {
        cJSON_AddNumberToObject(o, "score", sr->score);
        cJSON_AddNumberToObject(o, "score_ci_low", sr->low);
        cJSON_AddNumberToObject(o, "score_ci_high", sr->high);
        cJSON_AddNumberToObject(o, "accuracy", (double)x.correct / (double)x.n);
      }
      cJSON_AddItemToArray(headline, o);
    }
  for (size_t i = 0; i < plan->n_options; i++)
    cJSON_AddItemToArray(options, cJSON_CreateString(plan->options[i]));
  cJSON_AddItemToObject(root, "options", options);
  cJSON_AddNumberToObject(root, "samples_done", (double)done);
  cJSON_AddNumberToObject(root, "samples_planned", (double)plan->n_cells);
  return root;
}

/* "62.5 [41.0,79.2] 0.60": RULER's score x100 with its interval, then the
 * all-or-nothing accuracy of the same answers. */
static void score_text(const ScoreResult *score, const Tally *t, char *out, size_t size) {
  if (t->n)
    snprintf(out, size, "%.1f [%.1f,%.1f] %.2f", 100 * score->score, 100 * score->low,
             100 * score->high, (double)t->correct / (double)t->n);
  else
    snprintf(out, size, "-");
}

static void print_tables(const EvalData *d) {
  const EvalConfig *c = d->config;
  char text[64];
  for (size_t l = 0; l < c->n_lengths; l++) {
    printf(
        "\nRULER score at %zu tokens, all tasks (mean string_match_all x100, mean of the "
        "task means) [bootstrap 95%%], then accuracy (every answer found); budget rule %s\n%-28s",
        c->lengths[l], evict_budget_rule_name(c->base.budget_rule), "policy");
    for (size_t b = 0; b < c->n_budgets; b++) printf(" %22s", c->budgets[b]);
    Tally full = {0};
    for (size_t i = 0; i < d->n_samples; i++)
      if (in_task(d, &d->samples[i], c->n_tasks, l)) tally_add(&full, &d->samples[i].full);
    score_text(&d->scores[score_index(d, c->n_tasks, l, 0)], &full, text, sizeof text);
    printf("\n%-28s %22s\n", "full cache", text);
    for (size_t q = 0; q < c->n_protocols; q++)
      for (size_t p = 0; p < d->n_policies; p++) {
        char label[64];
        snprintf(label, sizeof label, "%s%s%s", policy_name(c, p), c->n_protocols > 1 ? ":" : "",
                 c->n_protocols > 1 ? evict_protocol_name(c->protocols[q]) : "");
        printf("%-28s", label);
        for (size_t b = 0; b < c->n_budgets; b++) {
          Tally x = {0};
          for (size_t i = 0; i < d->n_samples; i++)
            if (in_task(d, &d->samples[i], c->n_tasks, l))
              tally_add(&x, &d->samples[i].rows[row_index(d, q, p, b)]);
          score_text(&d->scores[score_index(d, c->n_tasks, l, 1 + row_index(d, q, p, b))], &x, text,
                     sizeof text);
          printf(" %22s", text);
        }
        printf("\n");
      }
  }
  if (!d->n_pairs) return;
  printf(
      "\nbaseline vs baseline + OBCache, all tasks: RULER score difference x100 [paired "
      "bootstrap 95%%] sign-flip p; accuracy difference x100, exact McNemar p and its Holm "
      "adjustment over these rows; discordant pairs of n and the accuracy difference x100 "
      "detectable with 80%% power at alpha 0.05 (MDE); the claim\n");
  for (size_t l = 0; l < c->n_lengths; l++)
    for (size_t k = 0; k < d->n_pairs; k++)
      for (size_t q = 0; q < c->n_protocols; q++)
        for (size_t b = 0; b < c->n_budgets; b++) {
          const PairedResult r = d->paired[paired_index(d, c->n_tasks, l, k, q, b)];
          printf(
              "%zu %-9s %-28s %-5s %+5.1f [%+5.1f,%+5.1f] p=%-7.2g %+5.1f p=%-7.2g holm=%-7.2g "
              "%3zu of %zu, MDE %4.1f  %s\n",
              c->lengths[l], evict_protocol_name(c->protocols[q]), c->scores[d->pairs[k].paired],
              c->budgets[b], 100 * r.score_difference, 100 * r.score_low, 100 * r.score_high,
              r.sign_flip_p, 100 * r.difference, r.p, r.holm_p, r.discordant, r.n, 100 * r.mde80,
              r.verdict);
        }
}

int eval_merge(const char *dir, const SweepPlan *plan, const EvalConfig *config,
               double stale_after) {
  EvalData d = {.config = config, .dir = dir, .n_policies = config->n_scores + 1};
  SweepGridStatus status;
  int rc = read_samples(dir, plan, stale_after, &d, &status);
  if (!rc) rc = compute_scores(&d);
  if (!rc) rc = compute_paired(&d);
  ObcOutputSet set;
  FILE *fp = NULL;
  bool begun = false;
  if (!rc) begun = !(rc = obc_output_begin(&set, dir));
  if (!rc && !(rc = obc_output_open(&set, "accuracy.csv", &fp))) {
    write_accuracy(fp, &d);
    rc = obc_output_close(&set, fp);
  }
  if (!rc && !(rc = obc_output_open(&set, "paired.csv", &fp))) {
    write_paired(fp, &d);
    rc = obc_output_close(&set, fp);
  }
  if (!rc && !(rc = obc_output_open(&set, "recall.csv", &fp))) {
    rc = write_recall(fp, &d);
    int close = obc_output_close(&set, fp);
    rc = rc ? rc : close;
  }
  if (!rc && !(rc = obc_output_open(&set, "recall_policy.csv", &fp))) {
    rc = write_recall_policy(fp, &d);
    int close = obc_output_close(&set, fp);
    rc = rc ? rc : close;
  }
  if (!rc && !(rc = obc_output_open(&set, "samples.csv", &fp))) {
    write_samples(fp, &d);
    rc = obc_output_close(&set, fp);
  }
  if (!rc && !(rc = obc_output_open(&set, "prompts.jsonl", &fp))) {
    rc = write_prompts(fp, &d);
    int close = obc_output_close(&set, fp);
    rc = rc ? rc : close;
  }
  if (!rc) rc = obc_output_json(&set, "eval.json", eval_json(&d, plan, status.n_done));
  if (begun) rc = obc_output_end(&set, rc);
  if (!rc) print_tables(&d);
  if (!rc) {
    for (size_t i = 0; i < plan->n_cells; i++)
      if (status.states[i] != SWEEP_CELL_DONE)
        printf("sample %zu %s: %s%s%s\n", i, plan->cells[i].name,
               sweep_cell_state_name(status.states[i]), *status.details[i] ? ": " : "",
               status.details[i]);
    if (status.n_done < plan->n_cells)
      rc = obc_fail(OBC_EINVAL,
                    "%s: %zu of %zu samples are not finished (listed above); the CSVs hold the "
                    "%zu finished ones",
                    dir, plan->n_cells - status.n_done, plan->n_cells, status.n_done);
  }
  data_free(&d);
  sweep_grid_status_free(&status);
  return rc;
}

/* The first pair count from normal (Connor's), in steps of about normal /
 * 256, at which the exact test's power reaches 80%; 8 normal at most. */
static size_t exact_pairs(size_t normal, double psi, double delta) {
  size_t step = normal / 256 ? normal / 256 : 1, n = normal;
  while (n < 8 * normal && eval_mcnemar_power(n, psi, delta, EVAL_ALPHA) < 0.8) n += step;
  return n;
}

int eval_samples_needed(const char *dir, const SweepPlan *plan, const EvalConfig *config,
                        double stale_after, double delta) {
  EvalData d = {.config = config, .dir = dir, .n_policies = config->n_scores + 1};
  SweepGridStatus status;
  int rc = read_samples(dir, plan, stale_after, &d, &status);
  if (!rc) rc = compute_paired(&d);
  if (!rc && !d.n_pairs)
    rc = obc_fail(OBC_EINVAL, "%s: the plan has no pairing (X and X+obc_S)", dir);
  if (!rc && !status.n_done) rc = obc_fail(OBC_EINVAL, "%s: no finished sample to plan from", dir);
  const EvalConfig *c = config;
  if (!rc)
    printf(
        "samples for an accuracy difference of %.1f points, from the discordance of %zu "
        "finished samples of %s (exact McNemar, 80%% power, alpha 0.05; pairs by Connor's "
        "normal approximation, then the first count from there, in steps of 1/256 of it, at which "
        "the exact test reaches 80%%; per task: the exact count over the tasks)\n"
        "%-6s %-9s %-28s %-6s %6s %11s %8s %8s %9s\n",
        100 * delta, status.n_done, dir, "length", "protocol", "paired", "budget", "pilot",
        "discordance", "normal", "exact", "per task");
  for (size_t l = 0; l < c->n_lengths && !rc; l++)
    for (size_t k = 0; k < d.n_pairs; k++)
      for (size_t q = 0; q < c->n_protocols; q++)
        for (size_t b = 0; b < c->n_budgets; b++) {
          const PairedResult *r = &d.paired[paired_index(&d, c->n_tasks, l, k, q, b)];
          double psi = r->n ? (double)r->discordant / (double)r->n : NAN;
          double pairs = eval_mcnemar_samples_normal(psi, delta);
          printf("%-6zu %-9s %-28s %-6s %6zu %11.3f ", c->lengths[l],
                 evict_protocol_name(c->protocols[q]), c->scores[d.pairs[k].paired], c->budgets[b],
                 r->n, psi);
          if (isnan(pairs) || pairs > 1e7) {
            printf("%8s %8s %9s  (%s)\n", "-", "-", "-",
                   psi > 0 ? "the difference exceeds the discordance"
                           : "no discordant pair in the pilot");
            continue;
          }
          size_t normal = (size_t)ceil(pairs), need = exact_pairs(normal, psi, delta);
          printf("%8zu %8zu %9zu\n", normal, need, (need + c->n_tasks - 1) / c->n_tasks);
        }
  data_free(&d);
  sweep_grid_status_free(&status);
  return rc;
}
