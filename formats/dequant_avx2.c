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

/* y[0 .. 8n) = the n registers of w. */
OBC_QUANT_INLINE void store_weights(float *y, const __m256 *w, int n) {
  for (int k = 0; k < n; k++) _mm256_storeu_ps(y + 8 * k, w[k]);
}

/* One block at b into y[0 .. block size). */
typedef void (*DequantBlock)(const uint8_t *b, float *y);

#define DQ_BLOCK32(NAME)                                           \
  OBC_QUANT_INLINE void block_##NAME(const uint8_t *b, float *y) { \
    __m256 w[4];                                                   \
    quant_##NAME(b, w);                                            \
    store_weights(y, w, 4);                                        \
  }
DQ_BLOCK32(q8_0)
DQ_BLOCK32(q4_0)
DQ_BLOCK32(q4_1)
DQ_BLOCK32(q5_0)
DQ_BLOCK32(q5_1)

OBC_QUANT_INLINE void block_q4_k(const uint8_t *b, float *y) {
  __m256 ds, neg_dm, w[4];
  quant_k_factors(b, &ds, &neg_dm);
  for (int c = 0; c < 4; c++)
    for (int h = 0; h < 2; h++) {
      quant_q4_k_half(b, ds, neg_dm, c, h, w);
      store_weights(y + 64 * c + 16 * h, w, 2);
      store_weights(y + 64 * c + 32 + 16 * h, w + 2, 2);
    }
}

OBC_QUANT_INLINE void block_q5_k(const uint8_t *b, float *y) {
  __m256 ds, neg_dm, w[4];
  quant_k_factors(b, &ds, &neg_dm);
  for (int sub = 0; sub < 8; sub++) {
    quant_q5_k_sub(b, ds, neg_dm, sub, w);
    store_weights(y + 32 * sub, w, 4);
  }
}

OBC_QUANT_INLINE void block_q6_k(const uint8_t *b, float *y) {
  __m256 dsc[2], w[4];
  quant_q6_k_scales(b, dsc);
  for (int half = 0; half < 2; half++)
    for (int g = 0; g < 4; g++) {
      quant_q6_k_group(b, dsc, half, g, w);
      store_weights(y + 128 * half + 32 * g, w, 4);
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
