/* Exact window errors, the true eviction error (oracle@1, oracle@T) and set
 * eviction for one (layer, KV head), from the per-pair closed forms of
 * oracle/exact_forms.h (docs/SCIENCE.md, "Exact errors over the window").
 *
 * This is the plain path: one quantity at a time, GEMMs blocked over prompt
 * positions and rows, OpenMP over position blocks (each output element is
 * accumulated by one thread in a fixed order, so results do not depend on the
 * thread count). The pair of a row with A > 1/2 comes from oracle/dominant.h,
 * recomputed from q, K, V rather than the stored lse and O (docs/SCIENCE.md).
 * scores/scores.c fuses the same forms for many windows. */
#include "oracle/oracle.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_search.h"
#include "oracle/dominant.h"
#include "oracle/exact_forms.h"
#include "oracle/fast_exp.h"
#include "oracle/oracle_gemm.h"

enum { ORACLE_BLOCK = 512, ORACLE_ROW_CHUNK = 128 };

/* Index of the captured row at `position`, or the first row after it. */
static size_t oracle_lower_row(const OracleHead *head, int64_t position) {
  return obc_lower_bound_i64(head->row_positions, head->n_rows, position);
}

static double oracle_pick(const OraclePairForms *f, OracleExactKind kind) {
  switch (kind) {
    case OBC_EXACT_V: return f->obc_v;
    case OBC_EXACT_K: return f->exact_k;
    case OBC_EXACT_VK: return f->exact_vk;
    default: return f->remove;
  }
}

typedef struct {
  const OracleHead *head;
  const OracleGemm *gemm;
  OracleExactKind kind;
  size_t row_begin, row_end;      /* captured rows to sum over */
  const double *v_sq;             /* (n_prompt) ||v_p||^2 */
  const double *o_sq;             /* (group_size, n_rows) ||o_i||^2 */
  const OracleDominant *dominant; /* rows row_begin..row_end-1 */
} OracleJob;

/* Per-thread GEMM outputs for one (row chunk, position block). */
typedef struct {
  double *z;      /* (ORACLE_ROW_CHUNK, ORACLE_BLOCK) */
  double *vo;     /* (ORACLE_ROW_CHUNK, ORACLE_BLOCK) */
  float *scratch; /* (2, ORACLE_ROW_CHUNK, ORACLE_BLOCK), FLOAT only */
} OracleWork;

/* out[p] for p in b0..b0+nb-1: every row's error, heads in order, rows in order. */
static void oracle_accumulate_block(const OracleJob *job, size_t b0, size_t nb, OracleWork *work,
                                    double *out) {
  const OracleHead *head = job->head;
  for (size_t chunk = job->row_begin; chunk < job->row_end; chunk += ORACLE_ROW_CHUNK) {
    size_t c0 = chunk;
    size_t c1 = chunk + ORACLE_ROW_CHUNK < job->row_end ? chunk + ORACLE_ROW_CHUNK : job->row_end;
    /* Rows before b0 see none of this block (causality). */
    while (c0 < c1 && head->row_positions[c0] < (int64_t)b0) c0++;
    if (c0 == c1) continue;
    for (size_t j = 0; j < head->group_size; j++) {
      if (c1 - c0 == 1)
        oracle_gemm_row(job->gemm, j, c0, b0, nb, work->z, work->vo, work->scratch);
      else
        oracle_gemm_block(job->gemm, j, c0, c1 - c0, b0, nb, work->z, work->vo, work->scratch);
      for (size_t row = c0; row < c1; row++) {
        size_t last = (size_t)head->row_positions[row] - b0 + 1;
        size_t len = last < nb ? last : nb;
        size_t ho = j * head->n_rows + row;
        const double *z = work->z + (row - c0) * nb, *vo = work->vo + (row - c0) * nb;
        const OracleDominantPair *dominant = oracle_dominant_pair(job->dominant, j, row);
        double lse = head->lse[ho], e = exp(-lse), oo = job->o_sq[ho];
        for (size_t t = 0; t < len; t++) {
          size_t p = b0 + t;
          if (p == dominant->position) {
            out[p] += oracle_pick(&dominant->forms, job->kind);
            continue;
          }
          OraclePairForms f;
          oracle_pair_forms_below_half(z[t], job->v_sq[p], vo[t], oo, lse, e, &f);
          out[p] += oracle_pick(&f, job->kind);
        }
      }
    }
  }
}

