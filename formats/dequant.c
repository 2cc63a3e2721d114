/* Dequantisation of ggml tensor blocks to fp32 (dequant_gguf, formats/gguf.h).
 *
 * One function per block format, each decoding one block in plain C: the
 * portable twin of the AVX2 decoders (formats/dequant_avx2.c), which give the
 * same bits (formats/quant_avx2.h says why). The driver checks the request
 * and runs one of the two over the blocks, with OpenMP when the tensor is
 * large. The layouts are ggml's: a 32-element block holds f16 scale(s),
 * optional high bits and packed 4/8-bit quants, low nibbles first (elements
 * 0-15) then high nibbles (16-31); the 256-element "K" super-blocks add 6-bit
 * sub-block scales. */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/obc_error.h"
#include "formats/float16.h"
#include "formats/gguf.h"
#include "formats/gguf_internal.h"
#include "formats/quant_dot.h"

enum { QK = 32, QK_K = 256, K_SCALE_BYTES = 12 };

static void block_f32(const uint8_t *b, float *y) { memcpy(y, b, sizeof *y); }
static void block_f16(const uint8_t *b, float *y) { *y = float16_f16_to_f32(float16_read_u16(b)); }
static void block_bf16(const uint8_t *b, float *y) {
  *y = float16_bf16_to_f32(float16_read_u16(b));
}

/* Q8_0: f16 d, int8 q[32]; x = d * q. */
static void block_q8_0(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  const int8_t *q = (const int8_t *)(b + 2);
  for (int j = 0; j < QK; j++) y[j] = d * (float)q[j];
}

/* Q4_0: f16 d, 16 bytes of nibbles; x = d * (q - 8). */
static void block_q4_0(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  const uint8_t *qs = b + 2;
  for (int j = 0; j < QK / 2; j++) {
    y[j] = d * (float)((qs[j] & 0x0f) - 8);
    y[j + QK / 2] = d * (float)((qs[j] >> 4) - 8);
  }
}

/* Q4_1: f16 d, f16 m, 16 bytes of nibbles; x = d * q + m. */
static void block_q4_1(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  float m = float16_f16_to_f32(float16_read_u16(b + 2));
  const uint8_t *qs = b + 4;
  for (int j = 0; j < QK / 2; j++) {
    y[j] = d * (float)(qs[j] & 0x0f) + m;
    y[j + QK / 2] = d * (float)(qs[j] >> 4) + m;
  }
}

/* 5-bit quant j of a Q5 block: low nibble from qs, bit 4 from bit j of qh. */
static int q5_value(const uint8_t *qs, uint32_t qh, int j) {
  int low = j < QK / 2 ? (qs[j] & 0x0f) : (qs[j - QK / 2] >> 4);
  return low | (int)(((qh >> j) & 1u) << 4);
}

/* Q5_0: f16 d, uint32 qh, 16 bytes of nibbles; x = d * (q - 16). */
static void block_q5_0(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
  for (int j = 0; j < QK; j++) y[j] = d * (float)(q5_value(b + 6, qh, j) - 16);
}

