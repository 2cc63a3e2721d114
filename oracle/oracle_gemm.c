/* Logit and value-output blocks through cblas (see oracle_gemm.h). FLOAT keeps
 * float copies of Q, O and the covered keys and values, so a sweep rounds each
 * input once rather than once per block. */
#include "oracle/oracle_gemm.h"

#include <assert.h>
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

static float *oracle_gemm_to_float(const double *src, size_t n, const char *what) {
  float *dst = obc_malloc(n * sizeof *dst, what);
  if (!dst) return NULL;
  for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
  return dst;
}

int oracle_gemm_init(OracleGemm *gemm, const OracleHead *head, size_t n_keys,
                     OraclePrecision precision) {
  assert(n_keys <= head->n_positions);
  *gemm = (OracleGemm){.head = head, .precision = precision, .n_keys = n_keys};
  if (precision == OBC_PRECISION_DOUBLE) return OBC_OK;
  if (head->K_f && head->V_f && head->Q_f && head->O_f) { /* the floats the doubles came from */
    gemm->Q = (float *)head->Q_f, gemm->O = (float *)head->O_f;
    gemm->K = (float *)head->K_f, gemm->V = (float *)head->V_f;
    return OBC_OK;
  }
  gemm->owns = 1;
  size_t d = head->head_dim, rows = head->group_size * head->n_rows * d;
  gemm->Q = oracle_gemm_to_float(head->Q, rows, "float copy of Q");
  gemm->O = oracle_gemm_to_float(head->O, rows, "float copy of O");
  gemm->K = oracle_gemm_to_float(head->K, n_keys * d, "float copy of K");
  gemm->V = oracle_gemm_to_float(head->V, n_keys * d, "float copy of V");
  if (!gemm->Q || !gemm->O || !gemm->K || !gemm->V) {
    oracle_gemm_free(gemm);
    return OBC_ENOMEM;
  }
  return OBC_OK;
}

void oracle_gemm_free(OracleGemm *gemm) {
  if (!gemm->owns) {
    gemm->Q = gemm->O = gemm->K = gemm->V = NULL;
    return;
  }
  free(gemm->Q);
  free(gemm->O);
  free(gemm->K);
  free(gemm->V);
  gemm->Q = gemm->O = gemm->K = gemm->V = NULL;
}

/* z = scale * zf and vo = vof in double: the scale is applied after the
 * float product. */
static void oracle_gemm_widen(double scale, const float *zf, const float *vof, size_t count,
                              double *z, double *vo) {
  for (size_t i = 0; i < count; i++) {
    z[i] = scale * zf[i];
    vo[i] = vof[i];
  }
}

void oracle_gemm_block(const OracleGemm *gemm, size_t j, size_t row_lo, size_t n_rows, size_t b0,
                       size_t nb, double *z, double *vo, float *scratch) {
  const OracleHead *head = gemm->head;
  size_t d = head->head_dim;
  assert(j < head->group_size && row_lo + n_rows <= head->n_rows && b0 + nb <= gemm->n_keys);
  if (n_rows == 0 || nb == 0) return;
  size_t row_offset = (j * head->n_rows + row_lo) * d;
  int m = (int)n_rows, n = (int)nb, k = (int)d;
  if (gemm->precision == OBC_PRECISION_DOUBLE) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, head->attn_scale,
                head->Q + row_offset, k, head->K + b0 * d, k, 0.0, z, n);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, head->O + row_offset, k,
                head->V + b0 * d, k, 0.0, vo, n);
    return;
  }
  assert(scratch);
  size_t count = n_rows * nb;
  float *zf = scratch, *vof = scratch + count;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, gemm->Q + row_offset, k,
              gemm->K + b0 * d, k, 0.0f, zf, n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, gemm->O + row_offset, k,
              gemm->V + b0 * d, k, 0.0f, vof, n);
  oracle_gemm_widen(head->attn_scale, zf, vof, count, z, vo);
}

