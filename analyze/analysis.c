/* The streaming driver of `obcache analyze`; see analysis.h. For each
 * (layer, KV head) in order: read K/V and the group's Q/O/lse, convert to
 * double, run the window sweep and the oracle, then reduce the per-token
 * arrays to recall, Spearman, needle retention and bias before moving on.
 * The reductions run in parallel over (quantity, window) tasks that each own
 * their output slots, and heads are added in a fixed order, so the results do
 * not depend on the thread count. */
#include "analyze/analysis.h"

#include <assert.h>
#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#endif
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "scores/score_head.h"
#include "analyze/bias.h"
#include "scores/scores_file.h"
#include "scores/select.h"
#include "scores/stats.h"
#include "common/obc_error.h"
#include "common/obc_time.h"

/* Buffers for one (layer, KV head), reused across heads. */
typedef struct {
  ScoreHead head; /* the (layer, KV head) being analysed, in doubles */
  double *sweep;  /* (n_windows, OBC_Q_COUNT, n_prompt) */
  double *ranks;  /* (n_windows, OBC_Q_COUNT, n_prompt) average ranks */
  /* Per oracle reference (result->references order), NULL past n_references: */
  double *oracle[OBC_ANALYSIS_MAX_REFERENCES];         /* (n_prompt) errors */
  double *oracle_ranks[OBC_ANALYSIS_MAX_REFERENCES];   /* (n_prompt) average ranks */
  size_t *oracle_rank_of[OBC_ANALYSIS_MAX_REFERENCES]; /* (n_prompt) index in its top max_k */
  size_t *oracle_ranked;                               /* (max_k) scratch */
} HeadBuffers;

/* Per-thread scratch of the reduction tasks. */
typedef struct {
  size_t n_threads;
  size_t *ranked;       /* (n_threads, max_k) */
  size_t *selected;     /* (n_threads, max_k) */
  double *share;        /* (n_threads, buckets) */
  StatsRankPair *pairs; /* (n_threads, 2 n_prompt) */
} ThreadScratch;

size_t analysis_recall_index(const AnalysisResult *result, const AnalysisConfig *config,
                             size_t head, size_t q, size_t w, size_t r, size_t k) {
  return (((head * OBC_Q_COUNT + q) * config->n_windows + w) * result->n_recents + r) *
             config->n_topk +
         k;
}

static size_t bias_share_index(const AnalysisResult *result, const AnalysisConfig *config, size_t q,
                               size_t w, size_t r, size_t k) {
  return (((q * config->n_windows + w) * result->n_recents + r) * config->n_topk + k) *
         config->buckets;
}

size_t analysis_file_recall_index(const AnalysisResult *result, const AnalysisConfig *config,
                                  size_t ref, size_t head, size_t f, size_t r, size_t k) {
  return (((ref * result->n_heads + head) * config->n_file_scores + f) * result->n_recents + r) *
             config->n_topk +
         k;
}

size_t analysis_recall_stride(const AnalysisResult *result, const AnalysisConfig *config) {
  return result->n_heads * OBC_Q_COUNT * config->n_windows * result->n_recents * config->n_topk;
}

const char *analysis_reference_name(const AnalysisResult *result, int reference) {
  if (reference < 0) return result->reference_names[-1 - reference];
  return score_quantity_name((ScoreQuantity)reference);
}

void analysis_result_free(AnalysisResult *result) {
  free(result->recall);
  free(result->file_recall);
  free(result->needle);
  free(result->pairs);
  free(result->spearman);
  free(result->bias_share);
  free(result->bias_norm);
  free(result->taylor);
  memset(result, 0, sizeof *result);
}

static void head_buffers_free(HeadBuffers *b) {
  score_head_free(&b->head);
  free(b->sweep), free(b->ranks), free(b->oracle_ranked);
  for (size_t i = 0; i < OBC_ANALYSIS_MAX_REFERENCES; i++)
    free(b->oracle[i]), free(b->oracle_ranks[i]), free(b->oracle_rank_of[i]);
  memset(b, 0, sizeof *b);
}

