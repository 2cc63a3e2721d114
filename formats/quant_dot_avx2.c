/* AVX2 + FMA + F16C kernels of the quantised dot products (formats/quant_dot.h).
 * Only this file is compiled with those instruction sets (CMakeLists.txt);
 * quant_dot.c calls it only when CPUID reports them.
 *
 * Each block's weights are rebuilt in registers bit-identical to
 * dequant_gguf's by the decoders of formats/quant_avx2.h (shared with the
 * tile dequantiser, formats/dequant_avx2.c); each register of 8 weights is
 * decoded once and multiplied into the accumulator of every vector
 * of the call with one FMA. A (row, vector) pair owns one 8-lane accumulator:
 * lane l sums elements l, l + 8, l + 16, ... in a fixed order (row order but
 * for Q4_K, which takes a chunk's two sub-blocks together), and a fixed tree
 * adds the lanes at the end. Rows and vectors are interleaved only to hide the
 * FMA latency, which changes no pair's operations (docs/SCIENCE.md,
 * "Quantised weights"). */
#include "formats/quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "formats/float16.h"
#include "formats/gguf.h"
#include "formats/quant_avx2.h"

#define QD_INLINE OBC_QUANT_INLINE

/* MAX_X: vectors per pass. PREFETCH_WEIGHTS: how far ahead of the weights
 * being decoded a pass asks for the next ones, in weights, so in bytes in
 * proportion to a type's bytes per weight, which sets how fast it streams
 * (Q4_1's 2.5 KiB last 250 ns at 10 GB/s, more than a memory latency; with
 * the hardware prefetcher alone decode streamed at about half the rate it
 * reaches in cache, bench/bench_quant_dot.c). A fixed 2 KiB served Q4_1 as
 * well and left Q8_0 streaming 20 % slower. */
enum { MAX_X = 8, PREFETCH_WEIGHTS = 4096 };

/* Every kernel below adds w * x[b][0..8) into acc[b] for the nx vectors of a
 * pass; x points at the element, successive vectors are `cols` apart. */
typedef void (*BlockKernel)(const uint8_t *block, const float *x, size_t cols, int nx, __m256 *acc);

QD_INLINE void fma_vectors(__m256 w, const float *x, size_t cols, int nx, __m256 *acc) {
  for (int b = 0; b < nx; b++)
    acc[b] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (size_t)b * cols), acc[b]);
}

/* ---- the float types: a "block" of 8 elements ---------------------------- */

QD_INLINE void unit_f32(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(_mm256_loadu_ps((const float *)b), x, cols, nx, acc);
}

QD_INLINE void unit_f16(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(quant_f16x8(b), x, cols, nx, acc);
}

QD_INLINE void unit_bf16(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(quant_bf16x8(b), x, cols, nx, acc);
}

/* ---- quantised blocks ---------------------------------------------------------- */

/* Each register of 8 weights is built (formats/quant_avx2.h) just before its
 * FMAs, in the element order of the accumulators (Q4_K: a chunk's two
 * sub-blocks together). The loops over a group's registers (and Q4_K's over
 * chunks) are unrolled so that their indices are constants: the builders'
 * selections then fold away and the compiler shares their common work. Built
 * four at a time, the registers crowded out the accumulators and 8-vector
 * passes ran up to 20 % slower (bench_quant_dot). */

#define QD_BLOCK32(NAME)                                                             \
  QD_INLINE void block_##NAME(const uint8_t *b, const float *x, size_t cols, int nx, \
                              __m256 *acc) {                                         \
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)                              \
        fma_vectors(quant_##NAME(b, k), x + 8 * k, cols, nx, acc);                   \
  }
QD_BLOCK32(q8_0)
QD_BLOCK32(q4_0)
QD_BLOCK32(q4_1)
QD_BLOCK32(q5_0)
QD_BLOCK32(q5_1)

/* ---- 256-element K super-blocks ------------------------------------------- */