void oracle_gemm_row(const OracleGemm *gemm, size_t j, size_t row, size_t b0, size_t nb, double *z,
                     double *vo, float *scratch) {
  const OracleHead *head = gemm->head;
  size_t d = head->head_dim;
  assert(j < head->group_size && row < head->n_rows && b0 + nb <= gemm->n_keys);
  if (nb == 0) return;
  size_t row_offset = (j * head->n_rows + row) * d;
  int n = (int)nb, k = (int)d;
  if (gemm->precision == OBC_PRECISION_DOUBLE) {
    cblas_dgemv(CblasRowMajor, CblasNoTrans, n, k, head->attn_scale, head->K + b0 * d, k,
                head->Q + row_offset, 1, 0.0, z, 1);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0, head->V + b0 * d, k, head->O + row_offset,
                1, 0.0, vo, 1);
    return;
  }
  assert(scratch);
  float *zf = scratch, *vof = scratch + nb;
  cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, gemm->K + b0 * d, k, gemm->Q + row_offset, 1,
              0.0f, zf, 1);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, gemm->V + b0 * d, k, gemm->O + row_offset, 1,
              0.0f, vof, 1);
  oracle_gemm_widen(head->attn_scale, zf, vof, nb, z, vo);
}

void oracle_gemm_weighted_values(const OracleGemm *gemm, size_t n, size_t n_keys, const void *w,
                                 size_t ld, void *u) {
  const OracleHead *head = gemm->head;
  int d = (int)head->head_dim;
  assert(n_keys <= gemm->n_keys);
  if (n == 0) return;
  if (gemm->precision == OBC_PRECISION_DOUBLE)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, d, (int)n_keys, 1.0,
                (const double *)w, (int)ld, head->V, d, 0.0, (double *)u, d);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, d, (int)n_keys, 1.0f,
                (const float *)w, (int)ld, gemm->V, d, 0.0f, (float *)u, d);
}

void oracle_gemm_gather_rows(const OracleGemm *gemm, size_t row_lo, size_t n_rows, void *q,
                             void *o) {
  const OracleHead *head = gemm->head;
  size_t d = head->head_dim, count = n_rows * d;
  assert(row_lo + n_rows <= head->n_rows);
  size_t elem = oracle_precision_size(gemm->precision);
  const void *Q = gemm->precision == OBC_PRECISION_DOUBLE ? (const void *)head->Q : gemm->Q;
  const void *O = gemm->precision == OBC_PRECISION_DOUBLE ? (const void *)head->O : gemm->O;
  for (size_t j = 0; j < head->group_size; j++) {
    size_t from = (j * head->n_rows + row_lo) * d * elem, to = j * count * elem;
    memcpy((char *)q + to, (const char *)Q + from, count * elem);
    memcpy((char *)o + to, (const char *)O + from, count * elem);
  }
}

void oracle_gemm_rows_raw(const OracleGemm *gemm, const void *q, const void *o, size_t m, size_t k0,
                          size_t nk, void *z, void *vo, size_t ld) {
  const OracleHead *head = gemm->head;
  size_t d = head->head_dim;
  assert(k0 + nk <= gemm->n_keys);
  if (m == 0 || nk == 0) return;
  int rows = (int)m, n = (int)nk, k = (int)d;
  if (gemm->precision == OBC_PRECISION_DOUBLE) {
    if (z)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, head->attn_scale,
                  (const double *)q, k, head->K + k0 * d, k, 0.0, (double *)z, (int)ld);
    if (vo)
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0, (const double *)o, k,
                  head->V + k0 * d, k, 0.0, (double *)vo, (int)ld);
    return;
  }
  if (z)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, (const float *)q, k,
                gemm->K + k0 * d, k, 0.0f, (float *)z, (int)ld);
  if (vo)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, (const float *)o, k,
                gemm->V + k0 * d, k, 0.0f, (float *)vo, (int)ld);
}
