/* The two GEMMs behind every closed form: logits z = scale * Q_rows K_blk^T and
 * value-output dots vo = O_rows V_blk^T, for a run of captured rows of one query
 * head against a block of prompt positions.
 *
 * With OBC_PRECISION_FLOAT the inputs are rounded to float once (init) and the
 * products use sgemm, then are widened to double; with OBC_PRECISION_DOUBLE
 * dgemm reads the double inputs directly. Called inside an OpenMP parallel
 * region, the OpenMP build of OpenBLAS runs each call on the calling thread. */
#ifndef OBC_ORACLE_GEMM_H
#define OBC_ORACLE_GEMM_H

#include <stddef.h>

#include "oracle/oracle.h"

typedef struct {
  const OracleHead *head;
  OraclePrecision precision;
  size_t n_keys; /* keys covered: positions 0..n_keys-1 */
  float *Q;      /* (group_size, n_rows, head_dim), FLOAT only */
  float *O;      /* (group_size, n_rows, head_dim), FLOAT only */
  float *K;      /* (n_keys, head_dim), FLOAT only */
  float *V;      /* (n_keys, head_dim), FLOAT only */
  int owns;      /* Q, O, K, V are copies made by init (else the head's floats) */
} OracleGemm;

/* Prepares products against keys 0..n_keys-1 (n_keys <= n_positions). */
int oracle_gemm_init(OracleGemm *gemm, const OracleHead *head, size_t n_keys,
                     OraclePrecision precision);
void oracle_gemm_free(OracleGemm *gemm);

/* For query head j and rows row_lo..row_lo+n_rows-1, positions b0..b0+nb-1:
 * z (n_rows, nb) = attn_scale * q.k and vo (n_rows, nb) = o.v. scratch holds
 * 2 * n_rows * nb floats (FLOAT only; may be NULL for DOUBLE). */
void oracle_gemm_block(const OracleGemm *gemm, size_t j, size_t row_lo, size_t n_rows, size_t b0,
                       size_t nb, double *z, double *vo, float *scratch);

/* The same for one row (z, vo: nb), through GEMV: a decode step, where
 * OpenBLAS runs GEMV far faster than an M = 1 GEMM. Its float rounding may
 * differ from oracle_gemm_block's, so a computation that must not depend on
 * how rows are grouped (the window sweep) uses oracle_gemm_block only. */
void oracle_gemm_row(const OracleGemm *gemm, size_t j, size_t row, size_t b0, size_t nb, double *z,
                     double *vo, float *scratch);

/* u (n, head_dim) = w (n, n_keys), rows ld apart, times the values of keys
 * 0..n_keys-1: float or double by precision, like the block above. */
void oracle_gemm_weighted_values(const OracleGemm *gemm, size_t n, size_t n_keys, const void *w,
                                 size_t ld, void *u);

/* Rows row_lo..row_lo+n_rows-1 of every query head of the group, gathered
 * head after head into q and o ((group_size * n_rows, head_dim) floats or
 * doubles by precision), so that one GEMM serves the whole group: the keys
 * are packed once for all its rows. */
void oracle_gemm_gather_rows(const OracleGemm *gemm, size_t row_lo, size_t n_rows, void *q,
                             void *o);

/* z, vo (m, ld) of gathered rows q, o (m, head_dim) against keys
 * k0..k0+nk-1, unwidened: FLOAT writes floats (z without attn_scale: the
 * caller widens as scale * z, like oracle_gemm_block), DOUBLE doubles (z
 * scaled). z or vo NULL skips that product. */
void oracle_gemm_rows_raw(const OracleGemm *gemm, const void *q, const void *o, size_t m, size_t k0,
                          size_t nk, void *z, void *vo, size_t ld);

#endif
