/* Eviction methods as presets (evict/preset.h): the preset table, the
 * counts the methods derive from the one budget count (evict_budget_count:
 * PyramidKV's layers, AdaKV's safeguard, CriticalKV's first stage), the
 * per-method scores computed from a trace's captured query rows, keys and
 * values in double precision, and the three allocation rules (per KV
 * head, PyramidKV's per layer, AdaKV's across a layer's heads). Attention
 * is recomputed from Q and K (softmax over every causal key, as kvpress
 * recomputes it), so the scores are exact functions of the trace's
 * tensors. */
#include "evict/preset.h"

#include <assert.h>
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "evict/h2o.h"
#include "model/model.h"
#include "scores/score_head.h"
#include "scores/select.h"

/* ==== Constants of the methods ==== */

/* AdaKV's safeguard: every head keeps at least kept / 5 of its own under
 * the floor rule, kvpress's int(n_kept * alpha_safeguard 0.20) in double
 * under the kvpress rule (evict_budget_share). */
enum { ADAKV_SAFEGUARD_DIVISOR = 5 };
#define ADAKV_SAFEGUARD 0.20
/* PyramidKV's beta (kvpress default). */
#define PYRAMID_BETA 20.0
/* CriticalKV (kvpress CriticalKVPress defaults): the first stage keeps
 * kept / 2 outright (evict_preset_critical_first_stage: under the kvpress
 * rule kvpress's int((1 - cr) x n x first_stage_ratio 0.5)); the second
 * scores (s_p + epsilon) x w_p. */
enum { CRITICAL_FIRST_STAGE_DIVISOR = 2 };
#define CRITICAL_FIRST_STAGE_RATIO 0.5
#define CRITICAL_EPSILON 1e-4
/* H2O's recent window: of the k kept, the last k / 2 candidates (the H2O
 * paper's equal heavy-hitter and recent budgets; k - k / 2 heavy hitters). */
enum { H2O_RECENT_DIVISOR = 2 };

static const EvictMethod *method_of(const EvictPolicy *p) {
  assert(p->source && p->source->kind == EVICT_SCORE_PRESET);
  return &p->source->method;
}

/* ==== Budgets ==== */

/* The checks every preset makes before its scores: the generic knobs it
 * fixes itself were not given. */
static int check_fixed_knobs(const EvictPolicy *p) {
  if (p->window || p->sinks || p->recent || p->allocation != EVICT_ALLOC_UNIFORM)
    return obc_fail(OBC_EINVAL,
                    "--score %s: a preset fixes its own window, sinks, recent window and "
                    "allocation (drop --window, --sinks, --recent and --alloc)",
                    p->score);
  return OBC_OK;
}

int evict_preset_count(const EvictPolicy *p, size_t n, size_t *tokens) {
  size_t k = 0;
  int rc = check_fixed_knobs(p);
  if (!rc) rc = evict_budget_count(p, n, &k);
  if (rc) return rc;
  if (k == 0 || k > n)
    return obc_fail(OBC_EINVAL, "--budget %s: keeps %zu of the %zu candidates (expected 1..%zu)",
                    p->budget_text, k, n, n);
  *tokens = k;
  return OBC_OK;
}

int evict_preset_pyramid_budget(const EvictPolicy *p, size_t n, size_t window, size_t n_layers,
                                size_t layer, size_t *kept) {
  uint64_t num = 0, den = 1;
  bool whole = false;
  size_t count = 0;
  int rc = evict_budget_ratio(p->budget_text, &num, &den, &whole);
  if (!rc) rc = evict_budget_count(p, n, &count);
  if (rc) return rc;
  /* kvpress's q_len * (1 - compression_ratio): under the kvpress rule that
   * double itself, under the floor rule n x B correctly rounded. */
  bool kvpress = p->budget_rule == EVICT_BUDGET_RULE_KVPRESS && !whole;
  double mean = whole     ? (double)num
                : kvpress ? (double)n * (1.0 - evict_budget_compression_ratio(num, den))
                          : (double)((unsigned __int128)n * num) / (double)den;
  double w = (double)window, q_len = (double)n;
  double max_capacity = w + mean;
  double min_num = (max_capacity - w) / PYRAMID_BETA;
  double max_num = (max_capacity - w) * 2.0 - min_num;
  if (max_num >= q_len - w) {
    max_num = q_len - w;
    min_num = (max_capacity - w) * 2.0 - max_num;
  }
  double budget = 0.0;
  if (!(q_len >= max_num && max_num >= min_num && min_num >= w)) {
    /* SnapKV's count: kvpress rounds here (Python's round, half to even),
     * the floor rule keeps the one count of every policy. */
    budget = kvpress ? nearbyint(mean) : (double)count;
  } else {
    double steps = n_layers > 1 ? (max_num - min_num) / (double)(n_layers - 1) : 0.0;
    budget = nearbyint(max_num - (double)layer * steps);
  }
  if (!(budget >= 1.0)) budget = 1.0;
  *kept = budget > q_len ? n : (size_t)budget;
  return OBC_OK;
}

size_t evict_preset_critical_first_stage(const EvictPolicy *p, size_t n, size_t k) {
  uint64_t num = 0, den = 1;
  bool whole = false;
  if (p->budget_rule != EVICT_BUDGET_RULE_KVPRESS ||
      evict_budget_ratio(p->budget_text, &num, &den, &whole) || whole)
    return evict_budget_share(p, k, CRITICAL_FIRST_STAGE_DIVISOR, CRITICAL_FIRST_STAGE_RATIO);
  double keep_share = 1.0 - evict_budget_compression_ratio(num, den);
  return (size_t)(keep_share * (double)n * CRITICAL_FIRST_STAGE_RATIO);
}

/* ==== Scores ==== */

/* Scratch of attention_scores for windows of at most W rows over n keys of
 * head_dim d: allocated once per scoring pass, not per head. */
typedef struct {
  double *q, *a, *z, *o, *vo; /* (W, d), (W, n), (W, n) + (W), (W, d), (W, n) */
} WindowScratch;

