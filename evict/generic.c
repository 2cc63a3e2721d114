/* The generic score sources (evict/generic.h): scores from the analyser's
 * window sweep, the oracle, a seeded hash or the position itself, and
 * their selection with sinks, a recent window and a uniform or AdaKV-style
 * budget. Selection reuses scores/select.h, so ties break exactly as in
 * the recall figures. */
#include "evict/generic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "evict/source.h"
#include "oracle/decode_attention.h"
#include "oracle/oracle.h"
#include "scores/score_head.h"
#include "scores/scores.h"
#include "scores/select.h"

/* ==== Counts ==== */

/* k = evict_budget_count, checked to be 1..n; fixed: the positions the
 * knobs keep outright beside the scored ones. */
static int checked_count(const EvictPolicy *p, size_t n, size_t fixed, bool sinks_fill,
                         size_t *tokens) {
  size_t k = 0;
  int rc = evict_budget_count(p, n, &k);
  if (rc) return rc;
  if (k == 0 || k > n)
    return obc_fail(OBC_EINVAL, "--budget %s: %zu tokens (expected 1..%zu, the %s)", p->budget_text,
                    k, n,
                    p->protocol == EVICT_PROTOCOL_AWARE ? "prompt positions"
                                                        : "context positions before the question");
  if (fixed > k || (sinks_fill && p->sinks >= k && k < n))
    return obc_fail(OBC_EINVAL,
                    "--budget %s: %zu tokens leave no room beside %zu sinks and a "
                    "recent window of %zu (hint: a larger budget or fewer --sinks/--recent)",
                    p->budget_text, k, p->sinks, p->recent);
  *tokens = k;
  return OBC_OK;
}

int evict_generic_count(const EvictPolicy *p, size_t n, size_t *k) {
  return checked_count(p, n, p->sinks + p->recent, false, k);
}

int evict_recency_count(const EvictPolicy *p, size_t n, size_t *k) {
  return checked_count(p, n, p->sinks, true, k);
}

/* ==== Scores ==== */

/* A uniform number in [0, 1) from (seed, layer, head, position): the
 * splitmix64 finaliser, so every run and thread count agrees. */
static double seeded_uniform(uint64_t seed, size_t layer, size_t head, size_t position) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + layer * 0xBF58476D1CE4E5B9ULL +
               head * 0x94D049BB133111EBULL + position + 1;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return (double)(x >> 11) / 9007199254740992.0;
}

int evict_random_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                        size_t *window) {
  const TraceMeta *meta = trace_meta(reader);
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads;
  for (size_t l = 0; l < L; l++)
    for (size_t g = 0; g < G; g++)
      for (size_t q = 0; q < n; q++) scores[(l * G + g) * n + q] = seeded_uniform(p->seed, l, g, q);
  *window = 0;
  return OBC_OK;
}

int evict_recency_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                         size_t *window) {
  (void)p;
  const TraceMeta *meta = trace_meta(reader);
  size_t heads = meta->model.n_layers * meta->model.n_kv_heads;
  for (size_t i = 0; i < heads; i++) /* the most recent score highest */
    for (size_t q = 0; q < n; q++) scores[i * n + q] = (double)q;
  *window = 0;
  return OBC_OK;
}

/* The scores of one head from its captured rows into out (n). */
typedef int (*HeadScore)(const EvictPolicy *p, ScoreHead *h, size_t n, const size_t steps[2],
                         double *scratch, double *out, size_t window);

/* Runs score on every (layer, KV head) of the trace. */
static int every_head(TraceReader *reader, const EvictPolicy *p, size_t n, const size_t steps[2],
                      size_t scratch_count, HeadScore score, size_t window, double *scores) {
  const TraceMeta *meta = trace_meta(reader);
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads;
  double *scratch = obc_malloc((scratch_count + 1) * sizeof *scratch, "score scratch");
  ScoreHead h;
  memset(&h, 0, sizeof h);
  int rc = scratch ? score_head_alloc(&h, reader) : OBC_ENOMEM;
  for (size_t l = 0; l < L && !rc; l++)
    for (size_t g = 0; g < G && !rc; g++) {
      rc = score_head_read(&h, reader, l, g);
      if (!rc) rc = score(p, &h, n, steps, scratch, scores + (l * G + g) * n, window);
      if (rc) obc_fail_context(rc, "%s: layer %zu, KV head %zu", trace_path(reader), l, g);
    }
  score_head_free(&h);
  free(scratch);
  return rc;
}

