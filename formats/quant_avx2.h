/* In-register decoders of ggml blocks for AVX2 + FMA + F16C: each returns one
 * __m256 register of 8 consecutive fp32 weights of a block (register k), the
 * bits of the portable block decoders of formats/dequant.c (docs/SCIENCE.md,
 * "Quantised weights"). Callers ask for a block's registers in a row, in
 * loops unrolled so that k is a constant: the selections on k then fold away
 * and the compiler computes what the registers share once. Shared by the dot
 * products (formats/quant_dot_avx2.c) and the tile dequantiser
 * (formats/dequant_avx2.c), the only files compiled with those instruction
 * sets (CMakeLists.txt), and by the AVX-512 dot products
 * (formats/quant_dot_avx512.c) for its scalar and scale helpers; include it
 * nowhere else, and call what they build only where CPUID reports AVX2, FMA
 * and F16C (quant_dot_avx2_supported).
 *
 * Why the bits agree with formats/dequant.c: every product below (d * q,
 * d * scale, (d * scale) * q) is exact in fp32, since an f16 scale has 11
 * significant bits, a sub-block scale adds at most 7 and a quant at most 5
 * (at most 23 <= 24 bits; no overflow, and no result below 2^-24 but zero).
 * So the only rounding is that of the final `+ m` (the _1 and K types), which
 * the FMA d * q + m and the portable fl(fl(d * q) + m) both do once on the
 * same exact values; likewise a - b is a + (-b) exactly. The result does not
 * depend on whether a compiler contracts the portable expression into an FMA
 * (GCC does not under -std=c11, whose default is -ffp-contract=off; clang's
 * default `on` may), nor on the order of the exact products. Only NaN
 * payloads may differ (a signalling NaN f16 converts quieted by F16C and
 * bit-exact by the portable code; two NaNs added keep either operand's). */
#ifndef OBC_QUANT_AVX2_H
#define OBC_QUANT_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "formats/float16.h"

#define OBC_QUANT_INLINE static inline __attribute__((always_inline))

OBC_QUANT_INLINE float quant_f16_at(const uint8_t *p) { return _cvtsh_ss(float16_read_u16(p)); }

/* The f16 pair at p (d and m or dmin) converted together: lanes 0 and 1. */
OBC_QUANT_INLINE __m128 quant_f16_pair_ps(const uint8_t *p) {
  int32_t bits;
  memcpy(&bits, p, sizeof bits);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
}

/* The f16 pair at p, each broadcast. */
OBC_QUANT_INLINE void quant_f16_pair(const uint8_t *p, __m256 *first, __m256 *second) {
  __m128 both = quant_f16_pair_ps(p);
  *first = _mm256_broadcastss_ps(both);
  *second = _mm256_broadcastss_ps(_mm_movehdup_ps(both));
}

OBC_QUANT_INLINE __m128i quant_load16(const uint8_t *p) {
  return _mm_loadu_si128((const __m128i *)p);
}

/* The low 8 signed bytes of v as 8 floats; the high 8 bytes. */
OBC_QUANT_INLINE __m256 quant_i8_low_ps(__m128i v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}
OBC_QUANT_INLINE __m256 quant_i8_high_ps(__m128i v) {
  return quant_i8_low_ps(_mm_unpackhi_epi64(v, v));
}

/* ---- the float types: 8 elements ------------------------------------------- */

OBC_QUANT_INLINE __m256 quant_f16x8(const uint8_t *b) { return _mm256_cvtph_ps(quant_load16(b)); }

OBC_QUANT_INLINE __m256 quant_bf16x8(const uint8_t *b) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(quant_load16(b)), 16));
}

/* ---- 32-element blocks: quant_TYPE(b, k) is elements 8k..8k+7 (k = 0..3) -- */

/* Q8_0: f16 d, int8 q[32]; w = d * q. */
OBC_QUANT_INLINE __m256 quant_q8_0(const uint8_t *b, int k) {
  __m128i q = quant_load16(b + 2 + 16 * (k / 2));
  return _mm256_mul_ps(_mm256_set1_ps(quant_f16_at(b)),
                       k % 2 ? quant_i8_high_ps(q) : quant_i8_low_ps(q));
}