static int window_scratch_alloc(WindowScratch *ws, size_t W, size_t n, size_t d) {
  ws->q = obc_malloc(W * d * sizeof *ws->q, "window queries");
  ws->a = obc_malloc(W * n * sizeof *ws->a, "window attention");
  ws->z = obc_malloc((W * n + W) * sizeof *ws->z, "window logits, |o_t|^2");
  ws->o = obc_malloc(W * d * sizeof *ws->o, "window outputs");
  ws->vo = obc_malloc((W * n + 1) * sizeof *ws->vo, "window v.o");
  return ws->q && ws->a && ws->z && ws->o && ws->vo ? OBC_OK : OBC_ENOMEM;
}

static void window_scratch_free(WindowScratch *ws) {
  free(ws->q), free(ws->a), free(ws->z), free(ws->o), free(ws->vo);
  memset(ws, 0, sizeof *ws);
}

/* The raw score of query head j of the KV head in h over the window's rows
 * n-W..n-1, for columns [0, n - W): out (n - W). Per row t: z_p = scale
 * q_t.k_p and A_tp = softmax over p in [0, t]; the output o_t = sum_p A_tp
 * v_p is recomputed the same way. Every term is the mean over the rows:
 * attn as kvpress takes it, the OBCache terms (SPEC.md section 2, sums over
 * the rows) divided by W, so that a pairing scores on its baseline's scale
 * (a constant factor, the same ranking, except where a method adds a
 * constant to the score: CriticalKV's epsilon), and the swap A_tp / W on
 * the OBCache terms' path, bit for bit attn's (both read the same A_tp =
 * exp(z_tp - max) / sum).
 * The products q.k, A V and o.v are dgemms over the window's rows;
 * ||v_p - o_t||^2 is ||v_p||^2 - 2 v_p.o_t + ||o_t||^2. */
static void attention_scores(const OracleHead *h, const TraceMeta *meta, size_t j, size_t n,
                             size_t W, EvictPresetInner inner, const double *v_sq,
                             const WindowScratch *ws, double *out) {
  size_t d = h->head_dim, cols = n - W, t0 = n - W;
  bool attn = inner == EVICT_PRESET_INNER_ATTN;
  double *q = ws->q, *a = ws->a, *z = ws->z, *o = ws->o, *vo = ws->vo; /* a: z, then A */
  for (size_t i = 0; i < W; i++) {
    size_t r = trace_meta_row_index(meta, (int64_t)(t0 + i));
    memcpy(q + i * d, h->Q + (j * h->n_rows + r) * d, d * sizeof *q);
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)W, (int)n, (int)d, h->attn_scale, q,
              (int)d, h->K, (int)d, 0.0, a, (int)n);
  /* Rows in parallel, then each column's sum over the rows in row order:
   * the same bits on any thread count. */
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < W; i++) {
    double *row = a + i * n, m = -INFINITY, sum = 0.0;
    size_t t = t0 + i;
    if (!attn) memcpy(z + i * cols, row, cols * sizeof *z);
    for (size_t p = 0; p <= t; p++) m = row[p] > m ? row[p] : m;
    for (size_t p = 0; p <= t; p++) sum += row[p] = exp(row[p] - m);
    for (size_t p = 0; p <= t; p++) row[p] /= sum;
    for (size_t p = t + 1; p < n; p++) row[p] = 0.0;
  }
  if (attn) {
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < cols; p++) {
      double acc = 0.0;
      for (size_t i = 0; i < W; i++) acc += a[i * n + p] / (double)W;
      out[p] = acc;
    }
  }
  if (!attn) {
    /* o (W, d) = A (W, n) V (n, d); vo (W, cols) = o V[0, cols)^T */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)W, (int)d, (int)n, 1.0, a, (int)n,
                h->V, (int)d, 0.0, o, (int)d);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)W, (int)cols, (int)d, 1.0, o, (int)d,
                h->V, (int)d, 0.0, vo, (int)cols);
    double *oo = z + W * cols; /* (W) after the logits */
    for (size_t i = 0; i < W; i++) {
      oo[i] = 0.0;
      for (size_t c = 0; c < d; c++) oo[i] += o[i * d + c] * o[i * d + c];
    }
    /* Legend: a = A_tp, vv = ||v_p||^2, vo = v_p.o_t, dd = ||v_p - o_t||^2.
     * Column blocks in parallel; within one, row by row over contiguous
     * columns, so that each column still sums its rows in row order. */
    enum { BLOCK = 256 };
    size_t blocks = (cols + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < blocks; k++) {
      size_t p0 = k * BLOCK, p1 = p0 + BLOCK < cols ? p0 + BLOCK : cols;
      for (size_t p = p0; p < p1; p++) out[p] = 0.0;
      for (size_t i = 0; i < W; i++) {
        const double *ai = a + i * n, *zi = z + i * cols, *voi = vo + i * cols;
        double ooi = oo[i];
        for (size_t p = p0; p < p1; p++) {
          double ap = ai[p], zp = zi[p], vv = v_sq[p];
          double dd = fmax(0.0, vv - 2.0 * voi[p] + ooi);
          double value = ap * ap * vv, key = (ap * zp) * (ap * zp) * dd;
          double term = inner == EVICT_PRESET_INNER_OBC_V   ? value
                        : inner == EVICT_PRESET_INNER_OBC_K ? key
                        : inner == EVICT_PRESET_INNER_SWAP
                            ? ap
                            : value + key + 2.0 * ap * ap * zp * (vv - voi[p]);
          out[p] += term / (double)W;
        }
      }
    }
  }
}

/* Pooling over positions [0, n) into out: average with zero padding (torch
 * avg_pool1d, count_include_pad: every window divides by the kernel) or
 * maximum over the clamped window (max_pool1d pads with -inf). */
static void pool_scores(const double *in, size_t n, EvictPool pool, size_t kernel, double *out) {
  size_t half = kernel / 2;
  for (size_t p = 0; p < n; p++) {
    size_t lo = p > half ? p - half : 0, hi = p + half < n ? p + half : n - 1;
    double acc = pool == EVICT_POOL_MAX ? in[lo] : 0.0;
    for (size_t q = lo; q <= hi; q++)
      acc = pool == EVICT_POOL_MAX ? (in[q] > acc ? in[q] : acc) : acc + in[q];
    out[p] = pool == EVICT_POOL_MAX ? acc : acc / (double)kernel;
  }
}