/* out (n_prompt) = sum over rows row_begin..row_end-1 and the group's heads. */
static int oracle_accumulate_rows(const OracleHead *head, size_t row_begin, size_t row_end,
                                  OracleExactKind kind, OraclePrecision precision, double *out) {
  size_t s = head->n_prompt, d = head->head_dim;
  size_t n_ho = head->group_size * head->n_rows;
  memset(out, 0, s * sizeof *out);
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  size_t work_doubles = (size_t)ORACLE_ROW_CHUNK * ORACLE_BLOCK;
  OracleGemm gemm;
  OracleDominant dominant;
  int rc = oracle_gemm_init(&gemm, head, s, precision);
  if (rc) return rc;
  rc = oracle_dominant_init(&dominant, head, row_begin, row_end);
  if (rc) {
    oracle_gemm_free(&gemm);
    return rc;
  }
  double *v_sq = obc_malloc(s * sizeof *v_sq, "value norms");
  double *o_sq = obc_malloc(n_ho * sizeof *o_sq, "output norms");
  double *zvo = obc_malloc((size_t)threads * 2 * work_doubles * sizeof *zvo, "logit blocks");
  float *scratch =
      precision == OBC_PRECISION_FLOAT
          ? obc_malloc((size_t)threads * 2 * work_doubles * sizeof *scratch, "float logit blocks")
          : NULL;
  if (!v_sq || !o_sq || !zvo || (precision == OBC_PRECISION_FLOAT && !scratch)) {
    rc = OBC_ENOMEM;
    goto done;
  }
  for (size_t p = 0; p < s; p++) {
    double vv = 0.0;
    for (size_t k = 0; k < d; k++) vv += head->V[p * d + k] * head->V[p * d + k];
    v_sq[p] = vv;
  }
  for (size_t i = 0; i < n_ho; i++) {
    double oo = 0.0;
    for (size_t k = 0; k < d; k++) oo += head->O[i * d + k] * head->O[i * d + k];
    o_sq[i] = oo;
  }
  OracleJob job = {head, &gemm, kind, row_begin, row_end, v_sq, o_sq, &dominant};
  size_t n_blocks = (s + ORACLE_BLOCK - 1) / ORACLE_BLOCK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t b = 0; b < n_blocks; b++) {
    size_t t = (size_t)omp_get_thread_num();
    OracleWork work = {zvo + t * 2 * work_doubles, zvo + t * 2 * work_doubles + work_doubles,
                       scratch ? scratch + t * 2 * work_doubles : NULL};
    size_t b0 = b * ORACLE_BLOCK, nb = s - b0 < ORACLE_BLOCK ? s - b0 : ORACLE_BLOCK;
    oracle_accumulate_block(&job, b0, nb, &work, out);
  }
done:
  free(v_sq);
  free(o_sq);
  free(zvo);
  free(scratch);
  oracle_dominant_free(&dominant);
  oracle_gemm_free(&gemm);
  return rc;
}

int oracle_window_error(const OracleHead *head, size_t window, OracleExactKind kind,
                        OraclePrecision precision, double *out) {
  assert(head && out && kind < OBC_EXACT_COUNT);
  size_t s = head->n_prompt;
  if (window < 1 || window > s)
    return obc_fail(OBC_EINVAL,
                    "window error: window %zu out of range (expected 1..%zu prompt rows)", window,
                    s);
  size_t first = oracle_lower_row(head, (int64_t)(s - window));
  size_t last = oracle_lower_row(head, (int64_t)s); /* one past the last prompt row */
  if (last - first != window || head->row_positions[first] != (int64_t)(s - window))
    return obc_fail(OBC_EINVAL,
                    "window error: the last %zu prompt rows are not all captured (expected "
                    "positions %zu..%zu, found %zu of them; hint: capture a larger window)",
                    window, s - window, s - 1, last - first);
  return oracle_accumulate_rows(head, first, last, kind, precision, out);
}

