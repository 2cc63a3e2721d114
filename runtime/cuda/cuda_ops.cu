/* Kernels of cuda_ops.h. Element-wise work uses a grid-stride loop over
 * size_t indices; row-wise reductions (RMSNorm, argmax) use one block per row.
 * Arithmetic follows the C twins operation by operation, so that fp32 results
 * agree to rounding (expf vs. cpu_expf: a few ulp). */
#include <cuda_bf16.h>
#include <math.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_ops.h"

enum { THREADS = 256, REDUCE_THREADS = 256 };

static unsigned grid_for(size_t count) {
  size_t blocks = (count + THREADS - 1) / THREADS;
  if (blocks > 65535u * 16u) blocks = 65535u * 16u; /* grid-stride covers the rest */
  return (unsigned)(blocks ? blocks : 1);
}

#define GRID_STRIDE(i, count)                                                 \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count); \
       i += (size_t)gridDim.x * blockDim.x)

__global__ void rmsnorm_kernel(float *out, const float *x, const float *weight, size_t dim,
                               double eps) {
  __shared__ double partial[REDUCE_THREADS];
  const float *row = x + (size_t)blockIdx.x * dim;
  double sum = 0.0;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) sum += (double)row[i] * row[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  float scale = (float)(1.0 / sqrt(partial[0] / (double)dim + eps));
  float *dst = out + (size_t)blockIdx.x * dim;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = row[i] * scale * weight[i];
}

extern "C" int cuda_rmsnorm(float *out, const float *x, const float *weight, size_t n, size_t dim,
                            double eps, cudaStream_t stream) {
  if (n == 0) return 0;
  rmsnorm_kernel<<<(unsigned)n, REDUCE_THREADS, 0, stream>>>(out, x, weight, dim, eps);
  return OBC_CUDA_LAUNCH("rmsnorm_kernel");
}