static int head_buffers_alloc(HeadBuffers *b, const TraceReader *reader, size_t n_windows,
                              size_t max_k, size_t n_references) {
  const TraceMeta *meta = trace_meta(reader);
  memset(b, 0, sizeof *b);
  size_t s = meta->n_prompt, per_window = n_windows * OBC_Q_COUNT * s;
  int rc = score_head_alloc(&b->head, reader);
  if (rc) return rc;
  b->sweep = obc_malloc(per_window * sizeof(double), "window sweep");
  b->ranks = obc_malloc(per_window * sizeof(double), "score ranks");
  b->oracle_ranked = obc_malloc(max_k * sizeof(size_t), "oracle ranking");
  bool ok = b->sweep && b->ranks && b->oracle_ranked;
  for (size_t i = 0; i < n_references && ok; i++) {
    b->oracle[i] = obc_malloc(s * sizeof(double), "oracle errors");
    b->oracle_ranks[i] = obc_malloc(s * sizeof(double), "oracle ranks");
    b->oracle_rank_of[i] = obc_malloc(s * sizeof(size_t), "oracle rank index");
    ok = b->oracle[i] && b->oracle_ranks[i] && b->oracle_rank_of[i];
  }
  if (!ok) {
    head_buffers_free(b);
    return OBC_ENOMEM;
  }
  return OBC_OK;
}

static void thread_scratch_free(ThreadScratch *t) {
  free(t->ranked), free(t->selected), free(t->share), free(t->pairs);
  memset(t, 0, sizeof *t);
}

static int thread_scratch_alloc(ThreadScratch *t, size_t max_k, size_t buckets, size_t n_prompt) {
  memset(t, 0, sizeof *t);
  t->n_threads = (size_t)omp_get_max_threads();
  t->ranked = obc_malloc(t->n_threads * max_k * sizeof(size_t), "selection ranking");
  t->selected = obc_malloc(t->n_threads * max_k * sizeof(size_t), "selection");
  t->share = obc_malloc(t->n_threads * buckets * sizeof(double), "bucket shares");
  t->pairs = obc_malloc(t->n_threads * 2 * n_prompt * sizeof(StatsRankPair), "rank sort");
  if (!t->ranked || !t->selected || !t->share || !t->pairs) {
    thread_scratch_free(t);
    return OBC_ENOMEM;
  }
  return OBC_OK;
}

/* The Spearman pairs: every quantity against each oracle reference, then
 * each Taylor score against its exact counterpart. */
static int build_spearman_pairs(AnalysisResult *result) {
  static const ScoreQuantity taylor[3][2] = {
      {OBC_Q_OBC_V, OBC_Q_EXACT_V}, {OBC_Q_OBC_K, OBC_Q_EXACT_K}, {OBC_Q_OBC_VK, OBC_Q_EXACT_VK}};
  size_t n = OBC_Q_COUNT * result->n_references + 3;
  result->pairs = obc_malloc(n * sizeof *result->pairs, "Spearman pairs");
  if (!result->pairs) return OBC_ENOMEM;
  size_t i = 0;
  for (size_t ref = 0; ref < result->n_references; ref++)
    for (int q = 0; q < OBC_Q_COUNT; q++)
      result->pairs[i++] = (AnalysisSpearmanPair){(ScoreQuantity)q, OBC_REF_ORACLE(ref)};
  for (int t = 0; t < 3; t++)
    result->pairs[i++] = (AnalysisSpearmanPair){taylor[t][0], (int)taylor[t][1]};
  result->n_pairs = n;
  return OBC_OK;
}

/* The references: --oracle first, then oracle@1 and oracle@T unless the
 * same range is already there. */
static int resolve_references(const AnalysisConfig *config, const TraceMeta *meta,
                              AnalysisResult *result) {
  OracleSteps wanted[3] = {config->oracle, ORACLE_STEPS_ONE, ORACLE_STEPS_ALL};
  size_t first_decode = 0, decode_rows = trace_meta_decode_rows(meta, &first_decode);
  result->n_references = 0;
  for (size_t i = 0; i < 3; i++) {
    bool seen = false;
    for (size_t j = 0; j < i; j++) seen |= oracle_steps_equal(&wanted[i], &wanted[j]);
    if (seen) continue;
    size_t r = result->n_references++;
    int rc = oracle_steps_resolve(&wanted[i], decode_rows, NULL, &result->reference_first[r],
                                  &result->reference_steps[r]);
    if (rc) return rc;
    oracle_steps_name("oracle", &wanted[i], result->reference_names[r],
                      sizeof result->reference_names[r]);
  }
  result->oracle_steps = result->reference_steps[0];
  return OBC_OK;
}

