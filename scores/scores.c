/* Every score and exact window error (docs/SCIENCE.md, "Approximate scores" and
 * "Exact errors over the window") for one (layer, KV head) and a list of
 * windows, in one fused backward sweep over the captured prompt rows: all
 * windows cost what the largest one costs.
 *
 * The algebra. For a pair (row i, token p) of query head h let
 *   a = A_ip = exp(z - lse_i), z = z_ip, e = exp(-lse_i),
 *   vv = ||v_p||^2, vo = v_p.o_i, oo = ||o_i||^2,
 *   dd = ||v_p - o_i||^2 = vv - 2 vo + oo, vd = v_p.(v_p - o_i) = vv - vo.
 * Then each quantity is a sum over window rows (and heads) of
 *   attn: a        attn2: a^2        vatp: (sum a) * ||v_p||_1 (after the sum)
 *   obc_v = exact_v: a^2 vv                       (o' - o = -a v)
 *   obc_k: (a z)^2 dd
 *   obc_vk: a^2 vv + (a z)^2 dd + 2 a^2 z vd      (the cross term 2 a^2 z (vv - vo))
 *   exact_k: r^2 (a - e)^2 dd, r = 1/(1 - a + e)  (o' - o = r (a - e)(o - v))
 *   exact_vk: r^2 (a^2 dd + 2 a e (vd - dd) + e^2 oo)   (o' - o = -r (a (v - o) + e o))
 *   remove: (a / (1 - a))^2 dd                    (o' - o = a (o - v) / (1 - a))
 * so one GEMM block of logits z = Q K^T * scale and one of vo = O V^T give
 * everything in O(1) per pair (oracle/exact_forms.h). A pair with a > 1/2
 * (at most one per row) cannot be read from the stored lse and O: its row's
 * attention is recomputed in double from q, K, V before the sweep
 * (oracle/dominant.h, docs/SCIENCE.md) and the sweep adds those numbers. A
 * row whose only live key is p (position 0, or every other weight
 * underflowing) loses its whole output ||o_i||^2 on removal.
 *
 * Parallel layout: prompt positions are cut into fixed blocks; one thread owns
 * a block for every head, row and window, walking rows s-1, s-2, ... and
 * copying its accumulators out when the number of rows walked equals a
 * requested W. Every output element is therefore summed by one thread in one
 * fixed order: results are bit-identical for any thread count. */
#include "scores/scores.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "oracle/dominant.h"
#include "oracle/exact_forms.h"
#include "oracle/fast_exp.h"
#include "oracle/oracle_gemm.h"

/* Positions per block and rows per GEMM: a block's logits for 3 heads take
 * 3 * 128 * 128 * 16 B = 768 KB (L2), its accumulators 24 KB (L1). A block of
 * 128 measured ~12% faster than 256 on the benchmark head. */
enum { SWEEP_BLOCK = 128, SWEEP_ROW_CHUNK = 128 };

/* Per-head accumulators of a block. */
enum {
  ACC_ATTN,
  ACC_ATTN2,
  ACC_OBC_V,
  ACC_OBC_K,
  ACC_OBC_VK,
  ACC_EXACT_K,
  ACC_EXACT_VK,
  ACC_REMOVE,
  ACC_COUNT
};

static const char *const score_names[OBC_Q_COUNT] = {"attn",    "attn2",    "vatp",   "snapkv",
                                                     "obc_v",   "obc_k",    "obc_vk", "exact_v",
                                                     "exact_k", "exact_vk", "remove"};

void score_options_default(ScoreOptions *options) {
  options->precision = OBC_PRECISION_FLOAT;
  options->aggregation = OBC_GQA_SUM;
  options->snapkv_kernel = 7;
}

const char *score_quantity_name(ScoreQuantity q) {
  assert(q < OBC_Q_COUNT);
  return score_names[q];
}

int score_quantity_from_name(const char *name) {
  for (int q = 0; q < OBC_Q_COUNT; q++)
    if (strcmp(name, score_names[q]) == 0) return q;
  return -1;
}

int score_quantity_is_score(ScoreQuantity q) { return q < OBC_Q_EXACT_V; }