/* Q5_1: f16 d, f16 m, uint32 qh, 16 bytes of nibbles; x = d * q + m. */
static void block_q5_1(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  float m = float16_f16_to_f32(float16_read_u16(b + 2));
  uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
  for (int j = 0; j < QK; j++) y[j] = d * (float)q5_value(b + 8, qh, j) + m;
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block:
 * bytes 0-3 hold scales 0-3 (low 6 bits), bytes 4-7 mins 0-3; scales/mins 4-7
 * take their low 4 bits from bytes 8-11 and their top 2 bits from the top bits
 * of bytes 0-3 / 4-7. */
static void k_scale_min(const uint8_t *scales, int j, int *scale, int *min) {
  if (j < 4) {
    *scale = scales[j] & 0x3f;
    *min = scales[j + 4] & 0x3f;
  } else {
    *scale = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *min = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

/* Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Each 32-byte
 * chunk c holds sub-block 2c in its low nibbles and 2c+1 in its high ones;
 * x = d * scale * q - dmin * min. */
static void block_q4_k(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  float dmin = float16_f16_to_f32(float16_read_u16(b + 2));
  const uint8_t *scales = b + 4, *qs = b + 4 + K_SCALE_BYTES;
  for (int sub = 0; sub < QK_K / QK; sub++) {
    int scale, min;
    k_scale_min(scales, sub, &scale, &min);
    float ds = d * (float)scale, dm = dmin * (float)min;
    const uint8_t *chunk = qs + (sub / 2) * QK;
    int shift = (sub % 2) * 4;
    for (int l = 0; l < QK; l++) y[sub * QK + l] = ds * (float)((chunk[l] >> shift) & 0x0f) - dm;
  }
}

/* Q5_K: as Q4_K with 32 bytes qh before the nibbles: bit `sub` of qh[l] is
 * bit 4 of element l of sub-block sub. */
static void block_q5_k(const uint8_t *b, float *y) {
  float d = float16_f16_to_f32(float16_read_u16(b));
  float dmin = float16_f16_to_f32(float16_read_u16(b + 2));
  const uint8_t *scales = b + 4, *qh = b + 4 + K_SCALE_BYTES, *qs = qh + QK_K / 8;
  for (int sub = 0; sub < QK_K / QK; sub++) {
    int scale, min;
    k_scale_min(scales, sub, &scale, &min);
    float ds = d * (float)scale, dm = dmin * (float)min;
    const uint8_t *chunk = qs + (sub / 2) * QK;
    int shift = (sub % 2) * 4;
    for (int l = 0; l < QK; l++) {
      int q = ((chunk[l] >> shift) & 0x0f) | (((qh[l] >> sub) & 1) << 4);
      y[sub * QK + l] = ds * (float)q - dm;
    }
  }
}

/* Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], f16 d.
 * The block is two halves of 128 elements; in half h, group g (0..3) of 32
 * elements takes nibble g/2 of ql[64h + 32(g%2) + l] and bits 2g..2g+1 of
 * qh[32h + l]; x = d * scale[element / 16] * (q - 32). */
static void block_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + QK_K / 2;
  const int8_t *scales = (const int8_t *)(b + QK_K / 2 + QK_K / 4);
  float d = float16_f16_to_f32(float16_read_u16(b + QK_K / 2 + QK_K / 4 + QK_K / 16));
  for (int half = 0; half < 2; half++) {
    for (int g = 0; g < 4; g++) {
      const uint8_t *low = ql + 64 * half + 32 * (g % 2);
      int low_shift = (g / 2) * 4, high_shift = 2 * g;
      for (int l = 0; l < QK; l++) {
        int q = ((low[l] >> low_shift) & 0x0f) | (((qh[32 * half + l] >> high_shift) & 3) << 4);
        int e = half * 128 + g * QK + l;
        y[e] = d * (float)scales[e / 16] * (float)(q - 32);
      }
    }
  }
}

typedef void (*BlockDecoder)(const uint8_t *block, float *out);

static BlockDecoder block_decoder(uint32_t type) {
  switch (type) {
    case GGML_TYPE_F32: return block_f32;
    case GGML_TYPE_F16: return block_f16;
    case GGML_TYPE_BF16: return block_bf16;
    case GGML_TYPE_Q8_0: return block_q8_0;
    case GGML_TYPE_Q4_0: return block_q4_0;
    case GGML_TYPE_Q4_1: return block_q4_1;
    case GGML_TYPE_Q5_0: return block_q5_0;
    case GGML_TYPE_Q5_1: return block_q5_1;
    case GGML_TYPE_Q4_K: return block_q4_k;
    case GGML_TYPE_Q5_K: return block_q5_k;
    case GGML_TYPE_Q6_K: return block_q6_k;
    default: return NULL;
  }
}

void dequant_span_portable(uint32_t type, const uint8_t *blocks, float *out, size_t n_blocks) {
  BlockDecoder decode = block_decoder(type);
  size_t block_size = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  for (size_t i = 0; i < n_blocks; i++) decode(blocks + i * block_bytes, out + i * block_size);
}

/* Elements per OpenMP work item of a large tensor: a multiple of every block
 * size (1, 32, 256). */
enum { SPAN_ELEMENTS = 16384 };

typedef void (*DequantSpan)(uint32_t type, const uint8_t *blocks, float *out, size_t n_blocks);

/* dequant_gguf with the span decoder `span`. */
static int dequant_with(DequantSpan span, uint32_t type, const void *data, float *out, size_t n) {
  if (!block_decoder(type))
    return obc_fail(OBC_EUNSUPPORTED,
                    "unsupported ggml type %" PRIu32
                    " (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
                    type);
  size_t block_size = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  if (n % block_size)
    return obc_fail(OBC_EINVAL, "%zu elements of type %s: not a multiple of its block of %zu", n,
                    gguf_type_name(type), block_size);
  if (type == GGML_TYPE_F32) {
    memcpy(out, data, n * sizeof *out);
    return OBC_OK;
  }
  const uint8_t *bytes = data;
  size_t n_blocks = n / block_size;
  /* Blocks are independent; threads only pay off past ~1M elements. Below
   * that, no OpenMP region at all: entering even an inactive one costs more
   * than decoding a block (the portable quant_dot twin calls this per block,
   * prefill per tile of weight rows). */
  if (n < (1u << 20)) {
    span(type, bytes, out, n_blocks);
    return OBC_OK;
  }
  size_t per_span = SPAN_ELEMENTS / block_size;
  long n_spans = (long)((n_blocks + per_span - 1) / per_span);
#pragma omp parallel for schedule(static)
  for (long s = 0; s < n_spans; s++) {
    size_t first = (size_t)s * per_span;
    size_t count = n_blocks - first < per_span ? n_blocks - first : per_span;
    span(type, bytes + first * block_bytes, out + first * block_size, count);
  }
  return OBC_OK;
}

int dequant_gguf_portable(uint32_t type, const void *data, float *out, size_t n) {
  return dequant_with(dequant_span_portable, type, data, out, n);
}

int dequant_gguf_avx2(uint32_t type, const void *data, float *out, size_t n) {
  return dequant_with(dequant_span_avx2, type, data, out, n);
}

int dequant_gguf(uint32_t type, const void *data, float *out, size_t n) {
  return dequant_with(
      quant_dot_simd() >= QUANT_SIMD_AVX2 ? dequant_span_avx2 : dequant_span_portable, type, data,
      out, n);
}