static int result_alloc(AnalysisResult *result, const AnalysisConfig *config, bool has_needle,
                        size_t taylor_capacity) {
  size_t n = analysis_recall_stride(result, config);
  result->recall = obc_malloc(result->n_references * n * sizeof(double), "recall table");
  if (has_needle) result->needle = obc_malloc(n * sizeof(double), "needle table");
  int rc = build_spearman_pairs(result);
  if (rc) return rc;
  result->spearman = obc_malloc(
      result->n_heads * result->n_pairs * config->n_windows * sizeof(double), "Spearman");
  result->bias_share = obc_calloc(
      (OBC_Q_COUNT + 1) * config->n_windows * result->n_recents * config->n_topk * config->buckets,
      sizeof(double), "bias shares");
  result->bias_norm = obc_calloc((OBC_Q_COUNT + 1) * config->n_windows * config->buckets,
                                 sizeof(double), "bias scores");
  result->taylor = obc_malloc(taylor_capacity * sizeof(AnalysisTaylorPoint), "Taylor points");
  if (config->n_file_scores)
    result->file_recall =
        obc_malloc(result->n_references * result->n_heads * config->n_file_scores *
                       result->n_recents * config->n_topk * sizeof(double),
                   "file scores' recall");
  if ((config->n_file_scores && !result->file_recall) || !result->recall ||
      (has_needle && !result->needle) || !result->spearman || !result->bias_share ||
      !result->bias_norm || !result->taylor)
    return OBC_ENOMEM;
  return OBC_OK;
}

/* Inputs of the per-head reduction that do not change from head to head. */
typedef struct {
  const AnalysisConfig *config;
  size_t n_prompt;
  size_t max_k;
  bool has_needle;
  size_t needle_begin, needle_end;
} ReduceContext;

/* Every reference's top-k index and ranks; bias of the main one itself. */
static void reduce_oracle(const ReduceContext *ctx, AnalysisResult *result, HeadBuffers *b,
                          ThreadScratch *t) {
  const AnalysisConfig *config = ctx->config;
  size_t s = ctx->n_prompt;
  for (size_t ref = result->n_references; ref-- > 0;) { /* the main one last: its ranking stays */
    select_rank_top(b->oracle[ref], s, ctx->max_k, b->oracle_ranked);
    select_rank_index(b->oracle_ranked, ctx->max_k, s, b->oracle_rank_of[ref]);
    stats_average_ranks(b->oracle[ref], s, t->pairs, b->oracle_ranks[ref]);
  }
  const double *oracle = b->oracle[0];
  for (size_t ki = 0; ki < config->n_topk; ki++) {
    /* The oracle's own top-k is the first k entries of its ranking. */
    bias_selection_shares(b->oracle_ranked, config->topk[ki], s, config->buckets, t->share);
    double *acc = result->bias_share + bias_share_index(result, config, OBC_Q_COUNT, 0, 0, ki);
    for (size_t i = 0; i < config->buckets; i++) acc[i] += t->share[i];
  }
  bias_mean_norm_scores(oracle, s, config->buckets, t->share);
  double *acc = result->bias_norm + (size_t)OBC_Q_COUNT * config->n_windows * config->buckets;
  for (size_t i = 0; i < config->buckets; i++) acc[i] += t->share[i];
}

