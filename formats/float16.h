/* Conversions from the 16-bit float formats of model files to fp32.
 *
 * IEEE half precision (F16: 1 sign, 5 exponent, 10 mantissa bits) is the scale
 * type of every ggml quantisation block and a safetensors dtype; bfloat16 is the
 * top half of an fp32. Plain bit manipulation, exact for every input (subnormals,
 * infinities and NaN included), so no compiler support for _Float16 is needed. */
#ifndef OBC_FLOAT16_H
#define OBC_FLOAT16_H

#include <stdint.h>
#include <string.h>

/* Model files are little-endian and are read in place. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "obcache reads GGUF and safetensors in place and needs a little-endian host"
#endif

static inline float float16_f32_from_bits(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static inline float float16_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) /* infinity or NaN: keep the payload */
    return float16_f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return float16_f32_from_bits(sign); /* signed zero */
    /* subnormal: mantissa * 2^-24, exact in fp32 */
    float magnitude = (float)mantissa * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return float16_f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

static inline float float16_bf16_to_f32(uint16_t b) {
  return float16_f32_from_bits((uint32_t)b << 16);
}

/* Reads a little-endian uint16 from unaligned memory. */
static inline uint16_t float16_read_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

#endif