void score_max_pool(const double *in, size_t n, size_t kernel, double *out) {
  assert(kernel % 2 == 1 && in != out);
  size_t half = kernel / 2;
  for (size_t p = 0; p < n; p++) {
    size_t lo = p > half ? p - half : 0, hi = p + half < n ? p + half : n - 1;
    double best = in[lo];
    for (size_t q = lo + 1; q <= hi; q++) best = in[q] > best ? in[q] : best;
    out[p] = best;
  }
}

typedef struct {
  const OracleHead *head;
  const OracleGemm *gemm;
  ScoreGqa aggregation;
  size_t last_row; /* index of the row at position n_prompt - 1 */
  size_t max_window;
  const size_t *windows; /* (n_windows) as requested */
  const size_t *order;   /* (n_windows) indices into windows, by ascending W */
  size_t n_windows;
  const double *v_sq;             /* (n_prompt) ||v_p||^2 */
  const double *v_l1;             /* (n_prompt) ||v_p||_1 */
  const double *o_sq;             /* (group_size, n_rows) ||o_i||^2 */
  const double *exp_neg_lse;      /* (group_size, n_rows) exp(-lse_i) */
  const OracleDominant *dominant; /* the window's rows */
} SweepPlan;

/* One thread's buffers. */
typedef struct {
  double *acc;    /* (group_size, ACC_COUNT, SWEEP_BLOCK) */
  double *z;      /* (group_size, SWEEP_ROW_CHUNK, SWEEP_BLOCK) logits */
  double *vo;     /* (group_size, SWEEP_ROW_CHUNK, SWEEP_BLOCK) v.o */
  float *scratch; /* (2, SWEEP_ROW_CHUNK, SWEEP_BLOCK) sgemm outputs, FLOAT only */
} SweepWork;

/* The fused pass over pairs lo..hi-1 of one row, none with a > 1/2: every
 * quantity from one exp, no branches. acc: (ACC_COUNT, SWEEP_BLOCK). */
static inline void sweep_pairs(const double *restrict z, const double *restrict vo,
                               const double *restrict vv, double lse, double e, double oo,
                               double *restrict acc, size_t lo, size_t hi) {
  double *restrict s_attn = acc + ACC_ATTN * SWEEP_BLOCK;
  double *restrict s_attn2 = acc + ACC_ATTN2 * SWEEP_BLOCK;
  double *restrict s_obc_v = acc + ACC_OBC_V * SWEEP_BLOCK;
  double *restrict s_obc_k = acc + ACC_OBC_K * SWEEP_BLOCK;
  double *restrict s_obc_vk = acc + ACC_OBC_VK * SWEEP_BLOCK;
  double *restrict s_exact_k = acc + ACC_EXACT_K * SWEEP_BLOCK;
  double *restrict s_exact_vk = acc + ACC_EXACT_VK * SWEEP_BLOCK;
  double *restrict s_remove = acc + ACC_REMOVE * SWEEP_BLOCK;
#pragma omp simd
  for (size_t t = lo; t < hi; t++) {
    double a = oracle_exp_fast(z[t] - lse);
    double dd, vd;
    oracle_pair_norms_from_dots(vv[t], vo[t], oo, &dd, &vd);
    /* a <= 1/2 here, so 1 - a is accurate and never a single live key. */
    double r, inv_live;
    oracle_pair_reciprocals(1.0 - a, e, &r, &inv_live);
    double obc_v = oracle_form_obc_v(a, vv[t]);
    double obc_k = oracle_form_obc_k(a, z[t], dd);
    s_attn[t] += a;
    s_attn2[t] += a * a;
    s_obc_v[t] += obc_v;
    s_obc_k[t] += obc_k;
    s_obc_vk[t] += obc_v + obc_k + oracle_form_obc_vk_cross(a, z[t], vd);
    s_exact_k[t] += oracle_form_exact_k(a, e, r, dd);
    s_exact_vk[t] += oracle_form_exact_vk(a, e, r, oo, dd, vd);
    s_remove[t] += oracle_form_remove(a, inv_live, dd);
  }
}

/* Adds row `row` of query head j to the head's accumulators acc
 * (ACC_COUNT, SWEEP_BLOCK) for positions b0..b0+len-1 (len already stops at
 * the row's own position). z (len) and vo (len) are the row's GEMM outputs.
 * The row's pair with A > 1/2, when there is one in this block, adds its
 * recomputed quantities (oracle/dominant.h); the fused pass runs over the
 * stretches around it. */