/* The 16 nibble bytes at p spread to 32-bit lanes: lo holds bytes 0-7 (one
 * per lane), hi bytes 8-15; a lane's low nibble is (lane & 15), its high
 * nibble (lane >> 4). */
OBC_QUANT_INLINE void quant_nibble_lanes(const uint8_t *p, __m256i *lo, __m256i *hi) {
  __m256i v = _mm256_broadcastsi128_si256(quant_load16(p));
  const char z = (char)0x80; /* pshufb: zero this byte */
  *lo = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, z, z, z, 1, z, z, z, 2, z, z, z, 3, z, z, z, 4,
                                                z, z, z, 5, z, z, z, 6, z, z, z, 7, z, z, z));
  *hi =
      _mm256_shuffle_epi8(v, _mm256_setr_epi8(8, z, z, z, 9, z, z, z, 10, z, z, z, 11, z, z, z, 12,
                                              z, z, z, 13, z, z, z, 14, z, z, z, 15, z, z, z));
}

/* d * q and d * q + m for q in 32-bit lanes. The FMA (m = -dm for the K
 * types) rounds as the portable fl(fl(d * q) + m) does, since d * q is exact
 * (see the top of this file). */
OBC_QUANT_INLINE __m256 quant_scaled8(__m256i q, __m256 d) {
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(q));
}
OBC_QUANT_INLINE __m256 quant_affine8(__m256i q, __m256 d, __m256 m) {
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), m);
}

/* The 4-bit quants of elements 8k..8k+7 from the 16 nibble bytes at p, in
 * 32-bit lanes: the low nibbles of bytes 0-7 and 8-15, then their high ones. */
OBC_QUANT_INLINE __m256i quant_nibbles8(const uint8_t *p, int k) {
  __m256i lo, hi;
  quant_nibble_lanes(p, &lo, &hi);
  __m256i v = k % 2 ? hi : lo;
  return k / 2 ? _mm256_srli_epi32(v, 4) : _mm256_and_si256(v, _mm256_set1_epi32(0x0f));
}

/* Q4_0: f16 d, 16 bytes of nibbles (elements 0-15 low, 16-31 high);
 * w = d * (q - 8). */
OBC_QUANT_INLINE __m256 quant_q4_0(const uint8_t *b, int k) {
  __m256i q = _mm256_sub_epi32(quant_nibbles8(b + 2, k), _mm256_set1_epi32(8));
  return quant_scaled8(q, _mm256_set1_ps(quant_f16_at(b)));
}

/* Q4_1: f16 d, f16 m, 16 bytes of nibbles; w = d * q + m. */
OBC_QUANT_INLINE __m256 quant_q4_1(const uint8_t *b, int k) {
  __m256 d, m;
  quant_f16_pair(b, &d, &m);
  return quant_affine8(quant_nibbles8(b + 4, k), d, m);
}

/* The 32 five-bit quants of a Q5_0/Q5_1 block as bytes 0-31 of a register:
 * element e (0-15) is the low nibble of qs[e], element e + 16 its high
 * nibble, and bit e of qh is bit 4 of element e. */
OBC_QUANT_INLINE __m256i quant_q5_bytes(uint32_t qh, const uint8_t *qs) {
  __m256i v = _mm256_broadcastsi128_si256(quant_load16(qs));
  __m256i nibbles = _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4)),
                                     _mm256_set1_epi8(0x0f)); /* high lane: high nibbles */
  __m256i bits = _mm256_shuffle_epi8(
      _mm256_set1_epi32((int)qh), /* byte e: byte e/8 of qh */
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  __m256i select = _mm256_set1_epi64x((long long)0x8040201008040201ull);
  __m256i top = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bits, select), select),
                                 _mm256_set1_epi8(0x10));
  return _mm256_or_si256(nibbles, top);
}

/* Bytes 8k..8k+7 of the 32 bytes q as 8 floats. */
OBC_QUANT_INLINE __m256 quant_i8_ps(__m256i q, int k) {
  __m128i half = k / 2 ? _mm256_extracti128_si256(q, 1) : _mm256_castsi256_si128(q);
  return k % 2 ? quant_i8_high_ps(half) : quant_i8_low_ps(half);
}