__global__ void rope_kernel(float *x, size_t n, size_t n_heads, size_t head_dim, size_t pos0,
                            const float *cos_table, const float *sin_table, int interleaved) {
  size_t half = head_dim / 2;
  GRID_STRIDE(idx, n * n_heads * half) {
    size_t i = idx % half, h = (idx / half) % n_heads, t = idx / (half * n_heads);
    float c = cos_table[(pos0 + t) * half + i], s = sin_table[(pos0 + t) * half + i];
    float *head = x + (t * n_heads + h) * head_dim;
    size_t a = interleaved ? 2 * i : i;
    size_t b = interleaved ? 2 * i + 1 : i + half;
    float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
}

extern "C" int cuda_rope(float *x, size_t n, size_t n_heads, size_t head_dim, size_t pos0,
                         const float *cos_table, const float *sin_table, int interleaved,
                         cudaStream_t stream) {
  size_t count = n * n_heads * (head_dim / 2);
  if (count == 0) return 0;
  rope_kernel<<<grid_for(count), THREADS, 0, stream>>>(x, n, n_heads, head_dim, pos0, cos_table,
                                                       sin_table, interleaved);
  return OBC_CUDA_LAUNCH("rope_kernel");
}

__global__ void swiglu_kernel(float *gate, const float *up, size_t count) {
  GRID_STRIDE(i, count) {
    float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

extern "C" int cuda_swiglu(float *gate, const float *up, size_t count, cudaStream_t stream) {
  if (count == 0) return 0;
  swiglu_kernel<<<grid_for(count), THREADS, 0, stream>>>(gate, up, count);
  return OBC_CUDA_LAUNCH("swiglu_kernel");
}

__global__ void add_bias_kernel(float *rows, const float *bias, size_t n, size_t width) {
  GRID_STRIDE(i, n * width) rows[i] += bias[i % width];
}

extern "C" int cuda_add_bias(float *rows, const float *bias, size_t n, size_t width,
                             cudaStream_t stream) {
  if (n * width == 0) return 0;
  add_bias_kernel<<<grid_for(n * width), THREADS, 0, stream>>>(rows, bias, n, width);
  return OBC_CUDA_LAUNCH("add_bias_kernel");
}

__global__ void embed_kernel(float *out, const void *table, int table_bf16, const int32_t *tokens,
                             size_t n, size_t dim) {
  GRID_STRIDE(i, n * dim) {
    size_t t = i / dim, d = i % dim;
    size_t src = (size_t)tokens[t] * dim + d;
    out[i] = table_bf16 ? __bfloat162float(((const __nv_bfloat16 *)table)[src])
                        : ((const float *)table)[src];
  }
}

extern "C" int cuda_embed(float *out, const void *table, int table_bf16, const int32_t *tokens,
                          size_t n, size_t dim, cudaStream_t stream) {
  if (n * dim == 0) return 0;
  embed_kernel<<<grid_for(n * dim), THREADS, 0, stream>>>(out, table, table_bf16, tokens, n, dim);
  return OBC_CUDA_LAUNCH("embed_kernel");
}

__global__ void to_bf16_kernel(__nv_bfloat16 *out, const float *in, size_t count) {
  GRID_STRIDE(i, count) out[i] = __float2bfloat16_rn(in[i]);
}

extern "C" int cuda_to_bf16(uint16_t *out, const float *in, size_t count, cudaStream_t stream) {
  if (count == 0) return 0;
  to_bf16_kernel<<<grid_for(count), THREADS, 0, stream>>>((__nv_bfloat16 *)out, in, count);
  return OBC_CUDA_LAUNCH("to_bf16_kernel");
}

/* Keeps the larger value; on equal values the smaller index (first wins). */
__device__ static void argmax_merge(float *value, int32_t *index, float other_value,
                                    int32_t other_index) {
  if (other_value > *value || (other_value == *value && other_index < *index)) {
    *value = other_value;
    *index = other_index;
  }
}

__global__ void argmax_kernel(int32_t *index, const float *x, size_t width) {
  __shared__ float best_value[REDUCE_THREADS];
  __shared__ int32_t best_index[REDUCE_THREADS];
  const float *row = x + (size_t)blockIdx.x * width;
  float value = -INFINITY;
  int32_t at = INT32_MAX;
  for (size_t i = threadIdx.x; i < width; i += blockDim.x)
    argmax_merge(&value, &at, row[i], (int32_t)i);
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = at;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      float v = best_value[threadIdx.x];
      int32_t k = best_index[threadIdx.x];
      argmax_merge(&v, &k, best_value[threadIdx.x + stride], best_index[threadIdx.x + stride]);
      best_value[threadIdx.x] = v;
      best_index[threadIdx.x] = k;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) index[blockIdx.x] = best_index[0] == INT32_MAX ? 0 : best_index[0];
}

extern "C" int cuda_argmax(int32_t *index, const float *x, size_t n_rows, size_t width,
                           cudaStream_t stream) {
  if (n_rows == 0) return 0;
  argmax_kernel<<<(unsigned)n_rows, REDUCE_THREADS, 0, stream>>>(index, x, width);
  return OBC_CUDA_LAUNCH("argmax_kernel");
}

__global__ void store_kv_kernel(float *cache, const float *rows, size_t n, size_t n_kv_heads,
                                size_t head_dim, size_t kv_stride, size_t pos0) {
  size_t kv_dim = n_kv_heads * head_dim;
  GRID_STRIDE(i, n * kv_dim) {
    size_t t = i / kv_dim, g = (i % kv_dim) / head_dim, d = i % head_dim;
    cache[(g * kv_stride + pos0 + t) * head_dim + d] = rows[i];
  }
}

extern "C" int cuda_store_kv(float *cache, const float *rows, size_t n, size_t n_kv_heads,
                             size_t head_dim, size_t kv_stride, size_t pos0, cudaStream_t stream) {
  size_t count = n * n_kv_heads * head_dim;
  if (count == 0) return 0;
  store_kv_kernel<<<grid_for(count), THREADS, 0, stream>>>(cache, rows, n, n_kv_heads, head_dim,
                                                           kv_stride, pos0);
  return OBC_CUDA_LAUNCH("store_kv_kernel");
}

__global__ void gather_rows_kernel(float *dst, const float *src, const int32_t *row_t,
                                   size_t n_rows, size_t n_heads, size_t width) {
  GRID_STRIDE(i, n_heads * n_rows * width) {
    size_t d = i % width, r = (i / width) % n_rows, h = i / (width * n_rows);
    dst[i] = src[((size_t)row_t[r] * n_heads + h) * width + d];
  }
}

extern "C" int cuda_gather_rows(float *dst, const float *src, const int32_t *row_t, size_t n_rows,
                                size_t n_heads, size_t width, cudaStream_t stream) {
  size_t count = n_heads * n_rows * width;
  if (count == 0) return 0;
  gather_rows_kernel<<<grid_for(count), THREADS, 0, stream>>>(dst, src, row_t, n_rows, n_heads,
                                                              width);
  return OBC_CUDA_LAUNCH("gather_rows_kernel");
}

__global__ void gather_lse_kernel(float *dst, const float *lse, const int32_t *row_t, size_t n_rows,
                                  size_t n_heads, size_t n) {
  GRID_STRIDE(i, n_heads * n_rows) {
    size_t r = i % n_rows, h = i / n_rows;
    dst[i] = lse[h * n + (size_t)row_t[r]];
  }
}

extern "C" int cuda_gather_lse(float *dst, const float *lse, const int32_t *row_t, size_t n_rows,
                               size_t n_heads, size_t n, cudaStream_t stream) {
  size_t count = n_heads * n_rows;
  if (count == 0) return 0;
  gather_lse_kernel<<<grid_for(count), THREADS, 0, stream>>>(dst, lse, row_t, n_rows, n_heads, n);
  return OBC_CUDA_LAUNCH("gather_lse_kernel");
}
