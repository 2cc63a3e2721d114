/* The dominant-key table (see dominant.h): per row chunk of one query head,
 * logits Z = scale Q_rows K^T by dgemm, the weights w_j = exp(z_j - z_p) of the
 * rows whose top key has A > 1/2 (m = sum_{j != p} w_j < 1), the other keys'
 * outputs U = W V by dgemm, then each pair's quantities from z_p, m, v_p, u.
 *
 * Chunks are cut from row_end downwards and each is done by one thread with
 * one GEMM shape, so a row's numbers depend only on its chunk, not on the
 * thread count. */
#include "oracle/dominant.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "oracle/fast_exp.h"

/* Keys a row at `position` attends to. */
static size_t dominant_causal_keys(const OracleHead *head, int64_t position) {
  size_t n = (size_t)position + 1;
  return n < head->n_positions ? n : head->n_positions;
}

/* Quantities of the pair (row, p) from its logit z, m = sum_{j != p} w_j > 0,
 * v = v_p (d) and u (d), the other keys' output:
 *   A = 1/(1 + m), 1 - A = m/(1 + m), lse = z + log1p(m), e = exp(-lse),
 *   o = A v + (1 - A) u, so v - o = (1 - A)(v - u):
 *   remove:   o' = u,                                 error A^2 ||v - u||^2
 *   exact_k:  o' - o = (A' - A)(v - u), A' = e r,     A' - A = (1 - A)(e - A) r
 *   exact_vk: o' = (1 - A) r u, o - o' = A (v - u) + e r u
 * with r = 1/(1 - A + e); the Taylor scores take dd = ||v - o||^2 and
 * vd = v.(v - o) from the same factorisation. */
void oracle_dominant_forms(double z, double m, const double *v, const double *u, size_t d,
                           OraclePairForms *f) {
  double a = 1.0 / (1.0 + m), one_minus_a = m / (1.0 + m);
  double e = exp(-(z + log1p(m))), r = 1.0 / (one_minus_a + e);
  double vv = 0.0, du = 0.0, vdu = 0.0, vk = 0.0;
  for (size_t c = 0; c < d; c++) {
    double diff = v[c] - u[c], miss = a * diff + e * r * u[c];
    vv += v[c] * v[c];
    du += diff * diff;
    vdu += v[c] * diff;
    vk += miss * miss;
  }
  double dd = one_minus_a * one_minus_a * du, vd = one_minus_a * vdu;
  double k_shift = one_minus_a * (a - e) * r;
  f->attn = a;
  f->attn2 = a * a;
  f->obc_v = oracle_form_obc_v(a, vv);
  f->obc_k = oracle_form_obc_k(a, z, dd);
  f->obc_vk = f->obc_v + f->obc_k + oracle_form_obc_vk_cross(a, z, vd);
  f->exact_k = k_shift * k_shift * du;
  f->exact_vk = vk;
  f->remove = a * a * du;
}

/* A row with a single live key (position 0, or every other weight underflows):
 * o = v_p, and the existing convention of oracle_pair_forms (remove and exact_vk
 * lose the whole stored output oo, exact_k is 0). */
void oracle_dominant_single_forms(double z, const double *v, const double *o, size_t d,
                                  OraclePairForms *f) {
  double vv = 0.0, oo = 0.0;
  for (size_t c = 0; c < d; c++) {
    vv += v[c] * v[c];
    oo += o[c] * o[c];
  }
  oracle_pair_forms(1.0, z, 0.0, 0.0, vv, oo, 0.0, 0.0, f);
}

/* Turns the logits z (n_keys) of a row with `live` causal keys into weights
 * w_j = exp(z_j - z_p) in place (0 at p and beyond live); returns m, the top
 * key p (the first of equal maxima) and its logit z_p. Every row of every
 * chunk passes here, so the exponentials are the vectorisable oracle_exp_fast
 * (about 2 ulp, far below what m needs). */
double oracle_dominant_row_weights(double *z, size_t n_keys, size_t live, size_t *top,
                                   double *z_top) {
  size_t p = 0;
  for (size_t k = 1; k < live; k++)
    if (z[k] > z[p]) p = k;
  double zp = z[p], m = 0.0;
#pragma omp simd
  for (size_t k = 0; k < live; k++) z[k] = oracle_exp_fast(z[k] - zp);
  z[p] = 0.0;
#pragma omp simd reduction(+ : m)
  for (size_t k = 0; k < live; k++) m += z[k];
  for (size_t k = live; k < n_keys; k++) z[k] = 0.0;
  *top = p;
  *z_top = zp;
  return m;
}

/* Rows r0..r1-1 of query head j. zw: (ORACLE_DOMINANT_ROW_CHUNK, n_keys) logits, then
 * the dominant rows' weights packed at the front; u: (ORACLE_DOMINANT_ROW_CHUNK, d). */
