/* The portable twin of the quantised dot products (formats/quant_dot.h) and the
 * run-time choice of kernel. */
#include "formats/quant_dot.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"

/* Elements dequantised at a time: a multiple of every block size (1, 32, 256). */
enum { CHUNK = 2048 };

/* Per row: dequantise up to CHUNK elements with dequant_gguf_portable, then for each
 * vector add each block's products in element order and the block sums in
 * block order. Plain C, the reference the fast kernels are compared with. */
void quant_dot_rows_portable(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                             size_t n_rows, const float *x, size_t n_x, float *y, size_t y_stride) {
  size_t block = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  float values[CHUNK];
  for (size_t r = 0; r < n_rows; r++) {
    const unsigned char *row = (const unsigned char *)w + r * row_bytes;
    for (size_t b = 0; b < n_x; b++) y[b * y_stride + r] = 0.0f;
    for (size_t start = 0; start < cols; start += CHUNK) {
      size_t n = cols - start < CHUNK ? cols - start : CHUNK;
      if (dequant_gguf_portable(type, row + start / block * block_bytes, values, n)) {
        for (size_t b = 0; b < n_x; b++) y[b * y_stride + r] = NAN; /* unsupported type */
        break;
      }
      for (size_t b = 0; b < n_x; b++) {
        const float *xb = x + b * cols + start;
        for (size_t i = 0; i < n; i += block) {
          float sum = 0.0f;
          for (size_t j = i; j < i + block; j++) sum += values[j] * xb[j];
          y[b * y_stride + r] += sum;
        }
      }
    }
  }
}

static QuantDotFn chosen_kernel = quant_dot_rows_portable;
static const char *chosen_name = "portable";
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* Once per process, for quant_dot_rows and dequant_gguf alike: OBC_SIMD=portable,
 * else AVX2 when CPUID reports it. */
static void choose_kernel(void) {
  const char *simd = getenv("OBC_SIMD");
  if (simd && strcmp(simd, "portable") == 0) return;
  if (quant_dot_avx2_supported()) {
    chosen_kernel = quant_dot_rows_avx2;
    chosen_name = "avx2";
  }
}

int quant_dot_uses_avx2(void) {
  pthread_once(&chosen_once, choose_kernel);
  return chosen_kernel == quant_dot_rows_avx2;
}

const char *quant_dot_kernel_name(void) {
  pthread_once(&chosen_once, choose_kernel);
  return chosen_name;
}

void quant_dot_rows(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                    const float *x, size_t n_x, float *y, size_t y_stride) {
  pthread_once(&chosen_once, choose_kernel);
  chosen_kernel(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}
