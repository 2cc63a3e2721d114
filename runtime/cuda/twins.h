/* C twins of the CUDA kernels that have no counterpart among the CPU
 * backend's ops (runtime/cpu_ops.h, runtime/cpu_attention.h): bf16 rounding and
 * lookup, row argmax, the K/V store into the cache layout, the capture
 * gathers and the capture's device sums (column sums of attention, pre-RoPE
 * query statistics). Plain loops, obviously correct; tests/gpu compares each
 * kernel with its twin, and tests/test_capture_twins.c the sums' twins with
 * capture/capture_sums.c and capture/capture_qstats.c. */
#ifndef OBC_CUDA_TWINS_H
#define OBC_CUDA_TWINS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

/* fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN. */
uint16_t twin_bf16_from_f32(float x);
void twin_to_bf16(uint16_t *out /* (count) */, const float *in /* (count) */, size_t count);

/* out[t] = table[tokens[t]] with a bf16 table. */
void twin_embed_bf16(float *out /* (n, dim) */, const uint16_t *table /* (vocab, dim) */,
                     const int32_t *tokens /* (n) */, size_t n, size_t dim);

/* index[r] = first index of the largest value of row r. */
void twin_argmax(int32_t *index /* (n_rows) */, const float *x /* (n_rows, width) */, size_t n_rows,
                 size_t width);

/* cache[g, pos0 + t, :] = rows[t, g, :]. */
void twin_store_kv(float *cache /* (n_kv_heads, kv_stride, head_dim) */,
                   const float *rows /* (n, n_kv_heads * head_dim) */, size_t n, size_t n_kv_heads,
                   size_t head_dim, size_t kv_stride, size_t pos0);

/* dst[h, r, :] = src[row_t[r], h, :]. */
void twin_gather_rows(float *dst /* (n_heads, n_rows, width) */,
                      const float *src /* (n, n_heads * width) */,
                      const int32_t *row_t /* (n_rows) */, size_t n_rows, size_t n_heads,
                      size_t width);

/* dst[h, r] = lse[h, row_t[r]]. */
void twin_gather_lse(float *dst /* (n_heads, n_rows) */, const float *lse /* (n_heads, n) */,
                     const int32_t *row_t /* (n_rows) */, size_t n_rows, size_t n_heads, size_t n);

/* ---- the capture's device sums (runtime.h RuntimeSums) ---- */

/* One layer and one chunk of a forward call: rows t of the chunk sit at
 * positions pos0 + t; q and o are the chunk's (n, n_heads * head_dim) rows
 * (post-RoPE queries, per-head attention outputs), lse its (n_heads, n)
 * softmax denominators; k and v the layer's cache (n_kv_heads, kv_stride,
 * head_dim). Rows [t_begin, t_end) are summed; they must be prompt rows. */
typedef struct {
  size_t n_heads, n_kv_heads, head_dim;
  size_t kv_stride; /* cache rows per KV head */
  size_t pos0, n;   /* the chunk */
  size_t n_prompt;  /* columns of the sums */
  float scale;      /* logit scale */
} TwinSumsShape;

/* The dot product of n floats, one fmaf per term in index order (the CUDA
 * kernels run the same fmaf chain, so both round alike). */
float twin_dot_fma(const float *x, const float *y, size_t n);

/* For query head h (KV head g = h / (n_heads / n_kv_heads)), each row t and
 * each key p <= pos0 + t, with z = scale * q_t.k_p, a = exp(z - lse_t)
 * (cpu_expf), d = v_p - o_t:
 *   attn[h, p]         += a
 *   obc[OBC_V, h, p]   += a^2 ||v_p||^2
 *   obc[OBC_K, h, p]   += a^2 z^2 ||d||^2
 *   obc[OBC_VK, h, p]  += a^2 ||v_p + z d||^2
 * the norms as twin_dot_fma chains in float, the terms and the sums in
 * double, rows added in ascending order. */
void twin_column_sums_add(const TwinSumsShape *shape, const float *q /* (n, n_heads * head_dim) */,
                          const float *o /* (n, n_heads * head_dim) */,
                          const float *lse /* (n_heads, n) */,
                          const float *k /* (n_kv_heads, kv_stride, head_dim) */,
                          const float *v /* (n_kv_heads, kv_stride, head_dim) */, size_t t_begin,
                          size_t t_end, double *attn /* (n_heads, n_prompt) */,
                          double *obc /* (3, n_heads, n_prompt) */);

/* Component c of row t's pre-RoPE query of head h: the inverse of cpu_rope's
 * rotation with the runtime's float tables, in double. */
double twin_unrope(const float *q_head /* (head_dim) */, const float *cos_row /* (head_dim / 2) */,
                   const float *sin_row /* (head_dim / 2) */, size_t head_dim, int interleaved,
                   size_t c);

/* For every head h and row t in [t_begin, t_end), with u the pre-RoPE query
 * (twin_unrope at position pos0 + t): sum[h, c] += u_c and, for c <= c2,
 * outer[h, c, c2] += u_c u_c2 (upper triangle only), rows in ascending order,
 * each product rounded before it is added. */
void twin_query_stats_add(const TwinSumsShape *shape, const float *q /* (n, n_heads * head_dim) */,
                          const float *cos_table /* (positions, head_dim / 2) */,
                          const float *sin_table /* (positions, head_dim / 2) */, int interleaved,
                          size_t t_begin, size_t t_end, double *sum /* (n_heads, head_dim) */,
                          double *outer /* (n_heads, head_dim, head_dim) */);

/* What the device sums do with one layer of a chunk [pos0, pos0 + n): its
 * prompt rows [0, rows), rows [0, cut) into the all-rows sums, then (when
 * snapshot) the layer's all-rows sums copied into its agnostic ones, then
 * rows [cut, rows); the query statistics leave out rows before stats_first.
 * The CUDA backend follows this plan with the kernels. */
typedef struct {
  size_t rows, cut, stats_first;
  int snapshot;
} TwinSumsPlan;
TwinSumsPlan twin_sums_plan(const RuntimeSums *sums, size_t pos0, size_t n);

/* The C twin of the CUDA backend's per-layer sums: the plan with the twins
 * above, on host arrays in RuntimeSums's layout (sums->attn, ...). shape's
 * n_prompt and scale are the request's; k and v the layer's cache. */
void twin_sums_layer(const RuntimeSums *sums, const TwinSumsShape *shape, size_t layer,
                     const float *q /* (n, n_heads * head_dim) */,
                     const float *o /* (n, n_heads * head_dim) */,
                     const float *lse /* (n_heads, n) */,
                     const float *k /* (n_kv_heads, kv_stride, head_dim) */,
                     const float *v /* (n_kv_heads, kv_stride, head_dim) */,
                     const float *cos_table /* (positions, head_dim / 2) */,
                     const float *sin_table /* (positions, head_dim / 2) */, int interleaved);

#endif