int oracle_decode_rows(const OracleHead *head, const char *what, size_t first_step, size_t n_steps,
                       size_t *row) {
  size_t first = oracle_lower_row(head, (int64_t)head->n_prompt);
  size_t available = head->n_rows - first;
  if (first_step < 1 || n_steps < 1 || first_step - 1 + n_steps > available)
    return obc_fail(OBC_EINVAL,
                    "%s@%zu-%zu: needs decode rows of steps %zu..%zu (expected positions >= "
                    "%zu, found %zu decode rows; hint: capture more decode steps)",
                    what, first_step, first_step + n_steps - 1, first_step,
                    first_step + n_steps - 1, head->n_prompt, available);
  *row = first + first_step - 1;
  return OBC_OK;
}

int oracle_eviction_error(const OracleHead *head, size_t first_step, size_t n_steps,
                          OraclePrecision precision, double *out) {
  assert(head && out);
  return oracle_eviction_errors(head, &first_step, &n_steps, 1, precision, &out);
}

/* Buffers of oracle_eviction_errors for n rows of every query head. */
typedef struct {
  size_t n_rows, n_keys, ld; /* ld = n_keys */
  void *z, *vo, *w, *u;      /* (group_size, n_rows, ld) / (.., head_dim), float or double */
  void *q, *o;               /* (group_size * n_rows, head_dim) the rows, gathered */
  double *m, *z_top;         /* (group_size, n_rows) */
  OracleDominantPair *pair;  /* (group_size, n_rows) */
  double *errors;            /* (group_size, n_rows, n_prompt) each row's remove errors */
  double *rows;              /* per thread: n_keys doubles */
  double *o_sq;              /* (group_size, n_rows) */
} OracleRowsWork;

/* z and vo element t of row i of head j, in double (FLOAT widens as
 * oracle_gemm_block: z = scale * z_float). */
static inline double oracle_z_at(const OracleGemm *gemm, const void *z, size_t at) {
  return gemm->precision == OBC_PRECISION_DOUBLE ? ((const double *)z)[at]
                                                 : gemm->head->attn_scale * ((const float *)z)[at];
}

/* Row i (captured row row_lo + i) of head j: its dominant pair
 * (oracle_dominant_find), its weights left in w. */
static void oracle_find_dominant(const OracleGemm *gemm, OracleRowsWork *wk, size_t row_lo,
                                 size_t j, size_t i) {
  const OracleHead *head = gemm->head;
  size_t row = row_lo + i, ho = j * head->n_rows + row, d = head->head_dim;
  size_t live = (size_t)head->row_positions[row] + 1;
  if (live > wk->n_keys) live = wk->n_keys;
  size_t slot = j * wk->n_rows + i, at = slot * wk->ld * oracle_precision_size(gemm->precision);
  wk->m[slot] =
      oracle_dominant_find(gemm, (const char *)wk->z + at, (char *)wk->w + at, live, wk->n_keys,
                           head->lse[ho], head->O + ho * d, &wk->pair[slot], &wk->z_top[slot]);
}

/* Head j's dominant rows: weights packed to the front, u = W V, the forms. */
static void oracle_rows_dominant_values(const OracleGemm *gemm, OracleRowsWork *wk, size_t j) {
  size_t base = j * wk->n_rows, elem = oracle_precision_size(gemm->precision);
  size_t packed[ORACLE_ROW_CHUNK];
  oracle_dominant_values(gemm, wk->n_rows, wk->n_keys, (char *)wk->w + base * wk->ld * elem, wk->ld,
                         (char *)wk->u + base * gemm->head->head_dim * elem, wk->m + base,
                         wk->z_top + base, packed, wk->pair + base);
}

/* remove errors of pairs lo..hi-1 of one row (A <= 1/2 each), vectorised. */
static inline void oracle_remove_pairs(const double *restrict z, const double *restrict vo,
                                       const double *restrict vv, double lse, double e, double oo,
                                       double *restrict err, size_t lo, size_t hi) {
#pragma omp simd
  for (size_t t = lo; t < hi; t++) {
    double a = oracle_exp_fast(z[t] - lse), dd, vd, r, inv_live;
    oracle_pair_norms_from_dots(vv[t], vo[t], oo, &dd, &vd);
    oracle_pair_reciprocals(1.0 - a, e, &r, &inv_live);
    err[t] = oracle_form_remove(a, inv_live, dd);
  }
}

