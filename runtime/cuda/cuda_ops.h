/* The element-wise and row-wise kernels of the CUDA forward pass, as C-callable
 * launchers on a stream: RMSNorm, RoPE (interleaved and half-split), SwiGLU,
 * bias add, embedding lookup (fp32 or bf16 table), fp32 -> bf16 conversion,
 * row argmax, the K/V store into the cache layout and the gather of captured
 * rows. Every pointer is device memory. Each launcher returns 0 or a negative
 * OBC_E* code after checking the launch (cuda_check.h). Every kernel has a C
 * twin (runtime/cpu_ops.h or runtime/cuda/twins.h) that tests/gpu compares with. */
#ifndef OBC_CUDA_OPS_H
#define OBC_CUDA_OPS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight (sum of squares in double,
 * as cpu_rmsnorm). */
int cuda_rmsnorm(float *out /* (n, dim) */, const float *x /* (n, dim) */,
                 const float *weight /* (dim) */, size_t n, size_t dim, double eps,
                 cudaStream_t stream);

/* Rotates every head of n rows in place; row t is at position pos0 + t. Twin:
 * cpu_rope (same tables, same pair layout). */
int cuda_rope(float *x /* (n, n_heads * head_dim) */, size_t n, size_t n_heads, size_t head_dim,
              size_t pos0, const float *cos_table /* (max_context, head_dim / 2) */,
              const float *sin_table /* (max_context, head_dim / 2) */, int interleaved,
              cudaStream_t stream);

/* gate[i] = silu(gate[i]) * up[i]. Twin: cpu_swiglu. */
int cuda_swiglu(float *gate /* (count) */, const float *up /* (count) */, size_t count,
                cudaStream_t stream);

/* rows[t] += bias. Twin: cpu_add_bias. */
int cuda_add_bias(float *rows /* (n, width) */, const float *bias /* (width) */, size_t n,
                  size_t width, cudaStream_t stream);

/* out[t] = table[tokens[t]]; the table is fp32 or bf16 (uint16 bit patterns).
 * Twin: cpu_embed (fp32) / twin_embed_bf16. */
int cuda_embed(float *out /* (n, dim) */, const void *table /* (vocab, dim) */, int table_bf16,
               const int32_t *tokens /* (n) */, size_t n, size_t dim, cudaStream_t stream);

/* out[i] = bf16(in[i]), round to nearest even. Twin: twin_to_bf16. */
int cuda_to_bf16(uint16_t *out /* (count) */, const float *in /* (count) */, size_t count,
                 cudaStream_t stream);

/* index[r] = argmax of row r (first index on ties). Twin: twin_argmax. */
int cuda_argmax(int32_t *index /* (n_rows) */, const float *x /* (n_rows, width) */, size_t n_rows,
                size_t width, cudaStream_t stream);

/* Scatters n rows of (n, n_kv_heads * head_dim) into a cache laid out
 * (n_kv_heads, kv_stride, head_dim) at rows [pos0, pos0 + n). Twin:
 * twin_store_kv. */
int cuda_store_kv(float *cache /* (n_kv_heads, kv_stride, head_dim) */,
                  const float *rows /* (n, n_kv_heads * head_dim) */, size_t n, size_t n_kv_heads,
                  size_t head_dim, size_t kv_stride, size_t pos0, cudaStream_t stream);

/* dst[h, r] = src[row_t[r], h] for per-head vectors: (n, n_heads * width)
 * -> (n_heads, n_rows, width). Twin: twin_gather_rows. */
int cuda_gather_rows(float *dst /* (n_heads, n_rows, width) */,
                     const float *src /* (n, n_heads * width) */,
                     const int32_t *row_t /* (n_rows) */, size_t n_rows, size_t n_heads,
                     size_t width, cudaStream_t stream);

/* dst[h, r] = lse[h, row_t[r]]: (n_heads, n) -> (n_heads, n_rows). Twin:
 * twin_gather_lse. */
int cuda_gather_lse(float *dst /* (n_heads, n_rows) */, const float *lse /* (n_heads, n) */,
                    const int32_t *row_t /* (n_rows) */, size_t n_rows, size_t n_heads, size_t n,
                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
