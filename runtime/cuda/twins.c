/* The C twins of twins.h: the reference each CUDA kernel without a CPU
 * backend counterpart is checked against, element by element. */
#include "runtime/cuda/twins.h"

#include <string.h>

#include "formats/float16.h"

uint16_t twin_bf16_from_f32(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u); /* NaN */
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u); /* ties to even */
  return (uint16_t)((bits + rounding) >> 16);
}

void twin_to_bf16(uint16_t *out, const float *in, size_t count) {
  for (size_t i = 0; i < count; i++) out[i] = twin_bf16_from_f32(in[i]);
}

void twin_embed_bf16(float *out, const uint16_t *table, const int32_t *tokens, size_t n,
                     size_t dim) {
  for (size_t t = 0; t < n; t++)
    for (size_t d = 0; d < dim; d++)
      out[t * dim + d] = float16_bf16_to_f32(table[(size_t)tokens[t] * dim + d]);
}

void twin_argmax(int32_t *index, const float *x, size_t n_rows, size_t width) {
  for (size_t r = 0; r < n_rows; r++) {
    const float *row = x + r * width;
    size_t best = 0;
    for (size_t i = 1; i < width; i++)
      if (row[i] > row[best]) best = i;
    index[r] = (int32_t)best;
  }
}

void twin_store_kv(float *cache, const float *rows, size_t n, size_t n_kv_heads, size_t head_dim,
                   size_t kv_stride, size_t pos0) {
  for (size_t t = 0; t < n; t++)
    for (size_t g = 0; g < n_kv_heads; g++)
      memcpy(cache + (g * kv_stride + pos0 + t) * head_dim, rows + (t * n_kv_heads + g) * head_dim,
             head_dim * sizeof(float));
}

void twin_gather_rows(float *dst, const float *src, const int32_t *row_t, size_t n_rows,
                      size_t n_heads, size_t width) {
  for (size_t h = 0; h < n_heads; h++)
    for (size_t r = 0; r < n_rows; r++)
      memcpy(dst + (h * n_rows + r) * width, src + ((size_t)row_t[r] * n_heads + h) * width,
             width * sizeof(float));
}

void twin_gather_lse(float *dst, const float *lse, const int32_t *row_t, size_t n_rows,
                     size_t n_heads, size_t n) {
  for (size_t h = 0; h < n_heads; h++)
    for (size_t r = 0; r < n_rows; r++) dst[h * n_rows + r] = lse[h * n + (size_t)row_t[r]];
}
