/* Attention's products for a few query rows at a time (at most
 * ATTENTION_FEW_ROWS): the stacked query heads of one KV group in a decode
 * step, where one sgemv per head would read every key and value row once per
 * head. Each key and value row is read once for all rows, in AVX2 + FMA
 * (runtime/attention_few_avx2.c) where quant_dot_simd() chose AVX2 or wider,
 * with portable twins that state the order of the operations and give the
 * same bits (tests/test_attention.c). */
#ifndef OBC_ATTENTION_FEW_H
#define OBC_ATTENTION_FEW_H

#include <stddef.h>

enum { ATTENTION_FEW_ROWS = 4 };

/* scores[i * kn + t] = scale * (q_i . k_t) for rows i < m (q_i at q + i * ldq)
 * and keys t < kn (k_t at k + t * hd). Per (row, key), 8 lanes: lane l adds
 * fma(k[d], q[d], lane) over d = l, l + 8, ... in order; then
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), times scale. */
void attention_few_scores_portable(const float *q, size_t ldq, const float *k, size_t hd, size_t m,
                                   size_t kn, float scale, float *scores);
void attention_few_scores_avx2(const float *q, size_t ldq, const float *k, size_t hd, size_t m,
                               size_t kn, float scale, float *scores);

/* o[i * ldo + c] = sum_t p[i * kn + t] * v[t * hd + c] + beta * o[i * ldo + c]
 * for rows i < m and columns c < hd: the sum by fma over t in order from 0,
 * then fl(sum + fl(beta * o)) where beta != 0 (beta == 0 ignores o). */
void attention_few_values_portable(const float *p, const float *v, size_t hd, size_t m, size_t kn,
                                   float beta, float *o, size_t ldo);
void attention_few_values_avx2(const float *p, const float *v, size_t hd, size_t m, size_t kn,
                               float beta, float *o, size_t ldo);

/* 1 when the AVX2 kernels run here for head_dim hd (a multiple of 8) and
 * quant_dot_simd() chose AVX2 or wider (OBC_SIMD=portable turns them off). */
int attention_few_avx2_runs(size_t hd);

#endif