static int quantity_head(const EvictPolicy *p, ScoreHead *h, size_t n, const size_t steps[2],
                         double *sweep, double *out, size_t window) {
  (void)steps;
  OracleHead data = h->data;
  data.n_prompt = n; /* the window ends at the candidates' end */
  ScoreOptions options;
  score_options_default(&options);
  int rc = score_window_sweep(&data, &window, 1, &options, sweep);
  if (!rc) memcpy(out, sweep + (size_t)p->source->quantity * n, n * sizeof *out);
  return rc;
}

int evict_quantity_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                          size_t *window_out) {
  const TraceMeta *meta = trace_meta(reader);
  size_t captured = evict_rows_ending_at(meta, n);
  if (captured == 0)
    return obc_fail(OBC_EINVAL,
                    "%s: no captured prompt rows end at position %zu (the %s window needs "
                    "them; hint: capture with more --rows%s)",
                    trace_path(reader), n - 1, evict_protocol_name(p->protocol),
                    p->protocol == EVICT_PROTOCOL_AWARE ? "" : ", or --protocol aware");
  size_t window =
      p->window ? p->window : (captured < EVICT_DEFAULT_WINDOW ? captured : EVICT_DEFAULT_WINDOW);
  if (window > captured)
    return obc_fail(OBC_EINVAL,
                    "%s: --window %zu (expected 1..%zu, the captured rows ending "
                    "at position %zu)",
                    trace_path(reader), window, captured, n - 1);
  *window_out = window;
  return every_head(reader, p, n, NULL, OBC_Q_COUNT * n, quantity_head, window, scores);
}

static int oracle_head(const EvictPolicy *p, ScoreHead *h, size_t n, const size_t steps[2],
                       double *errors, double *out, size_t window) {
  (void)p, (void)window;
  int rc = oracle_eviction_error(&h->data, steps[0], steps[1], OBC_PRECISION_DOUBLE, errors);
  if (!rc) memcpy(out, errors, n * sizeof *out);
  return rc;
}

static int decode_attn_head(const EvictPolicy *p, ScoreHead *h, size_t n, const size_t steps[2],
                            double *mass, double *out, size_t window) {
  (void)p, (void)window;
  int rc = oracle_decode_attention(&h->data, steps[0], steps[1], OBC_PRECISION_DOUBLE, mass);
  if (!rc) memcpy(out, mass, n * sizeof *out);
  return rc;
}

/* oracle and decode_attn: the policy's decode steps, resolved on the trace. */
static int decode_scores(TraceReader *reader, const EvictPolicy *p, size_t n, HeadScore score,
                         double *scores, size_t *window) {
  const TraceMeta *meta = trace_meta(reader);
  size_t steps[2] = {0, 0}, first = 0; /* first step, count */
  OracleSteps wanted = evict_policy_steps(p);
  int rc = oracle_steps_resolve(&wanted, trace_meta_decode_rows(meta, &first), trace_path(reader),
                                &steps[0], &steps[1]);
  if (rc) return rc;
  *window = 0;
  return every_head(reader, p, n, steps, meta->n_prompt, score, 0, scores);
}

int evict_oracle_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                        size_t *window) {
  return decode_scores(reader, p, n, oracle_head, scores, window);
}

int evict_decode_attn_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                             size_t *window) {
  return decode_scores(reader, p, n, decode_attn_head, scores, window);
}

/* ==== Kept sets ==== */

/* Sinks, recent window and the best `extra` of the middle: marks keep (n)
 * for candidates [0, n) of one head. ranked: scratch (n). */
static void select_head(const double *scores, size_t n, size_t sinks, size_t recent, size_t extra,
                        unsigned char *keep, size_t *ranked) {
  for (size_t p = 0; p < sinks && p < n; p++) keep[p] = 1;
  for (size_t p = n - recent; p < n; p++) keep[p] = 1;
  size_t middle = n - sinks - recent;
  if (extra > middle) extra = middle;
  select_rank_top(scores + sinks, middle, extra, ranked);
  for (size_t i = 0; i < extra; i++) keep[sinks + ranked[i]] = 1;
}

/* Recency with protected positions: the sinks, the protected candidates,
 * then the most recent others until the head keeps k. */
static void select_recency_protected(size_t n, size_t sinks, size_t k, const unsigned char *protect,
                                     unsigned char *keep) {
  size_t count = 0;
  for (size_t q = 0; q < n; q++)
    if (q < sinks || protect[q]) keep[q] = 1, count++;
  for (size_t q = n; q-- > 0 && count < k;)
    if (!keep[q]) keep[q] = 1, count++;
}