/* Key-only scores of candidates [0, n) of one KV head into out (n). */
static void key_scores(const OracleHead *h, size_t n, EvictMethodSource source, double *anchor,
                       double *out) {
  size_t d = h->head_dim;
  if (source == EVICT_METHOD_KEY_DIFF) {
    memset(anchor, 0, d * sizeof *anchor);
    for (size_t p = 0; p < n; p++) {
      const double *k = h->K + p * d;
      double sq = 0.0;
      for (size_t c = 0; c < d; c++) sq += k[c] * k[c];
      double norm = fmax(sqrt(sq), 1e-12); /* F.normalize's eps */
      for (size_t c = 0; c < d; c++) anchor[c] += k[c] / norm;
    }
    for (size_t c = 0; c < d; c++) anchor[c] /= (double)n;
  }
  double anchor_norm = 0.0;
  if (source == EVICT_METHOD_KEY_DIFF) {
    for (size_t c = 0; c < d; c++) anchor_norm += anchor[c] * anchor[c];
    anchor_norm = sqrt(anchor_norm);
  }
  for (size_t p = 0; p < n; p++) {
    const double *k = h->K + p * d;
    double sq = 0.0, dot = 0.0;
    for (size_t c = 0; c < d; c++) sq += k[c] * k[c];
    if (source == EVICT_METHOD_KEY_NORM) {
      out[p] = -sqrt(sq);
      continue;
    }
    for (size_t c = 0; c < d; c++) dot += k[c] * anchor[c];
    /* F.cosine_similarity: x.y / max(||x|| ||y||, 1e-8) */
    out[p] = -dot / fmax(sqrt(sq) * anchor_norm, 1e-8);
  }
}

/* Positions per GEMM of CriticalKV's projected values (bounds the scratch
 * to PROJECT_CHUNK x dim doubles). */
enum { PROJECT_CHUNK = 512 };

/* CriticalKV's projected value norms of one KV head: w_p = the mean over
 * its query heads h of ||W_o[:, h d:(h+1) d] v_p||_1 (kvpress vwl1norm: v_p
 * repeated per query head, times head h's rows of W_o^T). wo: the layer's
 * W_o (dim, n_heads x d), row-major; projected: scratch (PROJECT_CHUNK x
 * dim); out (n). */
static void projected_norms(const OracleHead *h, const double *wo, size_t dim, size_t n_heads,
                            size_t kv_head, size_t n, double *projected, double *out) {
  size_t d = h->head_dim, group = h->group_size, q_dim = n_heads * d;
  memset(out, 0, n * sizeof *out);
  for (size_t start = 0; start < n; start += PROJECT_CHUNK) {
    size_t rows = n - start < PROJECT_CHUNK ? n - start : PROJECT_CHUNK;
    for (size_t j = 0; j < group; j++) {
      /* projected (rows, dim) = V[start..] (rows, d) x W_o[:, the head's d]^T */
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)dim, (int)d, 1.0,
                  h->V + start * d, (int)d, wo + (kv_head * group + j) * d, (int)q_dim, 0.0,
                  projected, (int)dim);
      for (size_t r = 0; r < rows; r++) {
        double l1 = 0.0;
        for (size_t o = 0; o < dim; o++) l1 += fabs(projected[r * dim + o]);
        out[start + r] += l1;
      }
    }
  }
  for (size_t p = 0; p < n; p++) out[p] /= (double)group;
}

/* ||v_p||^2 into sq and, when l1 is not NULL, ||v_p||_1 into l1, for the
 * positions [0, n) of one KV head. */
static void value_norms(const OracleHead *h, size_t n, double *sq, double *l1) {
  size_t d = h->head_dim;
  for (size_t p = 0; p < n; p++) {
    const double *v = h->V + p * d;
    double s2 = 0.0, s1 = 0.0;
    for (size_t c = 0; c < d; c++) {
      s2 += v[c] * v[c];
      s1 += fabs(v[c]);
    }
    sq[p] = s2;
    if (l1) l1[p] = s1;
  }
}

/* The attention preset's scores of one layer: every query head's raw score
 * (heads: n_heads x (n - W)), pooled (VATP: then times ||v_p||_1) and
 * combined, then the protected
 * window padded with the layer's maximum + 1. out (G, n). With wo (the
 * layer's W_o, dim x n_heads d), also the projected value norms into
 * norms (G, n). */
static int layer_attention(const EvictMethod *pr, EvictPresetInner inner, TraceReader *reader,
                           ScoreHead *h, size_t layer, size_t n, double *heads, double *work,
                           const WindowScratch *ws, const double *wo, size_t dim, double *out,
                           double *norms) {
  const TraceMeta *meta = trace_meta(reader);
  size_t G = meta->model.n_kv_heads, group = h->data.group_size, H = G * group;
  size_t W = pr->window, cols = n - W, d = h->data.head_dim;
  double *pooled = work, *v_sq = pooled + n, *v_l1 = v_sq + n;
  for (size_t g = 0; g < G; g++) {
    int rc = score_head_read(h, reader, layer, g);
    if (rc) return obc_fail_context(rc, "%s: layer %zu, KV head %zu", trace_path(reader), layer, g);
    value_norms(&h->data, n, v_sq, v_l1);
    if (wo) projected_norms(&h->data, wo, dim, H, g, n, (double *)wo + dim * H * d, norms + g * n);
    for (size_t j = 0; j < group; j++) {
      double *s = heads + (g * group + j) * cols;
      attention_scores(&h->data, meta, j, n, W, inner, v_sq, ws, s);
      if (pr->pool != EVICT_POOL_NONE) {
        pool_scores(s, cols, pr->pool, pr->kernel, pooled);
        memcpy(s, pooled, cols * sizeof *s);
      }
      if (pr->value_l1) /* VATP: the method's score, pooled, times the value's l1 norm */
        for (size_t p = 0; p < cols; p++) s[p] *= v_l1[p];
    }
  }
  for (size_t g = 0; g < G; g++) {
    double *dst = out + g * n;
    size_t first = pr->heads == EVICT_HEADS_LAYER_MEAN ? 0 : g * group;
    size_t count = pr->heads == EVICT_HEADS_LAYER_MEAN ? H : group;
    for (size_t p = 0; p < cols; p++) {
      double sum = 0.0;
      for (size_t i = first; i < first + count; i++) sum += heads[i * cols + p];
      dst[p] = pr->heads == EVICT_HEADS_GROUP_SUM ? sum : sum / (double)count;
    }
  }
  double max = -INFINITY;
  for (size_t g = 0; g < G; g++)
    for (size_t p = 0; p < cols; p++) max = out[g * n + p] > max ? out[g * n + p] : max;
  for (size_t g = 0; g < G; g++)
    for (size_t p = cols; p < n; p++) out[g * n + p] = max + 1.0;
  return OBC_OK;
}