static void sweep_row(const SweepPlan *plan, size_t j, size_t row, const double *z,
                      const double *vo, size_t b0, size_t len, double *acc) {
  const OracleHead *head = plan->head;
  size_t ho = j * head->n_rows + row;
  const double lse = head->lse[ho], e = plan->exp_neg_lse[ho], oo = plan->o_sq[ho];
  const double *vv = plan->v_sq + b0;
  const OracleDominantPair *dominant = oracle_dominant_pair(plan->dominant, j, row);
  size_t p = dominant->position;
  if (p == ORACLE_DOMINANT_NONE || p < b0 || p - b0 >= len) {
    sweep_pairs(z, vo, vv, lse, e, oo, acc, 0, len);
    return;
  }
  size_t t = p - b0;
  sweep_pairs(z, vo, vv, lse, e, oo, acc, 0, t);
  const OraclePairForms *f = &dominant->forms;
  acc[ACC_ATTN * SWEEP_BLOCK + t] += f->attn;
  acc[ACC_ATTN2 * SWEEP_BLOCK + t] += f->attn2;
  acc[ACC_OBC_V * SWEEP_BLOCK + t] += f->obc_v;
  acc[ACC_OBC_K * SWEEP_BLOCK + t] += f->obc_k;
  acc[ACC_OBC_VK * SWEEP_BLOCK + t] += f->obc_vk;
  acc[ACC_EXACT_K * SWEEP_BLOCK + t] += f->exact_k;
  acc[ACC_EXACT_VK * SWEEP_BLOCK + t] += f->exact_vk;
  acc[ACC_REMOVE * SWEEP_BLOCK + t] += f->remove;
  sweep_pairs(z, vo, vv, lse, e, oo, acc, t + 1, len);
}

/* dst (nb) = the heads' accumulators `which` (acc: group_size, ACC_COUNT,
 * SWEEP_BLOCK) combined in head order. */
static void sweep_combine(const double *acc, size_t group_size, int which, size_t nb, ScoreGqa how,
                          double *dst) {
  memcpy(dst, acc + which * SWEEP_BLOCK, nb * sizeof *dst);
  for (size_t j = 1; j < group_size; j++) {
    const double *src = acc + (j * ACC_COUNT + which) * SWEEP_BLOCK;
    if (how == OBC_GQA_MAX)
      for (size_t t = 0; t < nb; t++) dst[t] = src[t] > dst[t] ? src[t] : dst[t];
    else
      for (size_t t = 0; t < nb; t++) dst[t] += src[t];
  }
  if (how == OBC_GQA_MEAN)
    for (size_t t = 0; t < nb; t++) dst[t] /= (double)group_size;
}

/* Copies the block's current sums into window w of out. SnapKV is left as
 * the aggregated attn; it is pooled across blocks once the sweep is done. */
static void sweep_snapshot(const SweepPlan *plan, const double *acc, size_t b0, size_t nb, size_t w,
                           double *out) {
  size_t s = plan->head->n_prompt, g = plan->head->group_size;
  double *row[OBC_Q_COUNT];
  for (int q = 0; q < OBC_Q_COUNT; q++) row[q] = out + (w * OBC_Q_COUNT + q) * s + b0;
  static const struct {
    ScoreQuantity quantity;
    int acc;
    int is_score;
  } map[] = {{OBC_Q_ATTN, ACC_ATTN, 1},       {OBC_Q_ATTN2, ACC_ATTN2, 1},
             {OBC_Q_OBC_V, ACC_OBC_V, 1},     {OBC_Q_OBC_K, ACC_OBC_K, 1},
             {OBC_Q_OBC_VK, ACC_OBC_VK, 1},   {OBC_Q_EXACT_V, ACC_OBC_V, 0},
             {OBC_Q_EXACT_K, ACC_EXACT_K, 0}, {OBC_Q_EXACT_VK, ACC_EXACT_VK, 0},
             {OBC_Q_REMOVE, ACC_REMOVE, 0}};
  for (size_t m = 0; m < sizeof map / sizeof map[0]; m++)
    sweep_combine(acc, g, map[m].acc, nb, map[m].is_score ? plan->aggregation : OBC_GQA_SUM,
                  row[map[m].quantity]);
  for (size_t t = 0; t < nb; t++) {
    row[OBC_Q_VATP][t] = row[OBC_Q_ATTN][t] * plan->v_l1[b0 + t];
    row[OBC_Q_SNAPKV][t] = row[OBC_Q_ATTN][t];
  }
}

