/* The attention kernels of cuda_attention.h. In the tiled kernel each of the
 * 4 warps of a block owns 4 query rows; a key tile is loaded once into shared
 * memory, lane j scores key j for the warp's rows, the warp updates each
 * row's running max / sum / output (online softmax), and lanes own head_dim /
 * 32 output columns. fp32 throughout (CUDA cores, not tensor cores). */
#include <math.h>

#include "runtime/cuda/cuda_attention.h"

extern "C" {
#include "common/obc_error.h"
}
#include "runtime/cuda/cuda_check.h"

enum { BQ = 16, BK = 32, WARPS = 4, ROWS_PER_WARP = BQ / WARPS, ROWS_THREADS = 256 };

__device__ static float warp_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

__device__ static float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <int HD>
__global__ void __launch_bounds__(WARPS * 32)
    flash_kernel(CpuAttentionShape s, const float *q, const float *k, const float *v, float *out,
                 float *lse, float scale) {
  constexpr int EPL = HD / 32; /* output columns per lane */
  __shared__ float sq[BQ][HD];
  __shared__ float sk[BK][HD + 1]; /* +1: lane j reads row j without bank conflicts */
  __shared__ float sv[BK][HD];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const size_t h = blockIdx.y, t0 = (size_t)blockIdx.x * BQ;
  const size_t nq = s.n - t0 < (size_t)BQ ? s.n - t0 : (size_t)BQ;
  const size_t q_dim = s.n_heads * HD, group = s.n_heads / s.n_kv_heads;
  const float *kh = k + (h / group) * s.kv_stride * HD;
  const float *vh = v + (h / group) * s.kv_stride * HD;
  const unsigned char *dropped = s.evicted ? s.evicted + (h / group) * s.kv_stride : NULL;
  const size_t key_end = s.pos0 + t0 + nq; /* keys [0, key_end) */

  for (int i = threadIdx.x; i < BQ * HD; i += blockDim.x) {
    int r = i / HD, d = i % HD;
    sq[r][d] = (size_t)r < nq ? q[(t0 + r) * q_dim + h * HD + d] * scale : 0.0f;
  }
  float m[ROWS_PER_WARP], l[ROWS_PER_WARP], acc[ROWS_PER_WARP][EPL];
#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < EPL; e++) acc[r][e] = 0.0f;
  }

  for (size_t k0 = 0; k0 < key_end; k0 += BK) {
    __syncthreads(); /* the previous tile is no longer read */
    for (int i = threadIdx.x; i < BK * HD; i += blockDim.x) {
      int j = i / HD, d = i % HD;
      bool valid = k0 + j < key_end;
      sk[j][d] = valid ? kh[(k0 + j) * HD + d] : 0.0f;
      sv[j][d] = valid ? vh[(k0 + j) * HD + d] : 0.0f;
    }
    __syncthreads();
    float score[ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) score[r] = 0.0f;
    for (int d = 0; d < HD; d++) {
      float kd = sk[lane][d];
#pragma unroll
      for (int r = 0; r < ROWS_PER_WARP; r++) score[r] += sq[warp * ROWS_PER_WARP + r][d] * kd;
    }
    const size_t key = k0 + lane;
#pragma unroll
    for (int r = 0; r < ROWS_PER_WARP; r++) {
      const size_t row = (size_t)(warp * ROWS_PER_WARP + r);
      const bool valid = row < nq && key <= s.pos0 + t0 + row && !(dropped && dropped[key]);
      const float sc = valid ? score[r] : -INFINITY;
      const float m_new = fmaxf(m[r], warp_max(sc));
      if (m_new == -INFINITY) continue; /* no key of this row yet (uniform in the warp) */
      const float p = valid ? expf(sc - m_new) : 0.0f;
      const float alpha = expf(m[r] - m_new);
      l[r] = l[r] * alpha + warp_sum(p);
      m[r] = m_new;
#pragma unroll
      for (int e = 0; e < EPL; e++) acc[r][e] *= alpha;
      for (int j = 0; j < BK; j++) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int e = 0; e < EPL; e++) acc[r][e] += pj * sv[j][lane + 32 * e];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < ROWS_PER_WARP; r++) {
    const size_t row = (size_t)(warp * ROWS_PER_WARP + r);
    if (row >= nq) continue;
    const float inv = 1.0f / l[r];
    float *dst = out + (t0 + row) * q_dim + h * HD;
#pragma unroll
    for (int e = 0; e < EPL; e++) dst[lane + 32 * e] = acc[r][e] * inv;
    if (lane == 0) lse[h * s.n + t0 + row] = m[r] + logf(l[r]);
  }
}