/* H2O's scores of candidates [0, n) under the query-aware protocol, the
 * candidates ending at the question's end n < n_prompt: every prompt row's
 * column sums less the sums of the tail rows [n, n_prompt), which the
 * capture keeps among its last rows; their terms are recomputed from the
 * trace's Q, K and V as attention_scores computes them (the capture's
 * definitions, capture/capture_sums.h). The sums are stored as f32, so the
 * difference carries their rounding (relative 2^-24 of the whole sum). */
static int aware_h2o_scores(TraceReader *reader, const EvictPolicy *p, size_t n, H2oTerm term,
                            H2oForm form, double *scores) {
  const TraceMeta *meta = trace_meta(reader);
  const char *path = trace_path(reader);
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads, H = meta->model.n_heads;
  size_t n_prompt = meta->n_prompt, tail = n_prompt - n, d = meta->model.head_dim;
  if (!meta->has_column_sums)
    return obc_fail(OBC_EINVAL,
                    "%s: --score %s: the trace has no accumulated column sums (capture it "
                    "without --no-column-sums)",
                    path, p->score);
  if (evict_rows_ending_at(meta, n_prompt) < tail)
    return obc_fail(OBC_EINVAL,
                    "%s: --score %s under --protocol aware takes the %zu rows after the "
                    "question out of its sums, but the trace captures %zu there (hint: capture "
                    "with more --rows)",
                    path, p->score, tail, evict_rows_ending_at(meta, n_prompt));
  if (d > 512) return obc_fail(OBC_EINVAL, "%s: head_dim %zu (expected at most 512)", path, d);
  static const EvictPresetInner inners[] = {EVICT_PRESET_INNER_ATTN, EVICT_PRESET_INNER_OBC_V,
                                            EVICT_PRESET_INNER_OBC_K, EVICT_PRESET_INNER_OBC_VK};
  EvictPresetInner inner = inners[term];
  ScoreHead h;
  int rc = score_head_alloc(&h, reader);
  if (rc) return rc;
  double *less = obc_malloc((H * n + 1) * sizeof *less, "tail rows' sums");
  double *work = obc_malloc((2 * n_prompt + 1) * sizeof *work, "tail scratch");
  WindowScratch ws = {0};
  if (!less || !work) rc = OBC_ENOMEM;
  if (!rc) rc = window_scratch_alloc(&ws, tail, n_prompt, d);
  size_t group = H / G;
  for (size_t l = 0; l < L && !rc; l++) {
    for (size_t g = 0; g < G && !rc; g++) {
      rc = score_head_read(&h, reader, l, g);
      if (rc) {
        obc_fail_context(rc, "%s: layer %zu, KV head %zu", path, l, g);
        break;
      }
      double *v_sq = work + n_prompt;
      value_norms(&h.data, n_prompt, v_sq, NULL);
      for (size_t j = 0; j < group; j++) {
        double *dst = less + (g * group + j) * n;
        attention_scores(&h.data, meta, j, n_prompt, tail, inner, v_sq, &ws, dst);
        for (size_t q = 0; q < n; q++) dst[q] *= (double)tail; /* its mean, as the sum */
      }
    }
    if (!rc)
      rc =
          h2o_scores_less(reader, l, n, TRACE_ROWS_ALL, term, form, less, tail, scores + l * G * n);
  }
  free(less);
  free(work);
  window_scratch_free(&ws);
  score_head_free(&h);
  return rc;
}

/* kvpress ExpectedAttentionPress's future positions (n_future_positions). */
enum { EXPECTED_FUTURE_POSITIONS = 512 };

/* The RoPE rotation averaged over positions [n, n + EXPECTED_FUTURE_POSITIONS)
 * into rot (d, d): rotating q by position t turns each pair (a, b) of
 * frequency w_j by t w_j (a' = a cos - b sin, b' = a sin + b cos), the
 * pairs (2j, 2j+1) when interleaved, else (j, j + d/2) (Hugging Face's
 * rotate_half, kvpress's P matrix). */
static void expected_rotation(const double *inv_freq, size_t d, bool interleaved, size_t n,
                              double *rot) {
  memset(rot, 0, d * d * sizeof *rot);
  for (size_t j = 0; j < d / 2; j++) {
    double c = 0.0, sn = 0.0;
    for (size_t t = n; t < n + EXPECTED_FUTURE_POSITIONS; t++) {
      c += cos((double)t * inv_freq[j]);
      sn += sin((double)t * inv_freq[j]);
    }
    c /= EXPECTED_FUTURE_POSITIONS;
    sn /= EXPECTED_FUTURE_POSITIONS;
    size_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + d / 2;
    rot[a * d + a] = c;
    rot[b * d + b] = c;
    rot[a * d + b] = -sn;
    rot[b * d + a] = sn;
  }
}

/* kvpress ExpectedAttentionPress on one layer: per query head, the mean mu
 * and covariance S (divided by the row count) of the pre-RoPE queries of
 * rows [sinks, n), rotated by the averaged RoPE R: mu' = R mu, S' = R S R^T;
 * per key p >= sinks, z_p = k_p.mu' / sqrt(d) + k_p^T S' k_p / (2 d), the
 * softmax of z over those keys, averaged over the KV head's query group and
 * times ||v_p||_2; the sinks get the layer's maximum + 1. out (G, n). */