/* Positions b0..b0+nb-1 for every head, row and window. */
static void sweep_block(const SweepPlan *plan, size_t b0, size_t nb, SweepWork *work, double *out) {
  const OracleHead *head = plan->head;
  size_t s = head->n_prompt, g = head->group_size;
  size_t plane = (size_t)SWEEP_ROW_CHUNK * SWEEP_BLOCK;
  memset(work->acc, 0, g * ACC_COUNT * SWEEP_BLOCK * sizeof *work->acc);
  size_t next = 0;
  for (size_t c0 = 0; c0 < plan->max_window; c0 += SWEEP_ROW_CHUNK) {
    size_t n = plan->max_window - c0 < SWEEP_ROW_CHUNK ? plan->max_window - c0 : SWEEP_ROW_CHUNK;
    /* Row k of the chunk (k = 0 the latest) sits at position top - k and
     * reaches this block only when top - k >= b0 (causality). */
    size_t top = s - 1 - c0;
    size_t n_live = top < b0 ? 0 : (top - b0 + 1 < n ? top - b0 + 1 : n);
    size_t row_lo = plan->last_row - c0 + 1 - n_live; /* GEMM rows ascend in position */
    for (size_t j = 0; j < g && n_live; j++)
      oracle_gemm_block(plan->gemm, j, row_lo, n_live, b0, nb, work->z + j * plane,
                        work->vo + j * plane, work->scratch);
    for (size_t k = 0; k < n; k++) {
      if (k < n_live) {
        size_t kk = n_live - 1 - k;
        size_t reach = top - k - b0 + 1, len = reach < nb ? reach : nb;
        for (size_t j = 0; j < g; j++)
          sweep_row(plan, j, row_lo + kk, work->z + j * plane + kk * nb,
                    work->vo + j * plane + kk * nb, b0, len,
                    work->acc + j * ACC_COUNT * SWEEP_BLOCK);
      }
      size_t walked = c0 + k + 1;
      while (next < plan->n_windows && plan->windows[plan->order[next]] == walked)
        sweep_snapshot(plan, work->acc, b0, nb, plan->order[next++], out);
    }
  }
}

/* Checks the request; finds the row of position s-1 and the number of
 * contiguous prompt rows captured up to it. */
static int sweep_check(const OracleHead *head, const size_t *windows, size_t n_windows,
                       const ScoreOptions *options, size_t *last_row, size_t *max_window) {
  size_t s = head->n_prompt;
  if (options->snapkv_kernel % 2 == 0)
    return obc_fail(OBC_EINVAL, "score sweep: SnapKV kernel %zu (expected an odd width >= 1)",
                    options->snapkv_kernel);
  if (n_windows == 0) return obc_fail(OBC_EINVAL, "score sweep: no window requested");
  size_t end = 0;
  while (end < head->n_rows && head->row_positions[end] < (int64_t)s) end++;
  if (end == 0 || head->row_positions[end - 1] != (int64_t)s - 1)
    return obc_fail(OBC_EINVAL,
                    "score sweep: the last prompt row (position %zu) is not captured (hint: "
                    "capture the final prompt rows)",
                    s - 1);
  size_t captured = 1;
  while (captured < end && head->row_positions[end - 1 - captured] == (int64_t)(s - 1 - captured))
    captured++;
  *last_row = end - 1;
  *max_window = 0;
  for (size_t w = 0; w < n_windows; w++) {
    if (windows[w] < 1 || windows[w] > captured)
      return obc_fail(OBC_EINVAL,
                      "score sweep: window %zu out of range (expected 1..%zu, the contiguous "
                      "prompt rows captured)",
                      windows[w], captured);
    if (windows[w] > *max_window) *max_window = windows[w];
  }
  return 0;
}