/* Everything computed from one quantity at one window, for one head. */
static void reduce_task(const ReduceContext *ctx, AnalysisResult *result, const HeadBuffers *b,
                        size_t head, size_t q, size_t w, ThreadScratch *t, size_t tid) {
  const AnalysisConfig *config = ctx->config;
  size_t s = ctx->n_prompt, B = config->buckets;
  const double *score = b->sweep + (w * OBC_Q_COUNT + q) * s;
  size_t *ranked = t->ranked + tid * ctx->max_k;
  size_t *selected = t->selected + tid * ctx->max_k;
  double *share = t->share + tid * B;

  /* One sort gives the ranks (Spearman) and every top-k ranking. */
  const StatsRankPair *sorted = stats_sort_values(score, s, t->pairs + tid * 2 * s);
  stats_ranks_from_sorted(sorted, s, b->ranks + (w * OBC_Q_COUNT + q) * s);
  bias_mean_norm_scores(score, s, B, share);
  double *norm_acc = result->bias_norm + (q * config->n_windows + w) * B;
  for (size_t i = 0; i < B; i++) norm_acc[i] += share[i];

  for (size_t ri = 0; ri < result->n_recents; ri++) {
    size_t r = result->recents[ri];
    if (ctx->max_k > r) select_rank_top_sorted(sorted, s, s - r, ctx->max_k - r, ranked);
    for (size_t ki = 0; ki < config->n_topk; ki++) {
      size_t k = config->topk[ki];
      size_t at = analysis_recall_index(result, config, head, q, w, ri, ki);
      size_t stride = analysis_recall_stride(result, config);
      if (k <= r) { /* no room for scored positions: not reported */
        for (size_t ref = 0; ref < result->n_references; ref++)
          result->recall[ref * stride + at] = NAN;
        if (ctx->has_needle) result->needle[at] = NAN;
        continue;
      }
      select_budget_from_ranking(ranked, s, k, r, selected);
      for (size_t ref = 0; ref < result->n_references; ref++)
        result->recall[ref * stride + at] = select_recall(selected, k, b->oracle_rank_of[ref]);
      if (ctx->has_needle)
        result->needle[at] = select_span_retention(selected, k, ctx->needle_begin, ctx->needle_end);
      bias_selection_shares(selected, k, s, B, share);
      double *acc = result->bias_share + bias_share_index(result, config, q, w, ri, ki);
      for (size_t i = 0; i < B; i++) acc[i] += share[i];
    }
  }
}

/* The recall of one file score for one head (after reduce_oracle), as
 * reduce_task computes a quantity's. score: (n_prompt). */
static void reduce_file_score(const ReduceContext *ctx, AnalysisResult *result,
                              const HeadBuffers *b, const double *score, size_t head, size_t f,
                              ThreadScratch *t) {
  const AnalysisConfig *config = ctx->config;
  size_t s = ctx->n_prompt;
  const StatsRankPair *sorted = stats_sort_values(score, s, t->pairs);
  for (size_t ri = 0; ri < result->n_recents; ri++) {
    size_t r = result->recents[ri];
    if (ctx->max_k > r) select_rank_top_sorted(sorted, s, s - r, ctx->max_k - r, t->ranked);
    for (size_t ki = 0; ki < config->n_topk; ki++) {
      size_t k = config->topk[ki];
      if (k > r) select_budget_from_ranking(t->ranked, s, k, r, t->selected);
      for (size_t ref = 0; ref < result->n_references; ref++)
        result->file_recall[analysis_file_recall_index(result, config, ref, head, f, ri, ki)] =
            k <= r ? NAN : select_recall(t->selected, k, b->oracle_rank_of[ref]);
    }
  }
}

/* The file scores of every (layer, KV head), read before the analysis so
 * that a bad file stops it at once: values[f] (n_layers, n_kv_heads,
 * n_prompt), malloc'd. */
static int read_file_scores(TraceReader *reader, const AnalysisConfig *config,
                            double *values[OBC_ANALYSIS_MAX_FILE_SCORES]) {
  const TraceMeta *meta = trace_meta(reader);
  size_t cells = meta->model.n_layers * meta->model.n_kv_heads * meta->n_prompt;
  int rc = OBC_OK;
  for (size_t f = 0; f < config->n_file_scores && !rc; f++) {
    const ScoresFileSpec *spec = &config->file_scores[f];
    values[f] = obc_malloc((cells + 1) * sizeof(double), "file scores");
    if (!values[f]) return OBC_ENOMEM;
    ScoresReadRequest request = {.path = spec->path,
                                 .dataset = spec->dataset,
                                 .trace_hash = meta->content_hash,
                                 .n_layers = meta->model.n_layers,
                                 .n_kv_heads = meta->model.n_kv_heads,
                                 .n_positions = meta->n_prompt};
    if ((rc = scores_read(&request, values[f]))) obc_fail_context(rc, "--score %s", spec->name);
  }
  return rc;
}