static int layer_expected(TraceReader *reader, ScoreHead *h, size_t layer, size_t n,
                          const EvictMethod *pr, double *out) {
  const TraceMeta *meta = trace_meta(reader);
  const char *path = trace_path(reader);
  size_t G = meta->model.n_kv_heads, H = meta->model.n_heads, group = H / G;
  size_t d = meta->model.head_dim, sinks = pr->sinks;
  bool interleaved = !strcmp(meta->model.rope_layout, "interleaved");
  TraceSumRows rows = n < meta->n_prompt ? TRACE_ROWS_AGNOSTIC : TRACE_ROWS_ALL;
  int64_t count = 0;
  double *sum = obc_malloc(H * d * sizeof *sum, "query sums");
  double *outer = obc_malloc(H * d * d * sizeof *outer, "query outer sums");
  double *freq = obc_malloc(d / 2 * sizeof *freq, "RoPE frequencies");
  double *rot = obc_malloc(d * d * sizeof *rot, "averaged RoPE");
  double *mu = obc_malloc(H * d * sizeof *mu, "rotated query means");
  double *cov = obc_malloc(H * d * d * sizeof *cov, "rotated query covariances");
  double *tmp = obc_malloc(d * d * sizeof *tmp, "covariance product");
  double *z = obc_malloc((n + 1) * sizeof *z, "expected logits");
  int rc = sum && outer && freq && rot && mu && cov && tmp && z ? OBC_OK : OBC_ENOMEM;
  if (!rc) rc = trace_read_query_stats(reader, layer, rows, sum, outer, &count, freq);
  if (!rc && (size_t)count + sinks != n)
    rc = obc_fail(OBC_EINVAL,
                  "%s: --score expected_attention scores %zu candidates, but the trace's query "
                  "statistics cover rows [%zu, %lld) (expected the %s protocol's %zu)",
                  path, n, sinks, (long long)count + (long long)sinks,
                  rows == TRACE_ROWS_AGNOSTIC ? "agnostic" : "aware",
                  rows == TRACE_ROWS_AGNOSTIC ? meta->agnostic_rows : meta->n_prompt);
  if (!rc) expected_rotation(freq, d, interleaved, n, rot);
  for (size_t q = 0; !rc && q < H; q++) {
    /* m: the query mean; S = outer / count - m m^T; mu = R m; cov = R S R^T */
    const double *sq = sum + q * d, *oq = outer + q * d * d;
    double m[512];
    for (size_t a = 0; a < d; a++) m[a] = sq[a] / (double)count;
    for (size_t a = 0; a < d; a++) {
      double acc = 0.0;
      for (size_t b = 0; b < d; b++) acc += rot[a * d + b] * m[b];
      mu[q * d + a] = acc;
    }
    for (size_t a = 0; a < d; a++) /* tmp = R S */
      for (size_t b = 0; b < d; b++) {
        double acc = 0.0;
        for (size_t c = 0; c < d; c++)
          acc += rot[a * d + c] * (oq[c * d + b] / (double)count - m[c] * m[b]);
        tmp[a * d + b] = acc;
      }
    for (size_t a = 0; a < d; a++) /* cov = tmp R^T */
      for (size_t b = 0; b < d; b++) {
        double acc = 0.0;
        for (size_t c = 0; c < d; c++) acc += tmp[a * d + c] * rot[b * d + c];
        cov[(q * d + a) * d + b] = acc;
      }
  }
  double inv_sqrt_d = 1.0 / sqrt((double)d), max = -INFINITY;
  for (size_t g = 0; g < G && !rc; g++) {
    rc = score_head_read(h, reader, layer, g);
    if (rc) {
      obc_fail_context(rc, "%s: layer %zu, KV head %zu", path, layer, g);
      break;
    }
    double *dst = out + g * n;
    memset(dst, 0, n * sizeof *dst);
    for (size_t j = 0; j < group; j++) {
      const double *mq = mu + (g * group + j) * d, *cq = cov + (g * group + j) * d * d;
      double top = -INFINITY;
      for (size_t p = sinks; p < n; p++) {
        const double *k = h->data.K + p * d;
        double lin = 0.0, quad = 0.0;
        for (size_t a = 0; a < d; a++) {
          double row = 0.0;
          for (size_t b = 0; b < d; b++) row += cq[a * d + b] * k[b];
          quad += k[a] * row;
          lin += k[a] * mq[a];
        }
        z[p] = lin * inv_sqrt_d + quad / (2.0 * (double)d);
        top = z[p] > top ? z[p] : top;
      }
      double total = 0.0;
      for (size_t p = sinks; p < n; p++) total += exp(z[p] - top);
      for (size_t p = sinks; p < n; p++) dst[p] += exp(z[p] - top) / total / (double)group;
    }
    for (size_t p = sinks; p < n; p++) {
      const double *v = h->data.V + p * d;
      double sq = 0.0;
      for (size_t c = 0; c < d; c++) sq += v[c] * v[c];
      dst[p] *= sqrt(sq);
      max = dst[p] > max ? dst[p] : max;
    }
  }
  for (size_t g = 0; g < G && !rc; g++)
    for (size_t p = 0; p < sinks; p++) out[g * n + p] = max + 1.0;
  free(sum);
  free(outer);
  free(freq);
  free(rot);
  free(mu);
  free(cov);
  free(tmp);
  free(z);
  return rc;
}

/* The model CriticalKV projects with (policy->model or the default),
 * checked against the trace: the shape of its attention (layers, query and
 * KV heads, head dim, vocabulary when the trace records one) and of W_o. */
static int critical_model(const EvictPolicy *p, const TraceMeta *meta, const char *trace,
                          Model **out) {
  const char *path = p->model ? p->model : model_default_path();
  Model *model = NULL;
  int rc = model_load(path, &model);
  if (rc) return obc_fail_context(rc, "%s: --score %s", trace, p->score);
  const ModelConfig *c = &model->config;
  const TraceModel *m = &meta->model;
  const ModelMatrix *wo = &model->weights.layers[0].wo;
  if (c->n_layers != m->n_layers || c->n_heads != m->n_heads || c->n_kv_heads != m->n_kv_heads ||
      c->head_dim != m->head_dim || (m->vocab_size && c->vocab_size != m->vocab_size) ||
      wo->cols != c->n_heads * c->head_dim || wo->rows != c->dim) {
    rc = obc_fail(OBC_EINVAL,
                  "%s: --score %s: the model %s does not match the trace (expected %zu layers, "
                  "%zu heads, %zu KV heads, head dim %zu, vocab %zu as in the trace of %s; found "
                  "%zu, %zu, %zu, %zu, %zu; hint: --model the file that captured it)",
                  trace, p->score, path, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim,
                  m->vocab_size, m->name, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                  c->vocab_size);
    model_free(model);
    return rc;
  }
  *out = model;
  return OBC_OK;
}