/* One block per (captured row, head): the scaled query in shared memory, each
 * warp scores keys j = warp, warp + 8, ... with lanes over head_dim. */
template <int HD>
__global__ void __launch_bounds__(ROWS_THREADS)
    rows_kernel(CpuAttentionShape s, const float *q, const float *k, const float *lse,
                const int32_t *row_t, size_t n_rows, float *attn, float scale) {
  constexpr int EPL = HD / 32;
  __shared__ float sq[HD];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
  const size_t r = blockIdx.x, h = blockIdx.y, t = (size_t)row_t[r];
  const size_t q_dim = s.n_heads * HD, group = s.n_heads / s.n_kv_heads;
  const size_t n_keys = s.pos0 + s.n, position = s.pos0 + t;
  const float *kh = k + (h / group) * s.kv_stride * HD;
  const unsigned char *dropped = s.evicted ? s.evicted + (h / group) * s.kv_stride : NULL;
  const float row_lse = lse[h * s.n + t];
  float *dst = attn + (h * n_rows + r) * n_keys;
  for (int d = threadIdx.x; d < HD; d += blockDim.x) sq[d] = q[t * q_dim + h * HD + d] * scale;
  __syncthreads();
  for (size_t j = position + 1 + threadIdx.x; j < n_keys; j += blockDim.x) dst[j] = 0.0f;
  for (size_t j = (size_t)warp; j <= position; j += (size_t)n_warps) {
    if (dropped && dropped[j]) { /* evicted: exactly 0 (the branch is uniform in the warp) */
      if (lane == 0) dst[j] = 0.0f;
      continue;
    }
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < EPL; e++) dot += sq[lane + 32 * e] * kh[j * HD + lane + 32 * e];
    dot = warp_sum(dot);
    if (lane == 0) dst[j] = expf(dot - row_lse);
  }
}

extern "C" int cuda_attention_supports(size_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128;
}

static int unsupported(size_t head_dim) {
  return obc_fail(OBC_EUNSUPPORTED,
                  "cuda attention: head_dim %zu is not built (expected 32, 64, 96 or 128)",
                  head_dim);
}

extern "C" int cuda_attention(const CpuAttentionShape *shape, const float *q, const float *k,
                              const float *v, float *out, float *lse, cudaStream_t stream) {
  if (shape->n == 0) return 0;
  dim3 grid((unsigned)((shape->n + BQ - 1) / BQ), (unsigned)shape->n_heads);
  float scale = (float)(1.0 / sqrt((double)shape->head_dim));
  switch (shape->head_dim) {
    case 32:
      flash_kernel<32><<<grid, WARPS * 32, 0, stream>>>(*shape, q, k, v, out, lse, scale);
      break;
    case 64:
      flash_kernel<64><<<grid, WARPS * 32, 0, stream>>>(*shape, q, k, v, out, lse, scale);
      break;
    case 96:
      flash_kernel<96><<<grid, WARPS * 32, 0, stream>>>(*shape, q, k, v, out, lse, scale);
      break;
    case 128:
      flash_kernel<128><<<grid, WARPS * 32, 0, stream>>>(*shape, q, k, v, out, lse, scale);
      break;
    default: return unsupported(shape->head_dim);
  }
  return OBC_CUDA_LAUNCH("flash_kernel");
}

extern "C" int cuda_attention_rows(const CpuAttentionShape *shape, const float *q, const float *k,
                                   const float *lse, const int32_t *row_t, size_t n_rows,
                                   float *attn, cudaStream_t stream) {
  if (n_rows == 0) return 0;
  dim3 grid((unsigned)n_rows, (unsigned)shape->n_heads);
  float scale = (float)(1.0 / sqrt((double)shape->head_dim));
  switch (shape->head_dim) {
    case 32:
      rows_kernel<32>
          <<<grid, ROWS_THREADS, 0, stream>>>(*shape, q, k, lse, row_t, n_rows, attn, scale);
      break;
    case 64:
      rows_kernel<64>
          <<<grid, ROWS_THREADS, 0, stream>>>(*shape, q, k, lse, row_t, n_rows, attn, scale);
      break;
    case 96:
      rows_kernel<96>
          <<<grid, ROWS_THREADS, 0, stream>>>(*shape, q, k, lse, row_t, n_rows, attn, scale);
      break;
    case 128:
      rows_kernel<128>
          <<<grid, ROWS_THREADS, 0, stream>>>(*shape, q, k, lse, row_t, n_rows, attn, scale);
      break;
    default: return unsupported(shape->head_dim);
  }
  return OBC_CUDA_LAUNCH("rows_kernel");
}