/* Q5_0: f16 d, uint32 qh, 16 bytes of nibbles; w = d * (q - 16). */
OBC_QUANT_INLINE __m256 quant_q5_0(const uint8_t *b, int k) {
  uint32_t qh;
  memcpy(&qh, b + 2, sizeof qh);
  __m256i q = _mm256_sub_epi8(quant_q5_bytes(qh, b + 6), _mm256_set1_epi8(16));
  return _mm256_mul_ps(_mm256_set1_ps(quant_f16_at(b)), quant_i8_ps(q, k));
}

/* Q5_1: f16 d, f16 m, uint32 qh, 16 bytes of nibbles; w = d * q + m. */
OBC_QUANT_INLINE __m256 quant_q5_1(const uint8_t *b, int k) {
  __m256 d, m;
  quant_f16_pair(b, &d, &m);
  uint32_t qh;
  memcpy(&qh, b + 4, sizeof qh);
  return _mm256_fmadd_ps(d, quant_i8_ps(quant_q5_bytes(qh, b + 8), k), m);
}

/* ---- 256-element K super-blocks --------------------------------------------- */

/* The 8 scales and 8 mins of a Q4_K/Q5_K super-block as bytes 0-7 and 8-15,
 * unpacked as formats/dequant.c does: bytes 0-3 hold scales 0-3 (low 6 bits),
 * bytes 4-7 mins 0-3; scales/mins 4-7 take their low 4 bits from bytes 8-11
 * and their top 2 bits from the top bits of bytes 0-3 / 4-7. */
OBC_QUANT_INLINE __m128i quant_k_scales_mins(const uint8_t *scales) {
  uint32_t a[3], out[4];
  memcpy(a, scales, sizeof a);
  out[0] = a[0] & 0x3f3f3f3f;                                            /* scales 0-3 */
  out[1] = (a[2] & 0x0f0f0f0f) | ((a[0] >> 6) & 0x03030303) << 4;        /* scales 4-7 */
  out[2] = a[1] & 0x3f3f3f3f;                                            /* mins 0-3 */
  out[3] = ((a[2] >> 4) & 0x0f0f0f0f) | ((a[1] >> 6) & 0x03030303) << 4; /* mins 4-7 */
  return _mm_loadu_si128((const __m128i *)out);
}

/* d * scale[j] and -(dmin * min[j]) for the 8 sub-blocks j of the Q4_K/Q5_K
 * super-block at b, as the portable code rounds them (one exact fp32 product
 * each; negation is exact). */
OBC_QUANT_INLINE void quant_k_factors(const uint8_t *b, __m256 *ds, __m256 *neg_dm) {
  __m128i sm = quant_k_scales_mins(b + 4);
  __m256 d, dmin;
  quant_f16_pair(b, &d, &dmin);
  *ds = _mm256_mul_ps(d, quant_i8_low_ps(sm)); /* values < 64: signed = unsigned */
  *neg_dm = _mm256_xor_ps(_mm256_mul_ps(dmin, quant_i8_high_ps(sm)), _mm256_set1_ps(-0.0f));
}

/* Lane j of v in every lane. */
OBC_QUANT_INLINE __m256 quant_lane(__m256 v, int j) {
  return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j));
}

/* Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles; 32-byte chunk
 * c holds sub-block 2c in its low nibbles and 2c + 1 in its high ones;
 * w = ds[sub] * q - dm[sub]. quant_q4_k_chunk: the chunk's factors, d[i] and
 * m[i] of sub-block 2c + i. quant_q4_k: register k (0..3) of half h (0, 1) of
 * chunk c, from its 16 bytes: elements 64c + 16h + quant_q4_k_offset(k) +
 * 0..7 (k = 0, 1: sub-block 2c; k = 2, 3: sub-block 2c + 1). */
OBC_QUANT_INLINE void quant_q4_k_chunk(__m256 ds, __m256 neg_dm, int c, __m256 d[2], __m256 m[2]) {
  for (int i = 0; i < 2; i++)
    d[i] = quant_lane(ds, 2 * c + i), m[i] = quant_lane(neg_dm, 2 * c + i);
}

OBC_QUANT_INLINE int quant_q4_k_offset(int k) { return 8 * (k % 2) + 32 * (k / 2); }