/* Row i of head j: the remove error of every prompt position it sees. */
static void oracle_row_errors(const OracleGemm *gemm, OracleRowsWork *wk, size_t row_lo,
                              const double *v_sq, size_t j, size_t i, double *scratch) {
  const OracleHead *head = gemm->head;
  size_t s = head->n_prompt, row = row_lo + i, ho = j * head->n_rows + row;
  size_t live = (size_t)head->row_positions[row] + 1, len = live < s ? live : s;
  size_t at = (j * wk->n_rows + i) * wk->ld, slot = j * wk->n_rows + i;
  double *z = scratch, *vo = scratch + s, *err = wk->errors + slot * s;
  for (size_t t = 0; t < len; t++) {
    z[t] = oracle_z_at(gemm, wk->z, at + t);
    vo[t] = gemm->precision == OBC_PRECISION_DOUBLE ? ((const double *)wk->vo)[at + t]
                                                    : ((const float *)wk->vo)[at + t];
  }
  double lse = head->lse[ho], e = exp(-lse), oo = wk->o_sq[slot];
  size_t p = wk->pair[slot].position;
  if (p < len) {
    oracle_remove_pairs(z, vo, v_sq, lse, e, oo, err, 0, p);
    err[p] = wk->pair[slot].forms.remove;
    oracle_remove_pairs(z, vo, v_sq, lse, e, oo, err, p + 1, len);
  } else {
    oracle_remove_pairs(z, vo, v_sq, lse, e, oo, err, 0, len);
  }
  for (size_t t = len; t < s; t++) err[t] = 0.0;
}

static void oracle_rows_work_free(OracleRowsWork *wk) {
  free(wk->z), free(wk->vo), free(wk->w), free(wk->u), free(wk->m), free(wk->pair);
  free(wk->errors), free(wk->rows), free(wk->o_sq), free(wk->q), free(wk->o);
  memset(wk, 0, sizeof *wk);
}

static int oracle_rows_work_alloc(OracleRowsWork *wk, const OracleHead *head, size_t n_rows,
                                  size_t n_keys, OraclePrecision precision, int threads) {
  size_t g = head->group_size, d = head->head_dim, s = head->n_prompt, n = g * n_rows;
  size_t elem = oracle_precision_size(precision);
  size_t per_thread = n_keys > 2 * s ? n_keys : 2 * s;
  *wk = (OracleRowsWork){.n_rows = n_rows, .n_keys = n_keys, .ld = n_keys};
  wk->z = obc_malloc(n * n_keys * elem, "oracle logits");
  wk->vo = obc_malloc(n * n_keys * elem, "oracle value-output dots");
  wk->w = obc_malloc(n * n_keys * elem, "oracle dominant-key weights");
  wk->u = obc_malloc(n * d * elem, "oracle dominant-key outputs");
  wk->q = obc_malloc(n * d * elem, "oracle rows (q)");
  wk->o = obc_malloc(n * d * elem, "oracle rows (o)");
  wk->m = obc_malloc(2 * n * sizeof *wk->m, "oracle dominant-key sums");
  wk->pair = obc_malloc(n * sizeof *wk->pair, "oracle dominant-key pairs");
  wk->errors = obc_malloc(n * s * sizeof *wk->errors, "oracle row errors");
  wk->rows = obc_malloc((size_t)threads * per_thread * sizeof *wk->rows, "oracle rows");
  wk->o_sq = obc_malloc(n * sizeof *wk->o_sq, "oracle output norms");
  if (!wk->z || !wk->vo || !wk->w || !wk->u || !wk->q || !wk->o || !wk->m || !wk->pair ||
      !wk->errors || !wk->rows || !wk->o_sq) {
    oracle_rows_work_free(wk);
    return OBC_ENOMEM;
  }
  wk->z_top = wk->m + n;
  return OBC_OK;
}

