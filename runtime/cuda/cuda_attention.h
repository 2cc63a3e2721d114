/* Causal grouped-query attention of one layer on the GPU, flash-attention
 * style: one block per (tile of 16 queries, query head) streams the keys in
 * tiles of 32 through shared memory with an online softmax, so the (n, n_keys)
 * score matrix never exists. For captured query rows a second pass over the
 * keys writes their softmax rows, normalised by the lse of the first pass.
 * Twin: cpu_attention (runtime/cpu_attention.h), with the same shapes. */
#ifndef OBC_CUDA_ATTENTION_H
#define OBC_CUDA_ATTENTION_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runtime/cpu_attention.h"

/* 1 when the kernels are built for this head_dim (32, 64, 96, 128). */
int cuda_attention_supports(size_t head_dim);

/* shape->evicted, when not NULL, is a DEVICE array (n_kv_heads, kv_stride) of
 * eviction marks: marked keys are left out of the softmax (weight exactly 0).
 * out[t, h] = softmax(q[t, h] . K^T / sqrt(head_dim)) V over keys <= pos0 + t,
 * and lse[h, t] (natural log of the softmax denominator, scaled logits). */
int cuda_attention(const CpuAttentionShape *shape, const float *q /* (n, n_heads * head_dim) */,
                   const float *k /* (n_kv_heads, kv_stride, head_dim) */,
                   const float *v /* (n_kv_heads, kv_stride, head_dim) */,
                   float *out /* (n, n_heads * head_dim) */, float *lse /* (n_heads, n) */,
                   cudaStream_t stream);

/* attn[h, r, j] = exp(q[row_t[r], h] . k_j / sqrt(head_dim) - lse[h, row_t[r]])
 * for keys j <= pos0 + row_t[r], else 0; n_keys = pos0 + n. */
int cuda_attention_rows(const CpuAttentionShape *shape,
                        const float *q /* (n, n_heads * head_dim) */,
                        const float *k /* (n_kv_heads, kv_stride, head_dim) */,
                        const float *lse /* (n_heads, n) */, const int32_t *row_t /* (n_rows) */,
                        size_t n_rows, float *attn /* (n_heads, n_rows, pos0 + n) */,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