/* Every reduction of one head: the oracle's, then (quantity, window) tasks in
 * parallel, then the Spearman pairs (which need every task's ranks). */
static void reduce_head(const ReduceContext *ctx, AnalysisResult *result, HeadBuffers *b,
                        size_t head, ThreadScratch *t) {
  const AnalysisConfig *config = ctx->config;
  size_t s = ctx->n_prompt, n_windows = config->n_windows;
  reduce_oracle(ctx, result, b, t);

  long n_tasks = (long)(OBC_Q_COUNT * n_windows);
#pragma omp parallel for schedule(dynamic, 1)
  for (long task = 0; task < n_tasks; task++) {
    size_t tid = (size_t)omp_get_thread_num();
    reduce_task(ctx, result, b, head, (size_t)task / n_windows, (size_t)task % n_windows, t, tid);
  }

  long n_corr = (long)(result->n_pairs * n_windows);
#pragma omp parallel for schedule(static)
  for (long c = 0; c < n_corr; c++) {
    size_t pi = (size_t)c / n_windows, w = (size_t)c % n_windows;
    const AnalysisSpearmanPair *pair = &result->pairs[pi];
    const double *x = b->ranks + (w * OBC_Q_COUNT + pair->quantity) * s;
    const double *y = pair->reference < 0
                          ? b->oracle_ranks[-1 - pair->reference]
                          : b->ranks + (w * OBC_Q_COUNT + (size_t)pair->reference) * s;
    result->spearman[(head * result->n_pairs + pi) * n_windows + w] = stats_pearson(x, y, s);
  }
}

/* Evenly spaced positions of one head for taylor.csv; the first
 * (total % n_heads) heads take one point more. */
static size_t add_taylor_points(const AnalysisConfig *config, AnalysisResult *result,
                                const HeadBuffers *b, size_t w_main, size_t layer, size_t kv_head,
                                size_t head) {
  size_t s = result->n_prompt;
  size_t m =
      config->taylor_points / result->n_heads + (head < config->taylor_points % result->n_heads);
  if (m > s) m = s;
  const double *oracle = b->oracle[0];
  const double *base = b->sweep + w_main * OBC_Q_COUNT * s;
  for (size_t j = 0; j < m; j++) {
    size_t p = (2 * j + 1) * s / (2 * m);
    result->taylor[result->n_taylor++] = (AnalysisTaylorPoint){
        .layer = layer,
        .kv_head = kv_head,
        .position = p,
        .exact_v = base[OBC_Q_EXACT_V * s + p],
        .obc_v = base[OBC_Q_OBC_V * s + p],
        .exact_k = base[OBC_Q_EXACT_K * s + p],
        .obc_k = base[OBC_Q_OBC_K * s + p],
        .exact_vk = base[OBC_Q_EXACT_VK * s + p],
        .obc_vk = base[OBC_Q_OBC_VK * s + p],
        .remove = base[OBC_Q_REMOVE * s + p],
        .oracle = oracle[p],
    };
  }
  return m;
}

static size_t index_of(const size_t *values, size_t n, size_t value) {
  for (size_t i = 0; i < n; i++)
    if (values[i] == value) return i;
  return n;
}

static const char *gqa_name(ScoreGqa a) {
  return a == OBC_GQA_MEAN ? "mean" : a == OBC_GQA_MAX ? "max" : "sum";
}

static int open_scores_file(const AnalysisConfig *config, const AnalysisResult *result,
                            TraceReader *reader, ScoresFile **out) {
  const char *names[OBC_Q_COUNT + OBC_ANALYSIS_MAX_REFERENCES];
  size_t n = 0;
  for (int q = 0; q < OBC_Q_COUNT; q++) names[n++] = score_quantity_name((ScoreQuantity)q);
  for (size_t ref = 0; ref < result->n_references; ref++) names[n++] = result->reference_names[ref];
  ScoresFileLayout layout = {
      .n_layers = result->n_layers,
      .n_kv_heads = result->n_kv_heads,
      .n_prompt = result->n_prompt,
      .window = config->main_window,
      .trace_path = trace_path(reader),
      .trace_hash = trace_meta(reader)->content_hash,
      .gqa = gqa_name(config->score_options.aggregation),
      .precision = config->score_options.precision == OBC_PRECISION_DOUBLE ? "double" : "float",
      .oracle_steps = result->oracle_steps,
      .names = names,
      .n_datasets = n,
  };
  return scores_file_create(config->scores_out, &layout, out);
}