/* Rows row_lo..row_lo+n-1 of every head into wk->errors. */
static void oracle_rows_pass(const OracleGemm *gemm, OracleRowsWork *wk, size_t row_lo,
                             const double *v_sq, int threads) {
  const OracleHead *head = gemm->head;
  size_t g = head->group_size, d = head->head_dim, n = wk->n_rows, s = head->n_prompt;
  size_t per_thread = wk->n_keys > 2 * s ? wk->n_keys : 2 * s;
  size_t elem = oracle_precision_size(gemm->precision);
  for (size_t i = 0; i < g * n; i++) {
    size_t j = i / n, r = row_lo + i % n;
    const double *o = head->O + (j * head->n_rows + r) * d;
    double oo = 0.0;
#pragma omp simd reduction(+ : oo)
    for (size_t c = 0; c < d; c++) oo += o[c] * o[c];
    wk->o_sq[i] = oo;
  }
  size_t n_slabs = (wk->n_keys + ORACLE_BLOCK - 1) / ORACLE_BLOCK;
  oracle_gemm_gather_rows(gemm, row_lo, n, wk->q, wk->o);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t slab = 0; slab < n_slabs; slab++) {
    size_t k0 = slab * ORACLE_BLOCK;
    size_t nk = wk->n_keys - k0 < ORACLE_BLOCK ? wk->n_keys - k0 : ORACLE_BLOCK;
    oracle_gemm_rows_raw(gemm, wk->q, wk->o, g * n, k0, nk, (char *)wk->z + k0 * elem,
                         (char *)wk->vo + k0 * elem, wk->ld);
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t item = 0; item < g * n; item++)
    oracle_find_dominant(gemm, wk, row_lo, item / n, item % n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t j = 0; j < g; j++) oracle_rows_dominant_values(gemm, wk, j);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t item = 0; item < g * n; item++)
    oracle_row_errors(gemm, wk, row_lo, v_sq, item / n, item % n,
                      wk->rows + (size_t)omp_get_thread_num() * per_thread);
}

int oracle_eviction_errors(const OracleHead *head, const size_t *first_step, const size_t *n_steps,
                           size_t n_ranges, OraclePrecision precision, double *const *out) {
  assert(head && first_step && n_steps && out);
  size_t s = head->n_prompt, d = head->head_dim, g = head->group_size;
  size_t lo = SIZE_MAX, hi = 0, first[8];
  if (n_ranges == 0 || n_ranges > 8)
    return obc_fail(OBC_EINVAL, "oracle: %zu ranges (expected 1..8)", n_ranges);
  if (d > 512) return obc_fail(OBC_EINVAL, "oracle: head_dim %zu (expected at most 512)", d);
  for (size_t r = 0; r < n_ranges; r++) {
    int rc = oracle_decode_rows(head, "oracle", first_step[r], n_steps[r], &first[r]);
    if (rc) return rc;
    lo = first[r] < lo ? first[r] : lo;
    hi = first[r] + n_steps[r] > hi ? first[r] + n_steps[r] : hi;
    memset(out[r], 0, s * sizeof *out[r]);
  }
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  size_t n_keys = (size_t)head->row_positions[hi - 1] + 1;
  if (n_keys > head->n_positions) n_keys = head->n_positions;
  size_t chunk = hi - lo < ORACLE_ROW_CHUNK ? hi - lo : ORACLE_ROW_CHUNK;
  OracleGemm gemm;
  OracleRowsWork wk;
  double *v_sq = obc_malloc(s * sizeof *v_sq, "value norms");
  if (!v_sq) return OBC_ENOMEM;
  int rc = oracle_gemm_init(&gemm, head, n_keys, precision);
  if (rc) {
    free(v_sq);
    return rc;
  }
  if ((rc = oracle_rows_work_alloc(&wk, head, chunk, n_keys, precision, threads))) {
    oracle_gemm_free(&gemm);
    free(v_sq);
    return rc;
  }
  for (size_t p = 0; p < s; p++) { /* in vector lanes, as the sweep's */
    const double *v = head->V + p * d;
    double vv = 0.0;
#pragma omp simd reduction(+ : vv)
    for (size_t k = 0; k < d; k++) vv += v[k] * v[k];
    v_sq[p] = vv;
  }
  for (size_t c0 = lo; c0 < hi; c0 += chunk) {
    wk.n_rows = hi - c0 < chunk ? hi - c0 : chunk;
    oracle_rows_pass(&gemm, &wk, c0, v_sq, threads);
    /* Each range adds its rows' errors, heads then rows, position by position. */
    for (size_t r = 0; r < n_ranges; r++) {
      size_t r0 = first[r] > c0 ? first[r] : c0;
      size_t r1 = first[r] + n_steps[r] < c0 + wk.n_rows ? first[r] + n_steps[r] : c0 + wk.n_rows;
      if (r0 >= r1) continue;
      double *dst = out[r];
      size_t n_pieces = (s + ORACLE_BLOCK - 1) / ORACLE_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads)
      for (size_t piece = 0; piece < n_pieces; piece++) {
        size_t p0 = piece * ORACLE_BLOCK, p1 = p0 + ORACLE_BLOCK < s ? p0 + ORACLE_BLOCK : s;
        for (size_t j = 0; j < g; j++)
          for (size_t row = r0; row < r1; row++) {
            const double *err = wk.errors + (j * wk.n_rows + (row - c0)) * s;
            for (size_t p = p0; p < p1; p++) dst[p] += err[p];
          }
      }
    }
  }
  oracle_rows_work_free(&wk);
  oracle_gemm_free(&gemm);
  free(v_sq);
  return OBC_OK;
}