int score_window_sweep(const OracleHead *head, const size_t *windows, size_t n_windows,
                       const ScoreOptions *options, double *out) {
  assert(head && windows && options && out);
  size_t last_row = 0, max_window = 0;
  int rc = sweep_check(head, windows, n_windows, options, &last_row, &max_window);
  if (rc) return rc;
  size_t s = head->n_prompt, d = head->head_dim, g = head->group_size;
  size_t n_ho = g * head->n_rows;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  size_t acc_n = g * ACC_COUNT * SWEEP_BLOCK, plane = (size_t)SWEEP_ROW_CHUNK * SWEEP_BLOCK;
  size_t per_thread = acc_n + 2 * g * plane;
  OracleGemm gemm;
  OracleDominant dominant;
  rc = oracle_gemm_init(&gemm, head, s, options->precision);
  if (rc) return rc;
  /* Whole chunks: the numbers of a row do not depend on the largest window. */
  rc = oracle_dominant_init(&dominant, head,
                            oracle_dominant_whole_chunks(last_row + 1 - max_window, last_row + 1),
                            last_row + 1);
  if (rc) {
    oracle_gemm_free(&gemm);
    return rc;
  }
  size_t *order = obc_malloc(n_windows * sizeof *order, "window order");
  double *v_sq = obc_malloc(2 * s * sizeof *v_sq, "value norms");
  double *o_sq = obc_malloc(2 * n_ho * sizeof *o_sq, "output norms");
  double *buffers = obc_malloc((size_t)threads * per_thread * sizeof *buffers, "sweep blocks");
  float *scratch =
      options->precision == OBC_PRECISION_FLOAT
          ? obc_malloc((size_t)threads * 2 * plane * sizeof *scratch, "float sweep blocks")
          : NULL;
  if (!order || !v_sq || !o_sq || !buffers ||
      (options->precision == OBC_PRECISION_FLOAT && !scratch)) {
    rc = OBC_ENOMEM;
    goto done;
  }
  /* Windows by ascending W, ties in request order. */
  for (size_t w = 0; w < n_windows; w++) {
    size_t k = w;
    while (k > 0 && windows[order[k - 1]] > windows[w]) {
      order[k] = order[k - 1];
      k--;
    }
    order[k] = w;
  }
  double *v_l1 = v_sq + s, *exp_neg_lse = o_sq + n_ho;
  for (size_t p = 0; p < s; p++) {
    double sq = 0.0, l1 = 0.0;
    for (size_t c = 0; c < d; c++) {
      double v = head->V[p * d + c];
      sq += v * v;
      l1 += v < 0 ? -v : v;
    }
    v_sq[p] = sq;
    v_l1[p] = l1;
  }
  for (size_t i = 0; i < n_ho; i++) {
    double sq = 0.0;
    for (size_t c = 0; c < d; c++) sq += head->O[i * d + c] * head->O[i * d + c];
    o_sq[i] = sq;
    exp_neg_lse[i] = exp(-head->lse[i]);
  }
  SweepPlan plan = {
      head, &gemm, options->aggregation, last_row, max_window, windows, order, n_windows, v_sq,
      v_l1, o_sq,  exp_neg_lse,          &dominant};
  size_t n_blocks = (s + SWEEP_BLOCK - 1) / SWEEP_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t b = 0; b < n_blocks; b++) {
    size_t t = (size_t)omp_get_thread_num();
    double *mine = buffers + t * per_thread;
    SweepWork work = {mine, mine + acc_n, mine + acc_n + g * plane,
                      scratch ? scratch + t * 2 * plane : NULL};
    size_t b0 = b * SWEEP_BLOCK, nb = s - b0 < SWEEP_BLOCK ? s - b0 : SWEEP_BLOCK;
    sweep_block(&plan, b0, nb, &work, out);
  }
  for (size_t w = 0; w < n_windows; w++)
    score_max_pool(out + (w * OBC_Q_COUNT + OBC_Q_ATTN) * s, s, options->snapkv_kernel,
                   out + (w * OBC_Q_COUNT + OBC_Q_SNAPKV) * s);
done:
  free(order);
  free(v_sq);
  free(o_sq);
  free(buffers);
  free(scratch);
  oracle_dominant_free(&dominant);
  oracle_gemm_free(&gemm);
  return rc;
}
