/* Causal softmax attention in double precision with two GEMMs (logits, then
 * the weighted sum of values); see trace_attend.h. The softmax subtracts the
 * row maximum before exponentiating, so no logit can overflow. */
#include "traces/trace_attend.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <math.h>

void trace_attend_rows(const TraceAttendShape *shape, const double *Q, const double *K,
                       const double *V, double *A, double *O, double *lse) {
  const size_t n_rows = shape->n_rows, n_keys = shape->n_keys, d = shape->head_dim;
  assert(n_rows <= INT_MAX && n_keys <= INT_MAX && d <= INT_MAX);
  if (!n_rows) return;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_rows, (int)n_keys, (int)d,
              shape->scale, Q, (int)d, K, (int)d, 0.0, A, (int)n_keys);
  for (size_t i = 0; i < n_rows; i++) {
    double *row = A + i * n_keys;                      /* (n_keys) logits, then probabilities */
    size_t live = (size_t)shape->row_positions[i] + 1; /* keys 0..position */
    double max = row[0];
    for (size_t p = 1; p < live; p++) max = row[p] > max ? row[p] : max;
    double sum = 0.0;
    for (size_t p = 0; p < live; p++) {
      row[p] = exp(row[p] - max);
      sum += row[p];
    }
    double inv = 1.0 / sum;
    for (size_t p = 0; p < live; p++) row[p] *= inv;
    for (size_t p = live; p < n_keys; p++) row[p] = 0.0;
    lse[i] = max + log(sum);
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n_rows, (int)d, (int)n_keys, 1.0, A,
              (int)n_keys, V, (int)d, 0.0, O, (int)d);
}