/* W_o of a layer (dim, n_heads x head_dim), dequantised exactly from its
 * stored type to fp32, then widened. row: scratch (n_heads x head_dim). */
static int layer_wo(const Model *model, size_t layer, float *row, double *out) {
  const ModelMatrix *wo = &model->weights.layers[layer].wo;
  for (size_t r = 0; r < wo->rows; r++) {
    int rc = model_matrix_row_f32(wo, r, row);
    if (rc) return obc_fail_context(rc, "%s: blk.%zu.attn_output.weight", model->path, layer);
    for (size_t c = 0; c < wo->cols; c++) out[r * wo->cols + c] = row[c];
  }
  return OBC_OK;
}

int evict_preset_scores(TraceReader *reader, const EvictPolicy *p, size_t n, double *scores,
                        size_t *window) {
  const EvictMethod *pr = method_of(p);
  const TraceMeta *meta = trace_meta(reader);
  const char *path = trace_path(reader);
  size_t L = meta->model.n_layers, G = meta->model.n_kv_heads;
  *window = pr->window;
  int rc = check_fixed_knobs(p);
  if (rc) return rc;
  /* The capture records the query statistics of the context's rows and of
   * every prompt row; query-aware candidates ending at the question, before
   * the template tail, would need those of the rows up to its end. */
  if (pr->source == EVICT_METHOD_EXPECTED && p->protocol == EVICT_PROTOCOL_AWARE &&
      n < meta->n_prompt)
    return obc_fail(OBC_EINVAL,
                    "%s: --score %s under --protocol aware needs the query statistics of the "
                    "%zu rows up to the question's end, which the trace does not record (it "
                    "holds the context's %zu rows and all %zu; hint: --protocol agnostic)",
                    path, p->score, n, meta->agnostic_rows, meta->n_prompt);
  if (pr->source == EVICT_METHOD_COLUMN_SUMS) {
    /* Query-agnostic candidates end at the question: the sums of the rows
     * before it. Query-aware ones end at the question's end: every prompt
     * row's sums less the template tail's rows, recomputed from the trace
     * (tail_sums); without a tail, every prompt row's. */
    bool aware_tail = p->protocol == EVICT_PROTOCOL_AWARE && n < meta->n_prompt;
    TraceSumRows rows = n < meta->n_prompt && !aware_tail ? TRACE_ROWS_AGNOSTIC : TRACE_ROWS_ALL;
    /* The swap is the attention term: h2o_scores is one path for every term. */
    static const H2oTerm terms[] = {H2O_ATTN, H2O_OBC_V, H2O_OBC_K, H2O_OBC_VK, H2O_ATTN};
    H2oForm form = pr->row_mean ? H2O_OBSERVED : H2O_ACCUMULATED;
    assert((form == H2O_OBSERVED) == (pr->heads == EVICT_HEADS_GROUP_MEAN));
    if (aware_tail) return aware_h2o_scores(reader, p, n, terms[p->inner], form, scores);
    for (size_t l = 0; l < L && !rc; l++)
      rc = h2o_scores(reader, l, n, rows, terms[p->inner], form, scores + l * G * n);
    if (rc == OBC_ENOTFOUND)
      return obc_fail(OBC_EINVAL,
                      "%s: --score %s: the trace has no accumulated column sums (capture it "
                      "without --no-column-sums)",
                      path, p->score);
    return rc;
  }
  if (pr->source == EVICT_METHOD_EXPECTED) {
    const char *layout = meta->model.rope_layout;
    if (!meta->has_query_stats)
      return obc_fail(OBC_EINVAL,
                      "%s: --score %s: the trace has no pre-RoPE query statistics (capture it "
                      "again with this obcache, without --no-column-sums)",
                      path, p->score);
    if (strcmp(layout, "interleaved") && strcmp(layout, "half"))
      return obc_fail(OBC_EINVAL,
                      "%s: --score %s: rope_layout '%s' (expected interleaved or half: the "
                      "future queries' RoPE)",
                      path, p->score, layout);
    if (n <= pr->sinks)
      return obc_fail(OBC_EINVAL, "%s: --score %s needs more than %zu candidates (found %zu)", path,
                      p->score, pr->sinks, n);
    if (meta->model.head_dim > 512)
      return obc_fail(OBC_EINVAL, "%s: head_dim %zu (expected at most 512)", path,
                      meta->model.head_dim);
  }
  if (pr->source == EVICT_METHOD_POSITION) {
    for (size_t i = 0; i < L * G; i++)
      for (size_t q = 0; q < n; q++) scores[i * n + q] = q < pr->sinks ? (double)n : (double)q;
    return OBC_OK;
  }
  if (pr->source == EVICT_METHOD_ATTENTION) {
    size_t captured = evict_rows_ending_at(meta, n);
    if (n <= pr->window)
      return obc_fail(OBC_EINVAL,
                      "%s: --score %s scores with a window of %zu query rows and needs more "
                      "candidates than that (found %zu)",
                      path, p->score, pr->window, n);
    if (captured < pr->window)
      return obc_fail(OBC_EINVAL,
                      "%s: --score %s needs the %zu query rows ending at position %zu, but the "
                      "trace captures %zu there (hint: capture with more --rows)",
                      path, p->score, pr->window, n - 1, captured);
    if (meta->model.head_dim > 512)
      return obc_fail(OBC_EINVAL, "%s: head_dim %zu (expected at most 512)", path,
                      meta->model.head_dim);
  }
  size_t H = meta->model.n_heads, cols = n > pr->window ? n - pr->window : 0;
  Model *model = NULL;
  if (pr->critical && (rc = critical_model(p, meta, path, &model))) return rc;
  size_t dim = model ? model->config.dim : 0, q_dim = H * meta->model.head_dim;
  /* W_o, then the projected values' scratch */
  double *wo = model ? obc_malloc((q_dim + PROJECT_CHUNK) * dim * sizeof *wo, "W_o") : NULL;
  float *wo_row = model ? obc_malloc(q_dim * sizeof *wo_row, "W_o row") : NULL;
  ScoreHead h;
  rc = model && (!wo || !wo_row) ? OBC_ENOMEM : score_head_alloc(&h, reader);
  if (rc) {
    free(wo);
    free(wo_row);
    model_free(model);
    return rc;
  }
  double *heads = obc_malloc((H * cols + 1) * sizeof *heads, "preset scores per query head");
  double *work = obc_malloc((4 * n + meta->model.head_dim) * sizeof *work, "preset scratch");
  WindowScratch ws = {0};
  if (!heads || !work) rc = OBC_ENOMEM;
  if (!rc && pr->source == EVICT_METHOD_ATTENTION)
    rc = window_scratch_alloc(&ws, pr->window, n, meta->model.head_dim);
  for (size_t l = 0; l < L && !rc; l++) {
    if (pr->source == EVICT_METHOD_ATTENTION) {
      EvictPresetInner inner = (EvictPresetInner)p->inner;
      if (model && (rc = layer_wo(model, l, wo_row, wo))) break;
      rc = layer_attention(pr, inner, reader, &h, l, n, heads, work, &ws, model ? wo : NULL, dim,
                           scores + l * G * n, model ? scores + (L + l) * G * n : NULL);
      continue;
    }
    if (pr->source == EVICT_METHOD_EXPECTED) {
      rc = layer_expected(reader, &h, l, n, pr, scores + l * G * n);
      continue;
    }
    for (size_t g = 0; g < G && !rc; g++) {
      rc = score_head_read(&h, reader, l, g);
      if (rc) {
        obc_fail_context(rc, "%s: layer %zu, KV head %zu", path, l, g);
        break;
      }
      key_scores(&h.data, n, pr->source, work, scores + (l * G + g) * n);
    }
  }
  free(heads);
  free(work);
  window_scratch_free(&ws);
  free(wo);
  free(wo_row);
  model_free(model);
  score_head_free(&h);
  return rc;
}

