/* The portable twin of the quantised dot products (formats/quant_dot.h) and the
 * run-time choice of kernel. */
#include "formats/quant_dot.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
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

/* ---- the run-time choice ------------------------------------------------------- */

static const char *const SIMD_NAMES[QUANT_SIMD_COUNT] = {
    [QUANT_SIMD_PORTABLE] = "portable", [QUANT_SIMD_AVX2] = "avx2", [QUANT_SIMD_AVX512] = "avx512"};

const char *quant_dot_simd_name(QuantSimd simd) {
  return simd >= 0 && simd < QUANT_SIMD_COUNT ? SIMD_NAMES[simd] : "unknown";
}

static int simd_supported(QuantSimd simd) {
  switch (simd) {
    case QUANT_SIMD_PORTABLE: return 1;
    case QUANT_SIMD_AVX2: return quant_dot_avx2_supported();
    case QUANT_SIMD_AVX512: return quant_dot_avx512_supported();
    default: return 0;
  }
}

QuantDotFn quant_dot_kernel(QuantSimd simd) {
  static const QuantDotFn kernels[QUANT_SIMD_COUNT] = {
      [QUANT_SIMD_PORTABLE] = quant_dot_rows_portable,
      [QUANT_SIMD_AVX2] = quant_dot_rows_avx2,
      [QUANT_SIMD_AVX512] = quant_dot_rows_avx512};
  return simd_supported(simd) ? kernels[simd] : NULL;
}

static QuantSimd chosen_simd = QUANT_SIMD_PORTABLE;
static QuantDotFn chosen_kernel = quant_dot_rows_portable;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* Once per process, for quant_dot_rows and dequant_gguf alike: the widest
 * kernel this processor runs at or below OBC_SIMD's request (all of them when
 * it is unset), with a note when that is not the kernel asked for. */
static void choose_kernel(void) {
  const char *request = getenv("OBC_SIMD");
  QuantSimd ceiling = QUANT_SIMD_COUNT - 1;
  if (request && *request) {
    QuantSimd asked = 0;
    while (asked < QUANT_SIMD_COUNT && strcmp(request, SIMD_NAMES[asked])) asked++;
    if (asked == QUANT_SIMD_COUNT)
      fprintf(stderr, "obcache: note: OBC_SIMD=%s is not portable, avx2 or avx512; ignored\n",
              request);
    else
      ceiling = asked;
  }
  QuantSimd simd = ceiling;
  while (!simd_supported(simd)) simd--;
  if (request && simd != ceiling)
    fprintf(stderr, "obcache: note: OBC_SIMD=%s: this processor cannot run it; using %s\n", request,
            SIMD_NAMES[simd]);
  chosen_simd = simd;
  chosen_kernel = quant_dot_kernel(simd);
}

QuantSimd quant_dot_simd(void) {
  pthread_once(&chosen_once, choose_kernel);
  return chosen_simd;
}

const char *quant_dot_kernel_name(void) { return quant_dot_simd_name(quant_dot_simd()); }

void quant_dot_rows(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                    const float *x, size_t n_x, float *y, size_t y_stride) {
  pthread_once(&chosen_once, choose_kernel);
  chosen_kernel(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}
