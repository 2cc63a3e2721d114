/* Exact errors and the true eviction error (docs/SCIENCE.md, "Exact errors
 * over the window" and "The oracle: the true eviction error") for one
 * (layer, KV head), summed over the query heads of its group.
 *
 * All quantities have O(W d) closed forms per token; tests/test_oracle.c
 * recomputes each by brute force (perturb, re-run attention, measure). The
 * per-element closed forms are the static inline functions of
 * oracle/exact_forms.h, shared with the fused window sweep of scores/. */
#ifndef OBC_ORACLE_H
#define OBC_ORACLE_H

#include <stddef.h>
#include <stdint.h>

/* One (layer, KV head) worth of inputs, in double precision.
 * Query head j of the group (0 <= j < group_size) is model head
 * kv_head * group_size + j. */
typedef struct {
  size_t n_positions;           /* keys held: prompt + decoded (s + T) */
  size_t n_prompt;              /* s: positions 0..s-1 are eviction candidates */
  size_t head_dim;              /* d */
  size_t group_size;            /* query heads sharing this KV head */
  size_t n_rows;                /* captured query rows */
  const int64_t *row_positions; /* (n_rows) strictly increasing */
  const double *K;              /* (n_positions, head_dim) */
  const double *V;              /* (n_positions, head_dim) */
  const double *Q;              /* (group_size, n_rows, head_dim) */
  const double *O;              /* (group_size, n_rows, head_dim) */
  const double *lse;            /* (group_size, n_rows) */
  double attn_scale;            /* z = attn_scale * q.k */
  /* Optional: the same K, V, Q, O as floats when the doubles were widened
   * from them (a trace), so that FLOAT GEMMs read them without a rounded
   * copy; NULL otherwise. */
  const float *K_f, *V_f, *Q_f, *O_f;
} OracleHead;

/* Precision of the GEMMs (q.k and v.o); element-wise work is always double.
 * FLOAT rounds the inputs to float and uses sgemm (rel. error ~1e-5);
 * DOUBLE uses dgemm (~1e-12). */
typedef enum { OBC_PRECISION_FLOAT = 0, OBC_PRECISION_DOUBLE = 1 } OraclePrecision;

/* Bytes of one GEMM input or output element at this precision. */
static inline size_t oracle_precision_size(OraclePrecision precision) {
  return precision == OBC_PRECISION_DOUBLE ? sizeof(double) : sizeof(float);
}

/* Which exact window error. */
typedef enum {
  OBC_EXACT_V = 0,  /* zero v_p */
  OBC_EXACT_K,      /* zero k_p (logit 0, token stays in the softmax) */
  OBC_EXACT_VK,     /* zero both */
  OBC_EXACT_REMOVE, /* remove the token from the softmax (eviction) */
  OBC_EXACT_COUNT
} OracleExactKind;

/* Exact error E_p = sum_h sum_i ||o'_i - o_i||^2 over the window of the last
 * `window` prompt rows (rows i with n_prompt-window <= i < n_prompt; each row
 * contributes to p only when p <= i). out: (n_prompt). The window rows must be
 * captured; OBC_EINVAL otherwise. */
int oracle_window_error(const OracleHead *head, size_t window, OracleExactKind kind,
                        OraclePrecision precision, double *out);

/* The captured row of decode step first_step (1-based) into *row, after
 * checking that the rows of steps first_step..first_step+n_steps-1 are all
 * captured; OBC_EINVAL naming `what` ("oracle", "decode_attn") otherwise. */
int oracle_decode_rows(const OracleHead *head, const char *what, size_t first_step, size_t n_steps,
                       size_t *row);

/* True eviction error oracle@a-b: evicting prompt token p at the end of
 * prefill, summed over the captured decode rows (positions >= n_prompt) of
 * steps first_step..first_step+n_steps-1 (1-based) and the group's query
 * heads. (1, 1) is the paper's oracle@1. out: (n_prompt). OBC_EINVAL when
 * those decode rows are not captured. */
int oracle_eviction_error(const OracleHead *head, size_t first_step, size_t n_steps,
                          OraclePrecision precision, double *out);

/* oracle@a-b for n_ranges ranges at once (first_step[r], n_steps[r]) into
 * out[r] (n_prompt each), from one pass over the union of their decode rows:
 * GEMMs over whole rows (every causal key, decode keys too), so the dominant
 * pair of each row comes from the same logits (oracle/dominant.h). Each
 * range sums its rows' errors in the order of oracle_eviction_error (query
 * heads, then rows); the same numbers for any thread count. */
int oracle_eviction_errors(const OracleHead *head, const size_t *first_step, const size_t *n_steps,
                           size_t n_ranges, OraclePrecision precision, double *const *out);

/* Set eviction (docs/SCIENCE.md, "Eviction and replay"): for query row index r
 * of query head j, o' = (o - sum_{p in E} A_p v_p) / (1 - sum_{p in E} A_p),
 * where `keep` marks (n_positions) which keys stay. Writes o' (head_dim) and
 * returns the evicted attention mass through *mass_lost. When every causal key
 * is evicted o' is 0 and the mass lost is 1. */
int oracle_set_eviction_output(const OracleHead *head, size_t j, size_t r,
                               const unsigned char *keep, double *o_new, double *mass_lost);

#endif