/* ==== Kept sets ==== */

/* Keeps the `count` best of candidates [0, n) of one head (ties: lower
 * position first). ranked: scratch (n). */
static void keep_top(const double *scores, size_t n, size_t count, unsigned char *keep,
                     size_t *ranked) {
  if (count > n) count = n;
  select_rank_top(scores, n, count, ranked);
  for (size_t i = 0; i < count; i++) keep[ranked[i]] = 1;
}

/* kvpress CriticalAdaKVPress.compress on one layer of G KV heads, k kept
 * per head on average: base (G, n) the base score s, norm (G, n) the
 * projected value norms w; into out (G, n) the scores its bottom-k across
 * heads is taken from, DBL_MAX on exactly the G k it keeps.
 *  1. safeguard: each head's best floor(k / 5) by s get DBL_MAX (s');
 *  2. head budgets: b_g = head g's share of the layer's best G k of s'
 *     (score, then lower head, then lower position: evict_keep_layer_best);
 *  3. first stage: each head's best floor(b_g / 2) of s' get DBL_MAX (s'');
 *  4. second stage: (s'' + 1e-4) w, and its best b_g per head DBL_MAX.
 * A position at DBL_MAX in s'' scores DBL_MAX w in stage 4 (inf when w > 1,
 * as in kvpress's floats): with w > 0, every one of them is among its
 * head's b_g (there are max(floor(k / 5), floor(b_g / 2)) <= b_g).
 * work (G n), mask (G n), pool (G n), ranked (n): scratch. */
static void critical_adakv_layer(const EvictPolicy *p, const double *base, const double *norm,
                                 size_t G, size_t n, size_t k, double *out, double *work,
                                 unsigned char *mask, EvictCandidate *pool, size_t *ranked) {
  size_t safe = evict_budget_share(p, k, ADAKV_SAFEGUARD_DIVISOR, ADAKV_SAFEGUARD);
  memcpy(work, base, G * n * sizeof *work);
  for (size_t g = 0; g < G; g++) {
    select_rank_top(base + g * n, n, safe, ranked);
    for (size_t r = 0; r < safe; r++) work[g * n + ranked[r]] = DBL_MAX;
  }
  memset(mask, 0, G * n);
  evict_keep_layer_best(work, G, n, n, G * k, mask, pool);
  for (size_t g = 0; g < G; g++) {
    double *s = work + g * n, *dst = out + g * n;
    size_t budget = 0;
    for (size_t q = 0; q < n; q++) budget += mask[g * n + q];
    /* kvpress: (head_budgets * first_stage_ratio).to(int64) */
    size_t first =
        evict_budget_share(p, budget, CRITICAL_FIRST_STAGE_DIVISOR, CRITICAL_FIRST_STAGE_RATIO);
    select_rank_top(s, n, first, ranked);
    for (size_t r = 0; r < first; r++) s[ranked[r]] = DBL_MAX;
    for (size_t q = 0; q < n; q++) dst[q] = (s[q] + CRITICAL_EPSILON) * norm[g * n + q];
    select_rank_top(dst, n, budget, ranked);
    for (size_t r = 0; r < budget; r++) dst[ranked[r]] = DBL_MAX;
  }
}