OBC_QUANT_INLINE __m256 quant_q4_k(const uint8_t *b, const __m256 d[2], const __m256 m[2], int c,
                                   int h, int k) {
  return quant_affine8(quant_nibbles8(b + 16 + 32 * c + 16 * h, k), d[k / 2], m[k / 2]);
}

/* 0x10 in byte l where bit `bit` of byte l of h is set (Q5_K high bits). */
OBC_QUANT_INLINE __m256i quant_bit4_of_bytes32(__m256i h, int bit) {
  __m256i select = _mm256_set1_epi8((char)(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, select), select),
                          _mm256_set1_epi8(0x10));
}

/* Q5_K: as Q4_K with 32 bytes qh before the nibbles: bit `sub` of qh[l] is
 * bit 4 of element l of sub-block sub. Register k (0..3) of sub-block sub:
 * elements 32 sub + 8k..8k+7. */
OBC_QUANT_INLINE __m256 quant_q5_k(const uint8_t *b, __m256 ds, __m256 neg_dm, int sub, int k) {
  __m256i h = _mm256_loadu_si256((const __m256i *)(b + 16)), mask = _mm256_set1_epi8(0x0f);
  __m256i v = _mm256_loadu_si256((const __m256i *)(b + 48 + 32 * (sub / 2)));
  __m256i nibbles = _mm256_and_si256(sub % 2 ? _mm256_srli_epi16(v, 4) : v, mask);
  __m256i q = _mm256_or_si256(nibbles, quant_bit4_of_bytes32(h, sub));
  return _mm256_fmadd_ps(quant_lane(ds, sub), quant_i8_ps(q, k), quant_lane(neg_dm, sub));
}

/* Q6_K: ql[128], qh[64], int8 scales[16], f16 d. dsc[0], dsc[1]: d * scale
 * for scales 0-7 and 8-15 (exact products). */
OBC_QUANT_INLINE void quant_q6_k_scales(const uint8_t *b, __m256 dsc[2]) {
  __m128i sc = quant_load16(b + 192); /* int8 scales */
  __m256 d = _mm256_set1_ps(quant_f16_at(b + 208));
  dsc[0] = _mm256_mul_ps(d, quant_i8_low_ps(sc));
  dsc[1] = _mm256_mul_ps(d, quant_i8_high_ps(sc));
}

/* Group g (0..3) of half `half` (0, 1) of a Q6_K block: the 32 elements
 * e = 128 half + 32 g + l take nibble g/2 of ql[64 half + 32 (g % 2) + l] and
 * bits 2g, 2g + 1 of qh[32 half + l]; w = (d * scale[e / 16]) * (q - 32).
 * quant_q6_k_quants: the group's q - 32 as 32 signed bytes; quant_q6_k:
 * register k (0..3) of the group, elements 128 half + 32 g + 8k..8k+7, from
 * those and the group's scales. */
OBC_QUANT_INLINE __m256i quant_q6_k_quants(const uint8_t *b, int half, int g) {
  __m256i low = _mm256_loadu_si256((const __m256i *)(b + 64 * half + 32 * (g % 2)));
  __m256i high = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * half));
  __m256i nibble = _mm256_and_si256(_mm256_srli_epi16(low, 4 * (g / 2)), _mm256_set1_epi8(0x0f));
  __m256i top = _mm256_and_si256(_mm256_srli_epi16(high, 2 * g), _mm256_set1_epi8(3));
  __m256i q = _mm256_or_si256(nibble, _mm256_slli_epi16(top, 4)); /* top < 4: no carry */
  return _mm256_sub_epi8(q, _mm256_set1_epi8(32));
}

/* The group's two scales: d * scale for its elements 0-15 (d[0]) and 16-31. */
OBC_QUANT_INLINE void quant_q6_k_group_scales(const __m256 dsc[2], int half, int g, __m256 d[2]) {
  int scale = 8 * half + 2 * g;
  d[0] = quant_lane(dsc[scale / 8], scale % 8);
  d[1] = quant_lane(dsc[scale / 8], scale % 8 + 1);
}

OBC_QUANT_INLINE __m256 quant_q6_k(__m256i q, const __m256 d[2], int k) {
  return _mm256_mul_ps(d[k / 2], quant_i8_ps(q, k));
}

#endif