static void dominant_chunk(const OracleHead *head, size_t j, size_t r0, size_t r1, double *zw,
                           double *u, OracleDominantPair *out /* (r1 - r0) */) {
  size_t d = head->head_dim, n = r1 - r0, ho = j * head->n_rows + r0;
  size_t n_keys = dominant_causal_keys(head, head->row_positions[r1 - 1]);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n_keys, (int)d,
              head->attn_scale, head->Q + ho * d, (int)d, head->K, (int)d, 0.0, zw, (int)n_keys);
  size_t rows[ORACLE_DOMINANT_ROW_CHUNK];
  double m_of[ORACLE_DOMINANT_ROW_CHUNK], z_of[ORACLE_DOMINANT_ROW_CHUNK];
  size_t n_dom = 0;
  for (size_t k = 0; k < n; k++) {
    double *z = zw + k * n_keys;
    size_t live = dominant_causal_keys(head, head->row_positions[r0 + k]), p;
    double zp, m = oracle_dominant_row_weights(z, n_keys, live, &p, &zp);
    out[k] = (OracleDominantPair){.position = ORACLE_DOMINANT_NONE};
    if (!(m < 1.0)) continue; /* A = 1/(1 + m) <= 1/2 */
    out[k].position = p;
    if (m == 0.0) {
      oracle_dominant_single_forms(zp, head->V + p * d, head->O + (ho + k) * d, d, &out[k].forms);
      continue;
    }
    if (n_dom != k) memcpy(zw + n_dom * n_keys, z, n_keys * sizeof *z);
    rows[n_dom] = k;
    m_of[n_dom] = m;
    z_of[n_dom++] = zp;
  }
  if (n_dom == 0) return;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n_dom, (int)d, (int)n_keys, 1.0, zw,
              (int)n_keys, head->V, (int)d, 0.0, u, (int)d);
  for (size_t k = 0; k < n_dom; k++) {
    double *uk = u + k * d;
    for (size_t c = 0; c < d; c++) uk[c] /= m_of[k];
    OracleDominantPair *pair = out + rows[k];
    oracle_dominant_forms(z_of[k], m_of[k], head->V + pair->position * d, uk, d, &pair->forms);
  }
}

/* w[t] = exp(z[t] - z_top) for t in lo..hi-1; returns their sum. */
double oracle_dominant_weights_d(const double *restrict z, double *restrict w, size_t lo, size_t hi,
                                 double z_top) {
  double m = 0.0;
#pragma omp simd reduction(+ : m)
  for (size_t t = lo; t < hi; t++) {
    double x = oracle_exp_fast(z[t] - z_top);
    w[t] = x;
    m += x;
  }
  return m;
}

/* The same from float logits (z = scale * z_float), weights rounded to float
 * for sgemm; the sum is of the unrounded weights. In pieces through a double
 * buffer: GCC 12 does not vectorise the loop that stores the floats itself. */
double oracle_dominant_weights_f(const float *restrict z, float *restrict w, size_t lo, size_t hi,
                                 double scale, double z_top) {
  enum { PIECE = 256 };
  double m = 0.0, x[PIECE];
  for (size_t t0 = lo; t0 < hi; t0 += PIECE) {
    size_t n = hi - t0 < PIECE ? hi - t0 : PIECE;
#pragma omp simd reduction(+ : m)
    for (size_t t = 0; t < n; t++) {
      x[t] = oracle_exp_fast(scale * z[t0 + t] - z_top);
      m += x[t];
    }
#pragma omp simd
    for (size_t t = 0; t < n; t++) w[t0 + t] = (float)x[t];
  }
  return m;
}

/* The largest logit of a row's first `live` (floats: times attn_scale). */
static double dominant_max(const OracleGemm *gemm, const void *z, size_t live) {
  if (gemm->precision == OBC_PRECISION_DOUBLE) {
    const double *zd = z;
    double z_max = zd[0];
#pragma omp simd reduction(max : z_max)
    for (size_t t = 0; t < live; t++) z_max = zd[t] > z_max ? zd[t] : z_max;
    return z_max;
  }
  const float *zf = z;
  float m = zf[0];
#pragma omp simd reduction(max : m)
  for (size_t t = 0; t < live; t++) m = zf[t] > m ? zf[t] : m;
  return gemm->head->attn_scale * m;
}

/* The first key holding the largest logit z_max (the scaling of a float is
 * exact enough to keep distinct floats distinct). */
static size_t dominant_first_max(const OracleGemm *gemm, const void *z, size_t live, double z_max) {
  size_t p = 0;
  if (gemm->precision == OBC_PRECISION_DOUBLE) {
    const double *zd = z;
    while (p + 1 < live && !(zd[p] == z_max)) p++;
  } else {
    const float *zf = z;
    while (p + 1 < live && !(gemm->head->attn_scale * zf[p] == z_max)) p++;
  }
  return p;
}

