/* Exact causal attention of one query head over one KV head, in double
 * precision: the reference that `obcache synth` uses to produce O, lse and A,
 * and that `obcache verify` uses to check a trace. Logits z_ip = scale q_i.k_p
 * for keys p <= row_positions[i]; lse_i = log sum_p exp(z_ip); A_ip =
 * exp(z_ip - lse_i) (0 beyond causality); o_i = sum_p A_ip v_p. */
#ifndef OBC_TRACE_ATTEND_H
#define OBC_TRACE_ATTEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  size_t n_rows;                /* query rows */
  size_t n_keys;                /* keys available (n_positions) */
  size_t head_dim;              /* d */
  double scale;                 /* attn_scale */
  const int64_t *row_positions; /* (n_rows) position of each query row, < n_keys */
} TraceAttendShape;

/* Computes A (overwriting the scratch probabilities), O and lse. Uses BLAS
 * (dgemm), whose extents are int: each of n_rows, n_keys and head_dim must
 * be at most INT_MAX (trace_open refuses traces beyond). Call it from
 * inside an OpenMP parallel region to keep BLAS on the calling thread. */
void trace_attend_rows(const TraceAttendShape *shape, const double *Q /* (n_rows, head_dim) */,
                       const double *K /* (n_keys, head_dim) */,
                       const double *V /* (n_keys, head_dim) */,
                       double *A /* (n_rows, n_keys) output probabilities */,
                       double *O /* (n_rows, head_dim) */, double *lse /* (n_rows) */);

#endif
