/* The capture's device sums (runtime.h RuntimeSums) as CUDA kernels: the
 * column sums of attention (capture/capture_sums.h) and the pre-RoPE query
 * statistics (capture/capture_qstats.h) of one layer and one chunk, added
 * into device accumulators from the queries, attention outputs, lse and K/V
 * cache the forward pass already holds. Every pointer is device memory; each
 * launcher returns 0 or a negative OBC_E* code after checking the launch.
 * Twins: twin_column_sums_add and twin_query_stats_add (twins.h), which run
 * the same roundings in the same order, so results are bit-equal. */
#ifndef OBC_CUDA_SUMS_H
#define OBC_CUDA_SUMS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "runtime/cuda/twins.h"

/* 1 when the kernels take this head_dim: a multiple of 4 (rows are read as
 * float4) up to CUDA_SUMS_MAX_HEAD_DIM (their shared-memory tiles). Every
 * row pointer must then be 16-byte aligned, as cudaMalloc's are. */
enum { CUDA_SUMS_MAX_HEAD_DIM = 128 };
int cuda_sums_supports(size_t head_dim);

/* As twin_column_sums_add: one thread per key position and query head of
 * a GQA group (up to 8 heads side by side, the rest in turn). */
int cuda_column_sums_add(const TwinSumsShape *shape, const float *q /* (n, n_heads * head_dim) */,
                         const float *o /* (n, n_heads * head_dim) */,
                         const float *lse /* (n_heads, n) */,
                         const float *k /* (n_kv_heads, kv_stride, head_dim) */,
                         const float *v /* (n_kv_heads, kv_stride, head_dim) */, size_t t_begin,
                         size_t t_end, double *attn /* (n_heads, n_prompt) */,
                         double *obc /* (3, n_heads, n_prompt) */, cudaStream_t stream);

/* As twin_query_stats_add: one thread per (query head, entry of sum or of
 * outer's upper triangle). */
int cuda_query_stats_add(const TwinSumsShape *shape, const float *q /* (n, n_heads * head_dim) */,
                         const float *cos_table /* (positions, head_dim / 2) */,
                         const float *sin_table /* (positions, head_dim / 2) */, int interleaved,
                         size_t t_begin, size_t t_end, double *sum /* (n_heads, head_dim) */,
                         double *outer /* (n_heads, head_dim, head_dim) */, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