/* Q4_K takes a 32-byte chunk's two sub-blocks together, 16 bytes at a time:
 * elements 0-15 and 32-47 of the chunk, then 16-31 and 48-63. */
QD_INLINE void block_q4_k(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 ds, neg_dm, d[2], m[2];
  quant_k_factors(b, &ds, &neg_dm);
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    quant_q4_k_chunk(ds, neg_dm, c, d, m);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++)
        fma_vectors(quant_q4_k(b, d, m, c, h, k), x + 64 * c + 16 * h + quant_q4_k_offset(k), cols,
                    nx, acc);
  }
}

QD_INLINE void block_q5_k(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 ds, neg_dm;
  quant_k_factors(b, &ds, &neg_dm);
  for (int sub = 0; sub < 8; sub++)
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
      fma_vectors(quant_q5_k(b, ds, neg_dm, sub, k), x + 32 * sub + 8 * k, cols, nx, acc);
}

QD_INLINE void block_q6_k(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 dsc[2], d[2];
  quant_q6_k_scales(b, dsc);
  for (int half = 0; half < 2; half++)
    for (int g = 0; g < 4; g++) {
      __m256i q = quant_q6_k_quants(b, half, g);
      quant_q6_k_group_scales(dsc, half, g, d);
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++)
        fma_vectors(quant_q6_k(q, d, k), x + 128 * half + 32 * g + 8 * k, cols, nx, acc);
    }
}

/* ---- the row driver -------------------------------------------------------- */

/* Element i of a float-type row, exactly (the tail of a row whose length is
 * not a multiple of 8). */
static float float_element(uint32_t type, const uint8_t *row, size_t i) {
  if (type == GGML_TYPE_F16) return float16_f16_to_f32(float16_read_u16(row + 2 * i));
  if (type == GGML_TYPE_BF16) return float16_bf16_to_f32(float16_read_u16(row + 2 * i));
  float value;
  memcpy(&value, row + 4 * i, sizeof value);
  return value;
}

/* The last `tail` (< 8) elements of a float-type row, zero-padded to 8: the
 * padding adds w * x = 0 * 0 to each lane, which changes nothing. */
static void float_tail(uint32_t type, const uint8_t *row, size_t start, size_t tail, const float *x,
                       size_t cols, int nx, __m256 *acc) {
  float w[8] = {0}, xt[8] = {0};
  for (size_t i = 0; i < tail; i++) w[i] = float_element(type, row, start + i);
  __m256 wv = _mm256_loadu_ps(w);
  for (int b = 0; b < nx; b++) {
    memcpy(xt, x + (size_t)b * cols + start, tail * sizeof *xt);
    acc[b] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt), acc[b]);
  }
}

/* The lanes of v added by a fixed tree: (0+4, 1+5, 2+6, 3+7), then pairs. */
QD_INLINE float lane_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

typedef __m256 QdVec;
QD_INLINE QdVec qd_zero(void) { return _mm256_setzero_ps(); }
/* Rows a pass for nx vectors: 4 for 1-2, 2 for 3-4 (enough independent FMA
 * chains in 16 registers), 1 for more. */
#define QD_ROWS(NX) ((NX) <= 2 ? 4 : (NX) <= 4 ? 2 : 1)
enum { QD_FLOAT_UNIT = 8 };
#include "formats/quant_dot_rows.h"

void quant_dot_rows_avx2(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                         const float *x, size_t n_x, float *y, size_t y_stride) {
  qd_rows(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}

int quant_dot_avx2_supported(void) {
  __builtin_cpu_init();
  /* F16C from CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does
   * not know "f16c". AVX2 implies the OS saves the YMM registers (the builtin
   * checks XGETBV for it). */
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1u);
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

#else /* not x86: no AVX2 kernel; quant_dot_rows never chooses it */

void quant_dot_rows_avx2(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                         const float *x, size_t n_x, float *y, size_t y_stride) {
  quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}

int quant_dot_avx2_supported(void) { return 0; }

#endif