/* Both keeps: recency (its recent window the rest of the budget after the
 * sinks, protected positions taking their share first) or the scored
 * selection. */
static int keep_generic(const EvictPolicy *p, const double *scores, size_t n_layers,
                        size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
                        bool recency, EvictKeepSet *out) {
  memset(out, 0, sizeof *out);
  size_t k = 0;
  int rc = p->source->count(p, n, &k);
  if (rc) return rc;
  size_t sinks = p->sinks, recent = recency ? 0 : p->recent;
  if (recency) recent = k - (sinks < k ? sinks : k);
  if (sinks > k) sinks = k;
  size_t G = n_kv_heads;
  /* Protected candidates not already kept as sinks (or, scored, as recent):
   * they take their share of the budget first. */
  size_t n_protected = 0;
  for (size_t q = 0; protect && q < n; q++)
    n_protected += protect[q] && q >= sinks && (recency || q < n - recent);
  if (sinks + (recency ? 0 : recent) + n_protected > k)
    return obc_fail(OBC_EINVAL,
                    "--budget %s: %zu tokens leave no room for the %zu protected positions "
                    "(--protect, inside the budget) beside %zu sinks and a recent window of "
                    "%zu (hint: a larger budget)",
                    p->budget_text, k, n_protected, sinks, recency ? 0 : recent);
  out->n_layers = n_layers;
  out->n_kv_heads = G;
  out->n_prompt = n_prompt;
  out->n_candidates = n;
  out->budget = k;
  out->policy = *p;
  evict_policy_score_name(p, out->policy.score, sizeof out->policy.score);
  out->keep = obc_calloc(n_layers * G * n_prompt, 1, "kept positions");
  out->n_kept = obc_calloc(n_layers * G, sizeof(size_t), "kept counts");
  size_t *ranked = obc_malloc((n + 1) * sizeof *ranked, "selection ranking");
  double *boosted = protect ? obc_malloc((n + 1) * sizeof *boosted, "protected scores") : NULL;
  bool adakv = p->allocation == EVICT_ALLOC_ADAKV;
  EvictCandidate *pool = adakv ? obc_malloc((G * n + 1) * sizeof *pool, "AdaKV candidates") : NULL;
  if (!out->keep || !out->n_kept || !ranked || (protect && !boosted) || (adakv && !pool)) {
    free(ranked);
    free(boosted);
    free(pool);
    evict_keep_set_free(out);
    return OBC_ENOMEM;
  }
  size_t per_head = k;
  if (adakv) {
    per_head = (size_t)ceil(p->adakv_floor * (double)k);
    if (per_head < sinks + recent + n_protected) per_head = sinks + recent + n_protected;
    if (per_head > k) per_head = k;
  }
  for (size_t l = 0; l < n_layers; l++) {
    for (size_t g = 0; g < G; g++) {
      size_t head = l * G + g;
      unsigned char *keep = out->keep + head * n_prompt;
      const double *head_scores = scores + head * n;
      if (protect && recency) {
        select_recency_protected(n, sinks, per_head, protect, keep);
      } else {
        if (protect) { /* protected candidates rank first (kvpress: score max + 1) */
          for (size_t q = 0; q < n; q++) boosted[q] = protect[q] ? INFINITY : head_scores[q];
          head_scores = boosted;
        }
        select_head(head_scores, n, sinks, recent, per_head - sinks - recent, keep, ranked);
      }
      for (size_t q = n; q < n_prompt; q++) keep[q] = 1; /* after the candidates: always kept */
    }
    if (adakv && per_head < k)
      evict_keep_layer_best(scores + l * G * n, G, n, n_prompt, (k - per_head) * G,
                            out->keep + l * G * n_prompt, pool);
    evict_keep_count_layer(out, l);
  }
  free(ranked);
  free(boosted);
  free(pool);
  return OBC_OK;
}

int evict_generic_keep(const EvictPolicy *p, const double *scores, size_t n_layers,
                       size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
                       EvictKeepSet *out) {
  return keep_generic(p, scores, n_layers, n_kv_heads, n_prompt, n, protect, false, out);
}

int evict_recency_keep(const EvictPolicy *p, const double *scores, size_t n_layers,
                       size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
                       EvictKeepSet *out) {
  return keep_generic(p, scores, n_layers, n_kv_heads, n_prompt, n, protect, true, out);
}