static int write_scores_head(ScoresFile *file, const AnalysisConfig *config,
                             const AnalysisResult *result, const HeadBuffers *b, size_t w_main,
                             size_t layer, size_t kv_head) {
  size_t s = result->n_prompt;
  int rc = OBC_OK;
  for (size_t q = 0; q < OBC_Q_COUNT && !rc; q++)
    rc = scores_file_write_head(file, q, layer, kv_head, b->sweep + (w_main * OBC_Q_COUNT + q) * s);
  for (size_t ref = 0; ref < result->n_references && !rc; ref++)
    rc = scores_file_write_head(file, OBC_Q_COUNT + ref, layer, kv_head, b->oracle[ref]);
  return rc;
}

/* Divides the bias sums by the number of heads and copies the oracle's rows
 * (computed once per head) to every window and recent window. */
static void finish_bias(const AnalysisConfig *config, AnalysisResult *result) {
  size_t B = config->buckets;
  size_t n_share = (OBC_Q_COUNT + 1) * config->n_windows * result->n_recents * config->n_topk * B;
  size_t n_norm = (OBC_Q_COUNT + 1) * config->n_windows * B;
  for (size_t i = 0; i < n_share; i++) result->bias_share[i] /= (double)result->n_heads;
  for (size_t i = 0; i < n_norm; i++) result->bias_norm[i] /= (double)result->n_heads;
  for (size_t w = 0; w < config->n_windows; w++) {
    if (w > 0)
      memcpy(result->bias_norm + (OBC_Q_COUNT * config->n_windows + w) * B,
             result->bias_norm + OBC_Q_COUNT * config->n_windows * B, B * sizeof(double));
    for (size_t ri = 0; ri < result->n_recents; ri++)
      for (size_t ki = 0; ki < config->n_topk; ki++) {
        if (w == 0 && ri == 0) continue;
        memcpy(result->bias_share + bias_share_index(result, config, OBC_Q_COUNT, w, ri, ki),
               result->bias_share + bias_share_index(result, config, OBC_Q_COUNT, 0, 0, ki),
               B * sizeof(double));
      }
  }
}

/* Every (layer, KV head) allocates and frees the same few MB of buffers
 * (sweep, oracle, GEMM copies). glibc serves blocks above 128 KB with a fresh
 * mmap and returns them on free, so each head paid for its pages again
 * (page faults and zeroing were 8% of the demo's analysis): keep blocks up to
 * 32 MB (glibc's largest mmap threshold) in the heap and the heap untrimmed. */
