/* C twins of the CUDA kernels that have no counterpart among the CPU
 * backend's ops (runtime/cpu_ops.h, runtime/cpu_attention.h): bf16 rounding and
 * lookup, row argmax, the K/V store into the cache layout and the capture
 * gathers. Plain loops, obviously correct; tests/gpu compares each kernel with
 * its twin. */
#ifndef OBC_CUDA_TWINS_H
#define OBC_CUDA_TWINS_H

#include <stddef.h>
#include <stdint.h>

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

#endif
