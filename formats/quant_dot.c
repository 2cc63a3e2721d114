/* The portable twin of the quantised dot products (formats/quant_dot.h) and the
 * run-time choice of kernel. */
#include "formats/quant_dot.h"

#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"

enum { MAX_BLOCK = 256 }; /* the largest ggml block (the K super-blocks) */

void quant_dot_rows_portable(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                             size_t n_rows, const float *x, size_t n_x, float *y, size_t y_stride) {
  size_t block = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  float values[MAX_BLOCK];
  for (size_t r = 0; r < n_rows; r++) {
    const unsigned char *row = (const unsigned char *)w + r * row_bytes;
    for (size_t b = 0; b < n_x; b++) y[b * y_stride + r] = 0.0f;
    for (size_t i = 0; i < cols; i += block) {
      dequant_gguf(type, row + i / block * block_bytes, values, block);
      for (size_t b = 0; b < n_x; b++) {
        const float *xb = x + b * cols + i;
        float sum = 0.0f;
        for (size_t j = 0; j < block; j++) sum += values[j] * xb[j];
        y[b * y_stride + r] += sum;
      }
    }
  }
}

const char *quant_dot_kernel_name(void) { return "portable"; }

void quant_dot_rows(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                    const float *x, size_t n_x, float *y, size_t y_stride) {
  quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}
