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
 *   attn: a        attn2: a^2        attn_vl1: (sum a) * ||v_p||_1 (after the sum)
 *   obc_v = exact_v: a^2 vv                       (o' - o = -a v)
 *   obc_k: (a z)^2 dd
 *   obc_vk: a^2 vv + (a z)^2 dd + 2 a^2 z vd      (the cross term 2 a^2 z (vv - vo))
 *   exact_k: r^2 (a - e)^2 dd, r = 1/(1 - a + e)  (o' - o = r (a - e)(o - v))
 *   exact_vk: r^2 (a^2 dd + 2 a e (vd - dd) + e^2 oo)   (o' - o = -r (a (v - o) + e o))
 *   remove: (a / (1 - a))^2 dd                    (o' - o = a (o - v) / (1 - a))
 * so one GEMM block of logits z = Q K^T * scale and one of vo = O V^T give
 * everything in O(1) per pair (oracle/exact_forms.h). A pair with a > 1/2
 * (at most one per row) cannot be read from the stored lse and O: its row's
 * attention is recomputed from the same GEMM outputs (whole rows: every
 * causal key) and one more product of the row's weights with V
 * (oracle/dominant.h, docs/SCIENCE.md), and the sweep adds those numbers. A
 * row whose only live key is p (position 0, or every other weight
 * underflowing) loses its whole output ||o_i||^2 on removal.
 *
 * Layout: rows are taken in chunks of SWEEP_ROW_CHUNK from the last prompt
 * row backwards. For each chunk, the logits of every head against all its
 * causal keys (one GEMM for the group per fixed key slab), the dominant
 * pairs, then the position blocks: one thread owns a block, computes the
 * block's v.o for every head and row of the chunk, adds each row to the
 * block's accumulators and copies them out when the number of rows walked
 * equals a requested W. Every output element is
 * therefore summed in one fixed order and every GEMM call has a fixed shape:
 * results are bit-identical for any thread count. */
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

/* Positions per block, rows per chunk and keys per GEMM call. A chunk's GEMM
 * outputs cover whole rows (every causal key), so the dominant key of each
 * row is found from them and no second product is needed; a block's
 * accumulators for 3 heads (24 KB) stay in L1 while the chunk's rows pass. */
enum { SWEEP_BLOCK = 128, SWEEP_ROW_CHUNK = 64, SWEEP_SLAB = 1024 };


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

static const char *const score_names[OBC_Q_COUNT] = {
    "attn",   "attn2",   "attn_vl1", "attn_maxpool", "obc_v", "obc_k",
    "obc_vk", "exact_v", "exact_k",  "exact_vk",     "remove"};

void score_options_default(ScoreOptions *options) {
  options->precision = OBC_PRECISION_FLOAT;
  options->aggregation = OBC_GQA_SUM;
  options->maxpool_kernel = 7;
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

/* What every step of one backward pass over the window rows reads: the
 * head and its GEMMs, the windows by ascending W, the norms computed once. */
typedef struct {
  const OracleHead *head;
  const OracleGemm *gemm;
  OraclePrecision precision;
  ScoreGqa aggregation;
  int threads;
  const size_t *windows; /* (n_windows) as requested */
  const size_t *order;   /* (n_windows) indices into windows, by ascending W */
  size_t n_windows;
  const double *v_sq;        /* (n_prompt) ||v_p||^2 */
  const double *v_l1;        /* (n_prompt) ||v_p||_1 */
  const double *o_sq;        /* (group_size, n_rows) ||o_i||^2 */
  const double *exp_neg_lse; /* (group_size, n_rows) exp(-lse_i) */
} WindowPass;

/* One chunk of rows (the k-th of the chunk, kk = n - 1 - k from its first
 * row, sits at position top - k): every head's GEMM outputs against keys
 * 0..top and each row's dominant pair. Arrays of floats (FLOAT) or doubles
 * (DOUBLE) by precision; in z row kk of head j starts at (j * n + kk) * ld
 * (one GEMM for the group), in w at (j * SWEEP_ROW_CHUNK + kk) * ld. */
typedef struct {
  size_t c0;                /* rows walked before the chunk */
  size_t n;                 /* rows in the chunk */
  size_t row_lo;            /* the chunk's first row (lowest position) */
  size_t top;               /* position of its last row */
  size_t ld;                /* n_prompt */
  void *z;                  /* logits (FLOAT: unscaled) */
  void *vo;                 /* per thread: (group_size * n, SWEEP_BLOCK) v.o of a block */
  void *w;                  /* dominant rows' weights, packed to the front of each head's rows */
  void *u;                  /* (group_size, SWEEP_ROW_CHUNK, head_dim) their other-key outputs */
  void *q, *o;              /* (group_size * n, head_dim) the chunk's rows, gathered */
  double *m, *z_top;        /* (group_size, SWEEP_ROW_CHUNK) of the packed rows */
  size_t *packed;           /* (group_size, SWEEP_ROW_CHUNK) chunk row of each packed row */
  OracleDominantPair *pair; /* (group_size, SWEEP_ROW_CHUNK) by chunk row */
} WindowChunk;

/* One row's GEMM outputs from a block's first position on: doubles (z
 * scaled), or the floats of FLOAT GEMMs widened in the pass (z = scale *
 * z_float, as oracle_gemm_block widens). */
typedef struct {
  const double *z, *vo;  /* DOUBLE */
  const float *zf, *vof; /* FLOAT (zf != NULL) */
  double scale;
} WindowRowIn;

/* Every quantity of pair t from its weight a = exp(z - lse), no branches
 * (a <= 1/2). */
static inline void sweep_pair(double a, double z, double vo, double vv, double e, double oo,
                              double *restrict acc, size_t t) {
  double dd, vd;
  oracle_pair_norms_from_dots(vv, vo, oo, &dd, &vd);
  /* a <= 1/2 here, so 1 - a is accurate and never a single live key. */
  double r, inv_live;
  oracle_pair_reciprocals(1.0 - a, e, &r, &inv_live);
  double obc_v = oracle_form_obc_v(a, vv);
  double obc_k = oracle_form_obc_k(a, z, dd);
  acc[ACC_ATTN * SWEEP_BLOCK + t] += a;
  acc[ACC_ATTN2 * SWEEP_BLOCK + t] += a * a;
  acc[ACC_OBC_V * SWEEP_BLOCK + t] += obc_v;
  acc[ACC_OBC_K * SWEEP_BLOCK + t] += obc_k;
  acc[ACC_OBC_VK * SWEEP_BLOCK + t] += obc_v + obc_k + oracle_form_obc_vk_cross(a, z, vd);
  acc[ACC_EXACT_K * SWEEP_BLOCK + t] += oracle_form_exact_k(a, e, r, dd);
  acc[ACC_EXACT_VK * SWEEP_BLOCK + t] += oracle_form_exact_vk(a, e, r, oo, dd, vd);
  acc[ACC_REMOVE * SWEEP_BLOCK + t] += oracle_form_remove(a, inv_live, dd);
}

/* The fused pass over pairs lo..hi-1 of one row, none with a > 1/2, in two
 * loops: the logits and weights first, then the quantities (one loop held
 * the exp's constants and the forms' values in more registers than there
 * are). acc: (ACC_COUNT, SWEEP_BLOCK). */
static inline void sweep_pairs(const WindowRowIn *in, const double *restrict vv, double lse,
                               double e, double oo, double *restrict acc, size_t lo, size_t hi) {
  double z[SWEEP_BLOCK], a[SWEEP_BLOCK];
  if (in->zf) {
    const float *restrict zf = in->zf;
    double scale = in->scale;
#pragma omp simd
    for (size_t t = lo; t < hi; t++) {
      z[t] = scale * zf[t];
      a[t] = oracle_exp_fast(z[t] - lse);
    }
    const float *restrict vof = in->vof;
#pragma omp simd
    for (size_t t = lo; t < hi; t++) sweep_pair(a[t], z[t], vof[t], vv[t], e, oo, acc, t);
  } else {
    const double *restrict zd = in->z, *restrict vo = in->vo;
#pragma omp simd
    for (size_t t = lo; t < hi; t++) a[t] = oracle_exp_fast(zd[t] - lse);
#pragma omp simd
    for (size_t t = lo; t < hi; t++) sweep_pair(a[t], zd[t], vo[t], vv[t], e, oo, acc, t);
  }
}

/* Adds row `row` of query head j to the head's accumulators acc
 * (ACC_COUNT, SWEEP_BLOCK) for positions b0..b0+len-1 (len already stops at
 * the row's own position). in: the row's GEMM outputs from b0 on.
 * The row's pair with A > 1/2 (dominant), when it falls in this block, adds
 * its recomputed quantities (oracle/dominant.h); the fused pass runs over
 * the stretches around it. */
static void sweep_row(const WindowPass *pass, size_t j, size_t row,
                      const OracleDominantPair *dominant, const WindowRowIn *in, size_t b0,
                      size_t len, double *acc) {
  const OracleHead *head = pass->head;
  size_t ho = j * head->n_rows + row;
  const double lse = head->lse[ho], e = pass->exp_neg_lse[ho], oo = pass->o_sq[ho];
  const double *vv = pass->v_sq + b0;
  size_t p = dominant->position;
  if (p == ORACLE_DOMINANT_NONE || p < b0 || p - b0 >= len) {
    sweep_pairs(in, vv, lse, e, oo, acc, 0, len);
    return;
  }
  size_t t = p - b0;
  sweep_pairs(in, vv, lse, e, oo, acc, 0, t);
  const OraclePairForms *f = &dominant->forms;
  acc[ACC_ATTN * SWEEP_BLOCK + t] += f->attn;
  acc[ACC_ATTN2 * SWEEP_BLOCK + t] += f->attn2;
  acc[ACC_OBC_V * SWEEP_BLOCK + t] += f->obc_v;
  acc[ACC_OBC_K * SWEEP_BLOCK + t] += f->obc_k;
  acc[ACC_OBC_VK * SWEEP_BLOCK + t] += f->obc_vk;
  acc[ACC_EXACT_K * SWEEP_BLOCK + t] += f->exact_k;
  acc[ACC_EXACT_VK * SWEEP_BLOCK + t] += f->exact_vk;
  acc[ACC_REMOVE * SWEEP_BLOCK + t] += f->remove;
  sweep_pairs(in, vv, lse, e, oo, acc, t + 1, len);
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
static void sweep_snapshot(const WindowPass *pass, const double *acc, size_t b0, size_t nb,
                           size_t w, double *out) {
  size_t s = pass->head->n_prompt, g = pass->head->group_size;
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
    sweep_combine(acc, g, map[m].acc, nb, map[m].is_score ? pass->aggregation : OBC_GQA_SUM,
                  row[map[m].quantity]);
  for (size_t t = 0; t < nb; t++) {
    row[OBC_Q_ATTN_VL1][t] = row[OBC_Q_ATTN][t] * pass->v_l1[b0 + t];
    row[OBC_Q_ATTN_MAXPOOL][t] = row[OBC_Q_ATTN][t];
  }
}

/* The GEMM outputs of chunk row kk of head j from key b0 on: the logits from
 * the chunk, v.o from the block's own product vo (group_size * n, SWEEP_BLOCK). */
static WindowRowIn sweep_row_in(const WindowPass *pass, const WindowChunk *ch, size_t j, size_t kk,
                                size_t b0, const void *vo) {
  size_t at = (j * ch->n + kk) * ch->ld + b0, vo_at = (j * ch->n + kk) * SWEEP_BLOCK;
  if (pass->precision == OBC_PRECISION_DOUBLE)
    return (WindowRowIn){.z = (const double *)ch->z + at, .vo = (const double *)vo + vo_at};
  return (WindowRowIn){.zf = (const float *)ch->z + at,
                       .vof = (const float *)vo + vo_at,
                       .scale = pass->head->attn_scale};
}

/* Asks for chunk row kk's logits at b0..b0+len-1 of every head ahead of
 * use: the chunk (MBs) lies in L3, and rows ld apart defeat the hardware
 * prefetcher. */
static void sweep_prefetch(const WindowPass *pass, const WindowChunk *ch, size_t kk, size_t b0,
                           size_t len) {
  size_t elem = oracle_precision_size(pass->precision);
  for (size_t j = 0; j < pass->head->group_size; j++) {
    size_t at = ((j * ch->n + kk) * ch->ld + b0) * elem;
    for (size_t byte = 0; byte < len * elem; byte += 64)
      __builtin_prefetch((const char *)ch->z + at + byte);
  }
}

/* The chunk's rows for positions b0..b0+nb-1 and every head; acc (group_size,
 * ACC_COUNT, SWEEP_BLOCK) holds the block's sums over the rows walked so far. */
static void sweep_block(const WindowPass *pass, const WindowChunk *ch, size_t b0, size_t nb,
                        double *acc, void *vo, double *out) {
  size_t g = pass->head->group_size;
  /* v.o of the block for every row of the chunk, while it stays in cache. */
  oracle_gemm_rows_raw(pass->gemm, ch->q, ch->o, g * ch->n, b0, nb, NULL, vo, SWEEP_BLOCK);
  size_t next = 0; /* first window not yet reached */
  while (next < pass->n_windows && pass->windows[pass->order[next]] <= ch->c0) next++;
  for (size_t k = 0; k < ch->n; k++) {
    size_t position = ch->top - k, kk = ch->n - 1 - k;
    if (position >= b0) {
      size_t reach = position - b0 + 1, len = reach < nb ? reach : nb;
      if (k + 1 < ch->n) sweep_prefetch(pass, ch, kk - 1, b0, len);
      for (size_t j = 0; j < g; j++) {
        WindowRowIn in = sweep_row_in(pass, ch, j, kk, b0, vo);
        sweep_row(pass, j, ch->row_lo + kk, &ch->pair[j * SWEEP_ROW_CHUNK + kk], &in, b0, len,
                  acc + j * ACC_COUNT * SWEEP_BLOCK);
      }
    }
    size_t walked = ch->c0 + k + 1;
    while (next < pass->n_windows && pass->windows[pass->order[next]] == walked)
      sweep_snapshot(pass, acc, b0, nb, pass->order[next++], out);
  }
}

/* Chunk row kk of head j: its dominant pair (oracle_dominant_find), its
 * weights left in w's slot kk. */
static void sweep_find_dominant(const WindowPass *pass, WindowChunk *ch, size_t j, size_t kk) {
  const OracleHead *head = pass->head;
  size_t row = ch->row_lo + kk, ho = j * head->n_rows + row, d = head->head_dim;
  size_t live = (size_t)head->row_positions[row] + 1, slot = j * SWEEP_ROW_CHUNK + kk;
  size_t elem = oracle_precision_size(pass->precision);
  size_t at = (j * ch->n + kk) * ch->ld * elem, w_at = slot * ch->ld * elem;
  ch->m[slot] = oracle_dominant_find(pass->gemm, (const char *)ch->z + at, (char *)ch->w + w_at,
                                     live, ch->top + 1, head->lse[ho], head->O + ho * d,
                                     &ch->pair[slot], &ch->z_top[slot]);
}

/* Head j's dominant rows of the chunk: one product u = W V, then each pair's
 * quantities (oracle_dominant_values). */
static void sweep_dominant_values(const WindowPass *pass, WindowChunk *ch, size_t j) {
  size_t base = j * SWEEP_ROW_CHUNK, elem = oracle_precision_size(pass->precision);
  oracle_dominant_values(pass->gemm, ch->n, ch->top + 1, (char *)ch->w + base * ch->ld * elem,
                         ch->ld, (char *)ch->u + base * pass->head->head_dim * elem, ch->m + base,
                         ch->z_top + base, ch->packed + base, ch->pair + base);
}

/* Rows c0..c0+n-1 walked back from the last prompt row: GEMMs over fixed key
 * slabs, the dominant pairs, then every position block. Each step splits its
 * work in the same pieces for any thread count. */
static void sweep_chunk(const WindowPass *pass, WindowChunk *ch, double *acc_all, double *out) {
  const OracleHead *head = pass->head;
  size_t g = head->group_size, s = head->n_prompt;
  size_t elem = oracle_precision_size(pass->precision);
  size_t n_keys = ch->top + 1, n_slabs = (n_keys + SWEEP_SLAB - 1) / SWEEP_SLAB;
  oracle_gemm_gather_rows(pass->gemm, ch->row_lo, ch->n, ch->q, ch->o);
#pragma omp parallel for schedule(dynamic, 1) num_threads(pass->threads)
  for (size_t slab = 0; slab < n_slabs; slab++) {
    size_t k0 = slab * SWEEP_SLAB, nk = n_keys - k0 < SWEEP_SLAB ? n_keys - k0 : SWEEP_SLAB;
    oracle_gemm_rows_raw(pass->gemm, ch->q, ch->o, g * ch->n, k0, nk, (char *)ch->z + k0 * elem,
                         NULL, ch->ld);
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(pass->threads)
  for (size_t item = 0; item < g * ch->n; item++)
    sweep_find_dominant(pass, ch, item / ch->n, item % ch->n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(pass->threads)
  for (size_t j = 0; j < g; j++) sweep_dominant_values(pass, ch, j);
  size_t n_blocks = (s + SWEEP_BLOCK - 1) / SWEEP_BLOCK, acc_n = g * ACC_COUNT * SWEEP_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(pass->threads)
  for (size_t b = 0; b < n_blocks; b++) {
    size_t b0 = b * SWEEP_BLOCK, nb = s - b0 < SWEEP_BLOCK ? s - b0 : SWEEP_BLOCK;
    void *vo =
        (char *)ch->vo + (size_t)omp_get_thread_num() * g * SWEEP_ROW_CHUNK * SWEEP_BLOCK * elem;
    sweep_block(pass, ch, b0, nb, acc_all + b * acc_n, vo, out);
  }
}


/* Checks the request; finds the row of position s-1 and the number of
 * contiguous prompt rows captured up to it. */
static int sweep_check(const OracleHead *head, const size_t *windows, size_t n_windows,
                       const ScoreOptions *options, size_t *last_row, size_t *max_window) {
  size_t s = head->n_prompt;
  if (options->maxpool_kernel % 2 == 0)
    return obc_fail(OBC_EINVAL, "score sweep: SnapKV kernel %zu (expected an odd width >= 1)",
                    options->maxpool_kernel);
  if (n_windows == 0) return obc_fail(OBC_EINVAL, "score sweep: no window requested");
  if (head->head_dim > 512)
    return obc_fail(OBC_EINVAL, "score sweep: head_dim %zu (expected at most 512)", head->head_dim);
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
  return OBC_OK;
}

/* Buffers of one call, sized for one (layer, KV head). */
typedef struct {
  WindowChunk chunk;
  double *acc;   /* (n_blocks, group_size, ACC_COUNT, SWEEP_BLOCK) */
  double *norms; /* v_sq, v_l1 (n_prompt each), o_sq, exp_neg_lse (group_size * n_rows each) */
  size_t *order;
} WindowBuffers;

static void sweep_buffers_free(WindowBuffers *b) {
  WindowChunk *ch = &b->chunk;
  free(ch->z), free(ch->vo), free(ch->w), free(ch->u), free(ch->m), free(ch->packed);
  free(ch->q), free(ch->o);
  free(ch->pair);
  free(b->acc), free(b->norms), free(b->order);
  memset(b, 0, sizeof *b);
}

static int sweep_buffers_alloc(WindowBuffers *b, const OracleHead *head, OraclePrecision precision,
                               int threads, size_t n_windows) {
  memset(b, 0, sizeof *b);
  size_t s = head->n_prompt, g = head->group_size, d = head->head_dim;
  size_t elem = oracle_precision_size(precision);
  size_t rows = g * SWEEP_ROW_CHUNK, n_blocks = (s + SWEEP_BLOCK - 1) / SWEEP_BLOCK;
  size_t n_ho = g * head->n_rows;
  WindowChunk *ch = &b->chunk;
  ch->ld = s;
  ch->z = obc_malloc(rows * s * elem, "sweep logits");
  ch->vo = obc_malloc((size_t)threads * rows * SWEEP_BLOCK * elem, "sweep value-output dots");
  ch->w = obc_malloc(rows * s * elem, "dominant-key weights");
  ch->u = obc_malloc(rows * d * elem, "dominant-key outputs");
  ch->q = obc_malloc(rows * d * elem, "chunk queries");
  ch->o = obc_malloc(rows * d * elem, "chunk outputs");
  ch->m = obc_malloc(2 * rows * sizeof *ch->m, "dominant-key sums");
  ch->packed = obc_malloc(rows * sizeof *ch->packed, "dominant-key rows");
  ch->pair = obc_malloc(rows * sizeof *ch->pair, "dominant-key pairs");
  b->acc = obc_calloc(n_blocks * g * ACC_COUNT * SWEEP_BLOCK, sizeof *b->acc, "sweep sums");
  b->norms = obc_malloc((2 * s + 2 * n_ho) * sizeof *b->norms, "value and output norms");
  b->order = obc_malloc(n_windows * sizeof *b->order, "window order");
  if (!ch->z || !ch->vo || !ch->w || !ch->u || !ch->q || !ch->o || !ch->m || !ch->packed ||
      !ch->pair || !b->acc || !b->norms || !b->order) {
    sweep_buffers_free(b);
    return OBC_ENOMEM;
  }
  ch->z_top = ch->m + rows;
  return OBC_OK;
}

/* ||v_p||^2 and ||v_p||_1 of every prompt position, ||o_i||^2 and
 * exp(-lse_i) of every (query head, row); the sums in vector lanes (their
 * order depends on the compiler's vector width, not on the threads). */
static void sweep_norms(const OracleHead *head, double *v_sq, double *v_l1, double *o_sq,
                        double *exp_neg_lse) {
  size_t s = head->n_prompt, d = head->head_dim, n_ho = head->group_size * head->n_rows;
  for (size_t p = 0; p < s; p++) {
    const double *v = head->V + p * d;
    double sq = 0.0, l1 = 0.0;
#pragma omp simd reduction(+ : sq, l1)
    for (size_t c = 0; c < d; c++) {
      sq += v[c] * v[c];
      l1 += fabs(v[c]);
    }
    v_sq[p] = sq;
    v_l1[p] = l1;
  }
  for (size_t i = 0; i < n_ho; i++) {
    const double *o = head->O + i * d;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (size_t c = 0; c < d; c++) sq += o[c] * o[c];
    o_sq[i] = sq;
    exp_neg_lse[i] = exp(-head->lse[i]);
  }
}

int score_window_sweep(const OracleHead *head, const size_t *windows, size_t n_windows,
                       const ScoreOptions *options, double *out) {
  assert(head && windows && options && out);
  size_t last_row = 0, max_window = 0;
  int rc = sweep_check(head, windows, n_windows, options, &last_row, &max_window);
  if (rc) return rc;
  size_t s = head->n_prompt, g = head->group_size, n_ho = g * head->n_rows;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  OracleGemm gemm;
  WindowBuffers b;
  rc = oracle_gemm_init(&gemm, head, s, options->precision);
  if (rc) return rc;
  if ((rc = sweep_buffers_alloc(&b, head, options->precision, threads, n_windows))) {
    oracle_gemm_free(&gemm);
    return rc;
  }
  /* Windows by ascending W, ties in request order. */
  for (size_t w = 0; w < n_windows; w++) {
    size_t k = w;
    while (k > 0 && windows[b.order[k - 1]] > windows[w]) {
      b.order[k] = b.order[k - 1];
      k--;
    }
    b.order[k] = w;
  }
  double *v_sq = b.norms, *v_l1 = v_sq + s, *o_sq = v_l1 + s, *exp_neg_lse = o_sq + n_ho;
  sweep_norms(head, v_sq, v_l1, o_sq, exp_neg_lse);
  WindowPass pass = {.head = head,
                     .gemm = &gemm,
                     .precision = options->precision,
                     .aggregation = options->aggregation,
                     .threads = threads,
                     .windows = windows,
                     .order = b.order,
                     .n_windows = n_windows,
                     .v_sq = v_sq,
                     .v_l1 = v_l1,
                     .o_sq = o_sq,
                     .exp_neg_lse = exp_neg_lse};
  for (size_t c0 = 0; c0 < max_window; c0 += SWEEP_ROW_CHUNK) {
    WindowChunk *ch = &b.chunk;
    ch->c0 = c0;
    ch->n = max_window - c0 < SWEEP_ROW_CHUNK ? max_window - c0 : SWEEP_ROW_CHUNK;
    ch->row_lo = last_row - c0 + 1 - ch->n;
    ch->top = s - 1 - c0;
    sweep_chunk(&pass, ch, b.acc, out);
  }
  for (size_t w = 0; w < n_windows; w++)
    score_max_pool(out + (w * OBC_Q_COUNT + OBC_Q_ATTN) * s, s, options->maxpool_kernel,
                   out + (w * OBC_Q_COUNT + OBC_Q_ATTN_MAXPOOL) * s);
  sweep_buffers_free(&b);
  oracle_gemm_free(&gemm);
  return OBC_OK;
}