double oracle_dominant_find(const OracleGemm *gemm, const void *z, void *w, size_t live,
                            size_t n_keys, double lse, const double *o, OracleDominantPair *pair,
                            double *z_top) {
  const OracleHead *head = gemm->head;
  size_t d = head->head_dim;
  pair->position = ORACLE_DOMINANT_NONE;
  double z_max = dominant_max(gemm, z, live), m;
  if (!(oracle_exp_fast(z_max - lse) >= ORACLE_DOMINANT_CANDIDATE)) return 0.0;
  size_t p = dominant_first_max(gemm, z, live, z_max);
  /* Weights w_t = exp(z_t - z_p), 0 at p and from live on. */
  if (gemm->precision == OBC_PRECISION_DOUBLE) {
    double *wd = w;
    m = oracle_dominant_weights_d(z, wd, 0, p, z_max) +
        oracle_dominant_weights_d(z, wd, p + 1, live, z_max);
    memset(wd + live, 0, (n_keys - live) * sizeof *wd);
    wd[p] = 0.0;
  } else {
    float *wf = w;
    double scale = head->attn_scale;
    m = oracle_dominant_weights_f(z, wf, 0, p, scale, z_max) +
        oracle_dominant_weights_f(z, wf, p + 1, live, scale, z_max);
    memset(wf + live, 0, (n_keys - live) * sizeof *wf);
    wf[p] = 0.0f;
  }
  if (!(m < 1.0)) return 0.0; /* A = 1/(1 + m) <= 1/2 */
  pair->position = p;
  if (m == 0.0) {
    oracle_dominant_single_forms(z_max, head->V + p * d, o, d, &pair->forms);
    return 0.0;
  }
  *z_top = z_max;
  return m;
}

void oracle_dominant_values(const OracleGemm *gemm, size_t n, size_t n_keys, void *w, size_t ld,
                            void *u, const double *m, const double *z_top, size_t *packed,
                            OracleDominantPair *pairs) {
  const OracleHead *head = gemm->head;
  size_t d = head->head_dim, elem = oracle_precision_size(gemm->precision), n_dom = 0;
  char *wb = w;
  for (size_t i = 0; i < n; i++) {
    if (!(m[i] > 0.0)) continue;
    if (n_dom != i) memcpy(wb + n_dom * ld * elem, wb + i * ld * elem, n_keys * elem);
    packed[n_dom++] = i;
  }
  if (n_dom == 0) return;
  oracle_gemm_weighted_values(gemm, n_dom, n_keys, w, ld, u);
  double uk[512]; /* head_dim <= 512 (the callers check) */
  assert(d <= 512);
  for (size_t k = 0; k < n_dom; k++) {
    size_t i = packed[k];
    for (size_t c = 0; c < d; c++)
      uk[c] = (gemm->precision == OBC_PRECISION_DOUBLE ? ((const double *)u)[k * d + c]
                                                       : (double)((const float *)u)[k * d + c]) /
              m[i];
    OracleDominantPair *pair = &pairs[i];
    oracle_dominant_forms(z_top[i], m[i], head->V + pair->position * d, uk, d, &pair->forms);
  }
}

int oracle_dominant_init(OracleDominant *table, const OracleHead *head, size_t row_begin,
                         size_t row_end) {
  assert(table && head && row_begin <= row_end && row_end <= head->n_rows);
  size_t g = head->group_size, n = row_end - row_begin, d = head->head_dim;
  *table = (OracleDominant){.row_begin = row_begin, .row_end = row_end};
  if (n == 0) return OBC_OK;
  table->pairs = obc_malloc(g * n * sizeof *table->pairs, "dominant-key table");
  if (!table->pairs) return OBC_ENOMEM;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  size_t n_keys = dominant_causal_keys(head, head->row_positions[row_end - 1]);
  size_t per_thread = (size_t)ORACLE_DOMINANT_ROW_CHUNK * (n_keys + d);
  double *buffers = obc_malloc((size_t)threads * per_thread * sizeof *buffers, "dominant-key rows");
  if (!buffers) {
    oracle_dominant_free(table);
    return OBC_ENOMEM;
  }
  size_t n_chunks = (n + ORACLE_DOMINANT_ROW_CHUNK - 1) / ORACLE_DOMINANT_ROW_CHUNK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t item = 0; item < g * n_chunks; item++) {
    size_t j = item / n_chunks, c = item % n_chunks;
    size_t r1 = row_end - c * ORACLE_DOMINANT_ROW_CHUNK;
    size_t r0 =
        r1 - row_begin > ORACLE_DOMINANT_ROW_CHUNK ? r1 - ORACLE_DOMINANT_ROW_CHUNK : row_begin;
    double *mine = buffers + (size_t)omp_get_thread_num() * per_thread;
    dominant_chunk(head, j, r0, r1, mine, mine + (size_t)ORACLE_DOMINANT_ROW_CHUNK * n_keys,
                   table->pairs + j * n + (r0 - row_begin));
  }
  free(buffers);
  return OBC_OK;
}

void oracle_dominant_free(OracleDominant *table) {
  free(table->pairs);
  table->pairs = NULL;
}