static double oracle_logit(const OracleHead *head, const double *q, size_t p) {
  const double *k = head->K + p * head->head_dim;
  double dot = 0.0;
  for (size_t c = 0; c < head->head_dim; c++) dot += q[c] * k[c];
  return head->attn_scale * dot;
}

int oracle_set_eviction_output(const OracleHead *head, size_t j, size_t r,
                               const unsigned char *keep, double *o_new, double *mass_lost) {
  assert(head && keep && o_new && mass_lost && j < head->group_size && r < head->n_rows);
  size_t d = head->head_dim, ho = j * head->n_rows + r;
  size_t n_live = (size_t)head->row_positions[r] + 1;
  if (n_live > head->n_positions) n_live = head->n_positions;
  const double *q = head->Q + ho * d, *o = head->O + ho * d;
  double lse = head->lse[ho];
  /* Pass 1: the evicted mass, and the largest kept logit. */
  double evicted = 0.0, kept_max = -HUGE_VAL;
  size_t n_kept = 0;
  for (size_t p = 0; p < n_live; p++) {
    double z = oracle_logit(head, q, p);
    if (keep[p]) {
      n_kept++;
      kept_max = z > kept_max ? z : kept_max;
    } else {
      evicted += exp(z - lse);
    }
  }
  if (n_kept == 0) {
    memset(o_new, 0, d * sizeof *o_new);
    *mass_lost = 1.0;
    return 0;
  }
  *mass_lost = evicted;
  if (evicted <= 0.5) {
    /* o' = (o - sum_E A_p v_p) / (1 - sum_E A_p): 1 - mass >= 1/2, no cancellation. */
    memcpy(o_new, o, d * sizeof *o_new);
    for (size_t p = 0; p < n_live; p++) {
      if (keep[p]) continue;
      double a = exp(oracle_logit(head, q, p) - lse);
      for (size_t c = 0; c < d; c++) o_new[c] -= a * head->V[p * d + c];
    }
    for (size_t c = 0; c < d; c++) o_new[c] /= 1.0 - evicted;
    return 0;
  }
  /* Most of the mass is gone: the same o', renormalised over the kept keys
   * directly (o - sum_E A v would cancel). */
  double total = 0.0;
  memset(o_new, 0, d * sizeof *o_new);
  for (size_t p = 0; p < n_live; p++) {
    if (!keep[p]) continue;
    double w = exp(oracle_logit(head, q, p) - kept_max);
    total += w;
    for (size_t c = 0; c < d; c++) o_new[c] += w * head->V[p * d + c];
  }
  for (size_t c = 0; c < d; c++) o_new[c] /= total;
  return 0;
}
