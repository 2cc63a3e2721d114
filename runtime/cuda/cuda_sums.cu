/* Kernels of cuda_sums.h. Every rounding is spelled out (fmaf, __fmul_rn,
 * __fadd_rn, __dmul_rn, __dadd_rn) so that nvcc contracts nothing the C
 * twins round separately, and the exponential is cpu_expf's polynomial with
 * the same roundings: the kernels and twins.c give bit-equal sums.
 * The column sums give each thread one key position p and query heads of
 * one GQA group; a block stages its 32 keys and values in shared memory
 * (rows padded by four floats against bank conflicts, read as float4) for the whole group and
 * walks the chunk's rows in order, each row's q and o read by every thread of
 * a warp alike. */
#include <math.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_sums.h"

/* SUMS_MAX_GROUP: query heads of a group run side by side (warps of a block). */
enum { SUMS_TILE = 32, SUMS_MAX_GROUP = 8, STATS_THREADS = 256 };

extern "C" int cuda_sums_supports(size_t head_dim) {
  return head_dim > 0 && head_dim <= CUDA_SUMS_MAX_HEAD_DIM && head_dim % 4 == 0;
}

/* cpu_expf (runtime/cpu_ops.h), rounding for rounding. */
__device__ static float sums_expf(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  float shifted = __fadd_rn(__fmul_rn(x, 1.44269504088896341f), 12582912.0f);
  float n = __fsub_rn(shifted, 12582912.0f);
  float r = __fadd_rn(__fsub_rn(x, __fmul_rn(n, 0.693359375f)), __fmul_rn(n, 2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
  p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
  p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
  p = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
  int bits = (__float_as_int(shifted) - 0x4B400000 + 127) * (1 << 23);
  return __fmul_rn(p, __int_as_float(bits));
}

/* The fmaf chain of twin_dot_fma over 4 n4 floats, read four at a time. */
__device__ static float sums_dot4(const float4 *x, const float4 *y, size_t n4) {
  float sum = 0.0f;
  for (size_t i = 0; i < n4; i++) {
    float4 a = x[i], b = y[i];
    sum = fmaf(a.x, b.x, sum);
    sum = fmaf(a.y, b.y, sum);
    sum = fmaf(a.z, b.z, sum);
    sum = fmaf(a.w, b.w, sum);
  }
  return sum;
}

/* One component of the pair's norms: d = v - o, dd += d^2, uu += (v + z d)^2. */
__device__ static void sums_norms(float v, float o, float z, float *dd, float *uu) {
  float d = __fsub_rn(v, o), u = fmaf(z, d, v);
  *dd = fmaf(d, d, *dd);
  *uu = fmaf(u, u, *uu);
}

/* Block (key tile, KV head g): thread (x, y) takes key p_first + x for the
 * query heads y, y + blockDim.y, ... of g's group, so that the group shares
 * one staged tile and each warp holds one query head (its q and o reads are
 * the same address for every lane). */
__global__ void column_sums_kernel(TwinSumsShape sh, const float *q, const float *o,
                                   const float *lse, const float *k, const float *v, size_t t_begin,
                                   size_t t_end, double *attn, double *obc) {
  /* keys then values, (SUMS_TILE, head_dim + 4) each: rows stay 16-byte
   * aligned for float4 reads, and the 4-float pad spreads the 8 lanes of a
   * float4 phase over distinct banks */
  extern __shared__ float4 tile4[];
  float *tile = (float *)tile4;
  size_t hd = sh.head_dim, row = hd + 4, n4 = hd / 4, H = sh.n_heads, n = sh.n_prompt;
  size_t group = H / sh.n_kv_heads, g = blockIdx.y, n_keys = sh.pos0 + t_end;
  size_t p_first = (size_t)blockIdx.x * SUMS_TILE, p = p_first + threadIdx.x;
  float *kt = tile, *vt = tile + SUMS_TILE * row;
  size_t thread = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
  for (size_t i = thread; i < SUMS_TILE * hd; i += threads) {
    size_t r = i / hd, c = i % hd, src = (g * sh.kv_stride + p_first + r) * hd + c;
    kt[r * row + c] = p_first + r < n_keys ? k[src] : 0.0f;
    vt[r * row + c] = p_first + r < n_keys ? v[src] : 0.0f;
  }
  __syncthreads();
  if (p >= n_keys) return;
  const float4 *kp = (const float4 *)(kt + threadIdx.x * row);
  const float4 *vp = (const float4 *)(vt + threadIdx.x * row);
  double vv = sums_dot4(vp, vp, n4);
  size_t t0 = p > sh.pos0 + t_begin ? p - sh.pos0 : t_begin;
  for (size_t h = g * group + threadIdx.y; h < (g + 1) * group; h += blockDim.y) {
    /* Legend as twin_column_sums_add: a = A_tp, z the scaled logit,
     * dd = ||v_p - o_t||^2, uu = ||v_p + z (v_p - o_t)||^2. */
    double sum_a = attn[h * n + p], sum_v = obc[h * n + p], sum_k = obc[(H + h) * n + p],
           sum_vk = obc[(2 * H + h) * n + p];
    for (size_t t = t0; t < t_end; t++) {
      const float4 *qt = (const float4 *)(q + (t * H + h) * hd);
      const float4 *ot = (const float4 *)(o + (t * H + h) * hd);
      float z = __fmul_rn(sh.scale, sums_dot4(qt, kp, n4));
      float a = sums_expf(__fsub_rn(z, lse[h * sh.n + t]));
      float dd = 0.0f, uu = 0.0f;
      for (size_t i = 0; i < n4; i++) {
        float4 vc = vp[i], oc = ot[i];
        sums_norms(vc.x, oc.x, z, &dd, &uu);
        sums_norms(vc.y, oc.y, z, &dd, &uu);
        sums_norms(vc.z, oc.z, z, &dd, &uu);
        sums_norms(vc.w, oc.w, z, &dd, &uu);
      }
      double ad = a, zd = z, a2 = __dmul_rn(ad, ad), z2 = __dmul_rn(zd, zd);
      sum_a = __dadd_rn(sum_a, ad);
      sum_v = __dadd_rn(sum_v, __dmul_rn(a2, vv));
      sum_k = __dadd_rn(sum_k, __dmul_rn(__dmul_rn(a2, z2), (double)dd));
      sum_vk = __dadd_rn(sum_vk, __dmul_rn(a2, (double)uu));
    }
    attn[h * n + p] = sum_a;
    obc[h * n + p] = sum_v;
    obc[(H + h) * n + p] = sum_k;
    obc[(2 * H + h) * n + p] = sum_vk;
  }
}

extern "C" int cuda_column_sums_add(const TwinSumsShape *shape, const float *q, const float *o,
                                    const float *lse, const float *k, const float *v,
                                    size_t t_begin, size_t t_end, double *attn, double *obc,
                                    cudaStream_t stream) {
  if (t_end <= t_begin) return 0;
  size_t n_keys = shape->pos0 + t_end, tiles = (n_keys + SUMS_TILE - 1) / SUMS_TILE;
  size_t shared = 2 * SUMS_TILE * (shape->head_dim + 4) * sizeof(float);
  size_t group = shape->n_heads / shape->n_kv_heads;
  dim3 grid((unsigned)tiles, (unsigned)shape->n_kv_heads);
  dim3 block(SUMS_TILE, (unsigned)(group < SUMS_MAX_GROUP ? group : SUMS_MAX_GROUP));
  column_sums_kernel<<<grid, block, shared, stream>>>(*shape, q, o, lse, k, v, t_begin, t_end, attn,
                                                      obc);
  return OBC_CUDA_LAUNCH("column_sums_kernel");
}

/* twin_unrope, on the device: both products of floats are exact in double,
 * so the one rounding of their sum is the twin's whether or not it fuses. */
__device__ static double sums_unrope(const float *q, const float *cos_row, const float *sin_row,
                                     size_t head_dim, int interleaved, size_t c) {
  size_t half = head_dim / 2, j = interleaved ? c / 2 : c % half;
  size_t a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + half;
  double cs = cos_row[j], sn = sin_row[j], x0 = q[a], x1 = q[b];
  return c == a ? __dadd_rn(__dmul_rn(x0, cs), __dmul_rn(x1, sn))
                : __dsub_rn(__dmul_rn(x1, cs), __dmul_rn(x0, sn));
}

/* Entry e of head blockIdx.y: e < head_dim * head_dim is outer[c, c2] (upper
 * triangle only), the head_dim after it sum[c]. */
__global__ void query_stats_kernel(TwinSumsShape sh, const float *q, const float *cos_table,
                                   const float *sin_table, int interleaved, size_t t_begin,
                                   size_t t_end, double *sum, double *outer) {
  size_t hd = sh.head_dim, half = hd / 2, H = sh.n_heads, h = blockIdx.y;
  size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= hd * hd + hd) return;
  bool is_sum = e >= hd * hd;
  size_t c = is_sum ? e - hd * hd : e / hd, c2 = is_sum ? c : e % hd;
  if (c2 < c) return;
  double *cell = is_sum ? sum + h * hd + c : outer + (h * hd + c) * hd + c2;
  double acc = *cell;
  for (size_t t = t_begin; t < t_end; t++) {
    const float *qt = q + (t * H + h) * hd;
    const float *cs = cos_table + (sh.pos0 + t) * half, *sn = sin_table + (sh.pos0 + t) * half;
    double u = sums_unrope(qt, cs, sn, hd, interleaved, c);
    acc = is_sum ? __dadd_rn(acc, u)
                 : __dadd_rn(acc, __dmul_rn(u, sums_unrope(qt, cs, sn, hd, interleaved, c2)));
  }
  *cell = acc;
}

extern "C" int cuda_query_stats_add(const TwinSumsShape *shape, const float *q,
                                    const float *cos_table, const float *sin_table, int interleaved,
                                    size_t t_begin, size_t t_end, double *sum, double *outer,
                                    cudaStream_t stream) {
  if (t_end <= t_begin) return 0;
  size_t hd = shape->head_dim, entries = hd * hd + hd;
  dim3 grid((unsigned)((entries + STATS_THREADS - 1) / STATS_THREADS), (unsigned)shape->n_heads);
  query_stats_kernel<<<grid, STATS_THREADS, 0, stream>>>(*shape, q, cos_table, sin_table,
                                                         interleaved, t_begin, t_end, sum, outer);
  return OBC_CUDA_LAUNCH("query_stats_kernel");
}
