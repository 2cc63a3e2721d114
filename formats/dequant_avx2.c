/* AVX2 + FMA + F16C twin of the portable block loop of dequant_gguf
 * (formats/dequant.c): what prefill runs on every tile of weight rows before
 * its sgemm (runtime/cpu_ops.c), and loading with --weights f32 on every
 * matrix. The weights come from the in-register decoders that the dot
 * products use too (formats/quant_avx2.h), 8 at a time, and are stored in
 * element order; they are the portable code's bits (that header says why;
 * tests/test_dequant.c checks it). Only this file and quant_dot_avx2.c are
 * compiled with those instruction sets (CMakeLists.txt); dequant.c calls it
 * only where CPUID reports them. */
#include "formats/gguf_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <stdint.h>

#include "formats/float16.h"
#include "formats/gguf.h"
#include "formats/quant_avx2.h"

/* One block at b into y[0 .. block size). Registers are built (in loops
 * unrolled so that their indices are constants, formats/quant_avx2.h) four
 * at a time before any is stored: y is a float pointer that a compiler must assume
 * may overlap the block's bytes, so a store between two registers would make
 * it load and decode the shared bytes again. */
typedef void (*DequantBlock)(const uint8_t *b, float *y);

/* y[8k .. 8k + 8) = w[k] for k < 4. */
OBC_QUANT_INLINE void store4(float *y, const __m256 w[4]) {
  for (int k = 0; k < 4; k++) _mm256_storeu_ps(y + 8 * k, w[k]);
}

#define DQ_BLOCK32(NAME)                                                           \
  OBC_QUANT_INLINE void block_##NAME(const uint8_t *b, float *y) {                 \
    __m256 w[4];                                                                   \
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) w[k] = quant_##NAME(b, k); \
    store4(y, w);                                                                  \
  }
DQ_BLOCK32(q8_0)
DQ_BLOCK32(q4_0)
DQ_BLOCK32(q4_1)
DQ_BLOCK32(q5_0)
DQ_BLOCK32(q5_1)

OBC_QUANT_INLINE void block_q4_k(const uint8_t *b, float *y) {
  __m256 ds, neg_dm, d[2], m[2], w[4];
  quant_k_factors(b, &ds, &neg_dm);
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    quant_q4_k_chunk(ds, neg_dm, c, d, m);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) w[k] = quant_q4_k(b, d, m, c, h, k);
      for (int k = 0; k < 4; k++)
        _mm256_storeu_ps(y + 64 * c + 16 * h + quant_q4_k_offset(k), w[k]);
    }
  }
}

OBC_QUANT_INLINE void block_q5_k(const uint8_t *b, float *y) {
  __m256 ds, neg_dm, w[4];
  quant_k_factors(b, &ds, &neg_dm);
#pragma GCC unroll 8
  for (int sub = 0; sub < 8; sub++) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) w[k] = quant_q5_k(b, ds, neg_dm, sub, k);
    store4(y + 32 * sub, w);
  }
}

OBC_QUANT_INLINE void block_q6_k(const uint8_t *b, float *y) {
  __m256 dsc[2], d[2], w[4];
  quant_q6_k_scales(b, dsc);
  for (int half = 0; half < 2; half++)
    for (int g = 0; g < 4; g++) {
      __m256i q = quant_q6_k_quants(b, half, g);
      quant_q6_k_group_scales(dsc, half, g, d);
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) w[k] = quant_q6_k(q, d, k);
      store4(y + 128 * half + 32 * g, w);
    }
}

/* n_blocks blocks of block_bytes bytes each, block_size elements out; the
 * decoder is a constant at every call, so it is inlined into the loop. */
OBC_QUANT_INLINE void run_blocks(DequantBlock block, const uint8_t *in, size_t block_bytes,
                                 size_t block_size, float *out, size_t n_blocks) {
  for (size_t i = 0; i < n_blocks; i++) block(in + i * block_bytes, out + i * block_size);
}

/* F16 or BF16: 8 elements per register, the last n % 8 by the portable
 * conversions (exact, as F16C's is). */
static void floats16(uint32_t type, const uint8_t *in, float *out, size_t n) {
  size_t i = 0;
  if (type == GGML_TYPE_F16)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, quant_f16x8(in + 2 * i));
  else
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, quant_bf16x8(in + 2 * i));
  for (; i < n; i++) {
    uint16_t h = float16_read_u16(in + 2 * i);
    out[i] = type == GGML_TYPE_F16 ? float16_f16_to_f32(h) : float16_bf16_to_f32(h);
  }
}

void dequant_span_avx2(uint32_t type, const uint8_t *blocks, float *out, size_t n_blocks) {
  size_t bytes = gguf_type_block_bytes(type), size = gguf_type_block_size(type);
  switch (type) {
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16: floats16(type, blocks, out, n_blocks); break;
    case GGML_TYPE_Q8_0: run_blocks(block_q8_0, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q4_0: run_blocks(block_q4_0, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q4_1: run_blocks(block_q4_1, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q5_0: run_blocks(block_q5_0, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q5_1: run_blocks(block_q5_1, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q4_K: run_blocks(block_q4_k, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q5_K: run_blocks(block_q5_k, blocks, bytes, size, out, n_blocks); break;
    case GGML_TYPE_Q6_K: run_blocks(block_q6_k, blocks, bytes, size, out, n_blocks); break;
    default: dequant_span_portable(type, blocks, out, n_blocks); /* F32: a copy */
  }
}

#else /* not x86: no AVX2 decoders; dequant_gguf never chooses them */

void dequant_span_avx2(uint32_t type, const uint8_t *blocks, float *out, size_t n_blocks) {
  dequant_span_portable(type, blocks, out, n_blocks);
}

#endif