int evict_preset_final_scores(const EvictPolicy *p, const double *scores, size_t n_layers,
                              size_t n_kv_heads, size_t n, double *out) {
  size_t cells = n_layers * n_kv_heads * n, k = 0;
  if (!method_of(p)->critical) {
    memcpy(out, scores, cells * sizeof *out);
    return OBC_OK;
  }
  int rc = evict_preset_count(p, n, &k);
  if (rc) return rc;
  if (method_of(p)->allocation == EVICT_ALLOC_ADAKV) {
    size_t G = n_kv_heads;
    double *work = obc_malloc((G * n + 1) * sizeof *work, "CriticalAdaKV scores");
    unsigned char *mask = obc_malloc(G * n + 1, "CriticalAdaKV head budgets");
    EvictCandidate *pool = obc_malloc((G * n + 1) * sizeof *pool, "CriticalAdaKV candidates");
    size_t *ranked = obc_malloc((n + 1) * sizeof *ranked, "CriticalAdaKV ranking");
    rc = work && mask && pool && ranked ? OBC_OK : OBC_ENOMEM;
    for (size_t l = 0; l < n_layers && !rc; l++)
      critical_adakv_layer(p, scores + l * G * n, scores + cells + l * G * n, G, n, k,
                           out + l * G * n, work, mask, pool, ranked);
    free(work);
    free(mask);
    free(pool);
    free(ranked);
    return rc;
  }
  size_t first = evict_preset_critical_first_stage(p, n, k);
  size_t *ranked = obc_malloc((first + 1) * sizeof *ranked, "first-stage ranking");
  if (!ranked) return OBC_ENOMEM;
  for (size_t i = 0; i < n_layers * n_kv_heads; i++) {
    const double *base = scores + i * n, *norm = scores + cells + i * n;
    double *dst = out + i * n;
    for (size_t q = 0; q < n; q++) dst[q] = (base[q] + CRITICAL_EPSILON) * norm[q];
    select_rank_top(base, n, first, ranked);
    for (size_t r = 0; r < first; r++) dst[ranked[r]] = DBL_MAX;
  }
  free(ranked);
  return OBC_OK;
}

int evict_preset_keep(const EvictPolicy *p, const double *scores, size_t n_layers,
                      size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
                      EvictKeepSet *out) {
  const EvictMethod *pr = method_of(p);
  memset(out, 0, sizeof *out);
  size_t k = 0, G = n_kv_heads, n_protected = 0;
  int rc = evict_preset_count(p, n, &k);
  if (rc) return rc;
  /* Two stages: select from the budget's final scores. */
  double *final = NULL;
  if (pr->critical) {
    final = obc_malloc((n_layers * n_kv_heads * n + 1) * sizeof *final, "final scores");
    rc = final ? evict_preset_final_scores(p, scores, n_layers, n_kv_heads, n, final) : OBC_ENOMEM;
    if (rc) {
      free(final);
      return rc;
    }
    scores = final;
  }
  /* H2O: the recent window [n - recent, n), kept outright. */
  size_t recent = pr->recent_half ? k / H2O_RECENT_DIVISOR : 0;
  for (size_t q = 0; protect && q < n - recent; q++) n_protected += protect[q];
  if (n_protected + recent > k) {
    free(final);
    if (recent)
      return obc_fail(OBC_EINVAL,
                      "--budget %s: %zu tokens leave no room for the %zu protected positions "
                      "beside the recent window of %zu (--protect, inside the budget; hint: a "
                      "larger budget)",
                      p->budget_text, k, n_protected, recent);
    return obc_fail(OBC_EINVAL,
                    "--budget %s: %zu tokens leave no room for the %zu protected positions "
                    "(--protect, inside the budget; hint: a larger budget)",
                    p->budget_text, k, n_protected);
  }
  /* Protected candidates and the recent window rank first in every head
   * (kvpress: score max + 1). */
  double *boosted = NULL;
  if (protect || recent) {
    boosted = obc_malloc((n_layers * n_kv_heads * n + 1) * sizeof *boosted, "protected scores");
    if (!boosted) {
      free(final);
      return OBC_ENOMEM;
    }
    for (size_t i = 0; i < n_layers * n_kv_heads * n; i++)
      boosted[i] = (protect && protect[i % n]) || i % n >= n - recent ? INFINITY : scores[i];
    scores = boosted;
  }
  out->n_layers = n_layers;
  out->n_kv_heads = G;
  out->n_prompt = n_prompt;
  out->n_candidates = n;
  out->budget = k;
  out->window = pr->window;
  out->policy = *p;
  out->policy.allocation = pr->allocation;
  out->policy.sinks = pr->sinks;
  out->policy.recent = recent;
  out->keep = obc_calloc(n_layers * G * n_prompt, 1, "kept positions");
  out->n_kept = obc_calloc(n_layers * G, sizeof(size_t), "kept counts");
  size_t *ranked = obc_malloc((n + 1) * sizeof *ranked, "selection ranking");
  EvictCandidate *pool = pr->allocation == EVICT_ALLOC_ADAKV
                             ? obc_malloc((G * n + 1) * sizeof *pool, "AdaKV candidates")
                             : NULL;
  if (!out->keep || !out->n_kept || !ranked || (pr->allocation == EVICT_ALLOC_ADAKV && !pool)) {
    free(ranked);
    free(pool);
    free(boosted);
    free(final);
    evict_keep_set_free(out);
    return OBC_ENOMEM;
  }
  for (size_t l = 0; l < n_layers && !rc; l++) {
    size_t per_head = k;
    if (pr->allocation == EVICT_ALLOC_PYRAMID)
      rc = evict_preset_pyramid_budget(p, n, pr->window, n_layers, l, &per_head);
    if (pr->allocation == EVICT_ALLOC_ADAKV)
      per_head = evict_budget_share(p, k, ADAKV_SAFEGUARD_DIVISOR, ADAKV_SAFEGUARD);
    if (!rc && per_head < n_protected) {
      if (pr->allocation == EVICT_ALLOC_PYRAMID)
        rc = obc_fail(OBC_EINVAL,
                      "--budget %s: layer %zu keeps %zu per KV head, fewer than the %zu "
                      "protected positions (--protect; hint: a larger budget)",
                      p->budget_text, l, per_head, n_protected);
      per_head = n_protected; /* AdaKV: each head's floor holds them */
    }
    for (size_t g = 0; g < G && !rc; g++) {
      unsigned char *keep = out->keep + (l * G + g) * n_prompt;
      keep_top(scores + (l * G + g) * n, n, per_head, keep, ranked);
      for (size_t q = n; q < n_prompt; q++) keep[q] = 1; /* after the candidates: always kept */
    }
    if (pr->allocation == EVICT_ALLOC_ADAKV) /* the rest of the layer's G x k */
      evict_keep_layer_best(scores + l * G * n, G, n, n_prompt, (k - per_head) * G,
                            out->keep + l * G * n_prompt, pool);
    evict_keep_count_layer(out, l);
  }
  free(ranked);
  free(pool);
  free(boosted);
  free(final);
  if (rc) evict_keep_set_free(out);
  return rc;
}