static void analysis_keep_buffers(void) {
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int analysis_run(TraceReader *reader, const AnalysisConfig *config, bool progress,
                 AnalysisResult *result) {
  const TraceMeta *meta = trace_meta(reader);
  analysis_keep_buffers();
  assert(config->n_windows > 0 && config->n_topk > 0); /* analysis_config_resolve ran */
  double start = obc_now_seconds();
  memset(result, 0, sizeof *result);
  result->n_layers = meta->model.n_layers;
  result->n_kv_heads = meta->model.n_kv_heads;
  result->n_heads = result->n_layers * result->n_kv_heads;
  result->n_prompt = meta->n_prompt;
  int rc = resolve_references(config, meta, result);
  if (rc) return obc_fail_context(rc, "%s", trace_path(reader));
  result->recents[0] = 0;
  result->n_recents = 1;
  if (config->recent > 0) result->recents[result->n_recents++] = config->recent;

  const TraceSpan *needle = trace_meta_find_span(meta, "needle");
  ReduceContext ctx = {
      .config = config, .n_prompt = meta->n_prompt, .max_k = config->topk[config->n_topk - 1]};
  if (needle && needle->end > needle->begin && needle->begin >= 0) {
    ctx.has_needle = true;
    ctx.needle_begin = (size_t)needle->begin;
    ctx.needle_end = needle->end > (int64_t)meta->n_prompt ? meta->n_prompt : (size_t)needle->end;
  }
  size_t taylor_capacity = config->taylor_points < result->n_heads * meta->n_prompt
                               ? config->taylor_points
                               : result->n_heads * meta->n_prompt;
  size_t w_main = index_of(config->windows, config->n_windows, config->main_window);

  HeadBuffers b;
  ThreadScratch t;
  ScoresFile *scores_file = NULL;
  rc = result_alloc(result, config, ctx.has_needle, taylor_capacity);
  if (rc) {
    analysis_result_free(result);
    return rc;
  }
  if ((rc = head_buffers_alloc(&b, reader, config->n_windows, ctx.max_k, result->n_references))) {
    analysis_result_free(result);
    return rc;
  }
  /* Every product with K is a FLOAT GEMM there: the doubles are not needed. */
  if (config->score_options.precision == OBC_PRECISION_FLOAT) score_head_float_keys(&b.head);
  if ((rc = thread_scratch_alloc(&t, ctx.max_k, config->buckets, meta->n_prompt))) {
    head_buffers_free(&b);
    analysis_result_free(result);
    return rc;
  }
  double *file_values[OBC_ANALYSIS_MAX_FILE_SCORES] = {NULL};
  rc = read_file_scores(reader, config, file_values);
  if (!rc && config->scores_out) rc = open_scores_file(config, result, reader, &scores_file);

  for (size_t layer = 0; layer < result->n_layers && !rc; layer++) {
    for (size_t g = 0; g < result->n_kv_heads && !rc; g++) {
      size_t head = layer * result->n_kv_heads + g;
      double t0 = obc_now_seconds();
      if ((rc = score_head_read(&b.head, reader, layer, g))) break;
      double t1 = obc_now_seconds();
      const OracleHead *data = &b.head.data;
      rc = score_window_sweep(data, config->windows, config->n_windows, &config->score_options,
                              b.sweep);
      double t2 = obc_now_seconds();
      if (!rc)
        rc =
            oracle_eviction_errors(data, result->reference_first, result->reference_steps,
                                   result->n_references, config->score_options.precision, b.oracle);
      if (rc) {
        obc_fail_context(rc, "layer %zu, KV head %zu", layer, g);
        break;
      }
      double t3 = obc_now_seconds();
      reduce_head(&ctx, result, &b, head, &t);
      for (size_t f = 0; f < config->n_file_scores; f++)
        reduce_file_score(&ctx, result, &b, file_values[f] + head * meta->n_prompt, head, f, &t);
      double t4 = obc_now_seconds();
      result->seconds_read += t1 - t0;
      result->seconds_sweep += t2 - t1;
      result->seconds_oracle += t3 - t2;
      result->seconds_reduce += t4 - t3;
      add_taylor_points(config, result, &b, w_main, layer, g, head);
      if (scores_file) rc = write_scores_head(scores_file, config, result, &b, w_main, layer, g);
    }
    if (!rc && progress)
      fprintf(stderr,
              "\ranalyze: layer %zu/%zu done (%.1f s: read %.1f, sweep %.1f, oracle %.1f, "
              "reduce %.1f)%s",
              layer + 1, result->n_layers, obc_now_seconds() - start, result->seconds_read,
              result->seconds_sweep, result->seconds_oracle, result->seconds_reduce,
              layer + 1 == result->n_layers ? "\n" : "");
  }
  head_buffers_free(&b);
  thread_scratch_free(&t);
  for (size_t f = 0; f < OBC_ANALYSIS_MAX_FILE_SCORES; f++) free(file_values[f]);
  if (!rc && scores_file) {
    rc = scores_file_commit(scores_file);
    scores_file = NULL;
  }
  scores_file_abort(scores_file);
  if (rc) {
    analysis_result_free(result);
    return rc;
  }
  finish_bias(config, result);
  result->seconds = obc_now_seconds() - start;
  return OBC_OK;
}
