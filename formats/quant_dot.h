/* Dot products of weight rows stored in a ggml type (formats/gguf.h) with fp32
 * vectors: the decode path of the CPU runtime, which keeps a GGUF file's
 * tensors in their stored type instead of an fp32 copy.
 *
 * Each product is the exact dequantised weight (dequant_gguf) times the fp32
 * input, accumulated in fp32: only the order of the additions differs between
 * kernels, so a kernel agrees with the portable twin to within fp32 summation
 * error (docs/SCIENCE.md, "Quantised weights"). Every kernel computes one
 * (row, vector) product with the same instruction sequence whatever n_rows and
 * n_x are, so a row's result does not depend on how the caller splits rows
 * over threads or how many vectors it passes together. */
#ifndef OBC_QUANT_DOT_H
#define OBC_QUANT_DOT_H

#include <stddef.h>
#include <stdint.h>

/* y[b * y_stride + r] = dot(row r of W, x + b * cols) for r in [0, n_rows),
 * b in [0, n_x). W: n_rows rows of `cols` elements of ggml type `type`, row r
 * at (const char *)w + r * row_bytes; cols is a multiple of the type's block
 * size (gguf_type_block_size); for an unsupported type or other cols, y is
 * NaN. Single-threaded: callers split the rows. */
typedef void (*QuantDotFn)(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                           size_t n_rows, const float *x /* (n_x, cols) */, size_t n_x,
                           float *y /* (n_x, y_stride) */, size_t y_stride);

/* The kernels, in the order of the instruction sets they need: the portable
 * twin (plain C), AVX2 + FMA + F16C, and AVX-512 F, BW, DQ and VL with FMA and
 * F16C (a processor with AVX-512 also runs AVX2). */
typedef enum {
  QUANT_SIMD_PORTABLE,
  QUANT_SIMD_AVX2,
  QUANT_SIMD_AVX512,
  QUANT_SIMD_COUNT
} QuantSimd;

/* The kernel quant_dot_rows uses, chosen once per process at first use: the
 * widest this processor runs (CPUID), or the one OBC_SIMD=portable|avx2|avx512
 * asks for. A request the processor cannot run gives the widest it runs below
 * the request, and an unknown value the default, each with a one-line note on
 * stderr. dequant_gguf runs AVX2 under both the avx2 and avx512 kernels. */
QuantSimd quant_dot_simd(void);

/* Name of a kernel: "portable", "avx2" or "avx512" (OBC_SIMD's values). */
const char *quant_dot_simd_name(QuantSimd simd);

/* Name of the kernel quant_dot_rows uses: quant_dot_simd_name(quant_dot_simd()). */
const char *quant_dot_kernel_name(void);

/* The kernel of a level, or NULL when this processor cannot run it: for the
 * tests and benchmarks that compare them. */
QuantDotFn quant_dot_kernel(QuantSimd simd);

/* The chosen kernel (quant_dot_simd) on these arguments. */
void quant_dot_rows(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                    const float *x, size_t n_x, float *y, size_t y_stride);

/* The portable twin: dequantise a block, multiply, add, in plain C. */
void quant_dot_rows_portable(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                             size_t n_rows, const float *x, size_t n_x, float *y, size_t y_stride);

/* The AVX2 + FMA + F16C kernel (formats/quant_dot_avx2.c). Call it only when
 * quant_dot_avx2_supported() is 1; off x86 it is the portable twin. */
void quant_dot_rows_avx2(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                         const float *x, size_t n_x, float *y, size_t y_stride);

/* The AVX-512 kernel (formats/quant_dot_avx512.c). Call it only when
 * quant_dot_avx512_supported() is 1; off x86 it is the portable twin. */
void quant_dot_rows_avx512(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                           size_t n_rows, const float *x, size_t n_x, float *y, size_t y_stride);

/* 1 when the processor and the OS run AVX2, FMA and F16C code, else 0. */
int quant_dot_avx2_supported(void);

/* 1 when they run AVX-512 F, BW, DQ and VL code besides AVX2, FMA and F16C
 * (the OS saves the 512-bit registers), else 0. */
int quant_dot_avx512_supported(void);

#endif
