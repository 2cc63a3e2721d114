/* AVX2 + FMA + F16C kernels of the quantised dot products (formats/quant_dot.h).
 * Only this file is compiled with those instruction sets (CMakeLists.txt);
 * quant_dot.c calls it only when CPUID reports them.
 *
 * Each block decoder rebuilds the block's weights in registers bit-identical
 * to dequant_gguf's (formats/dequant.c): the same fp32 products, with d * q + m
 * fused into one FMA where d * q is exact (affine16); each register of 8
 * weights is decoded once and multiplied into the accumulator of every vector
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

#define QD_INLINE static inline __attribute__((always_inline))

/* MAX_X: vectors per pass. PREFETCH_BYTES: how far ahead of the weights being
 * decoded a pass asks for the next ones (2 KiB last 200 ns at 10 GB/s, more
 * than a memory latency; with the hardware prefetcher alone decode streamed
 * at about half the rate it reaches in cache, bench/bench_quant_dot.c). */
enum { MAX_X = 8, PREFETCH_BYTES = 2048 };

/* Every kernel below adds w * x[b][0..8) into acc[b] for the nx vectors of a
 * pass; x points at the element, successive vectors are `cols` apart. */
typedef void (*BlockKernel)(const uint8_t *block, const float *x, size_t cols, int nx, __m256 *acc);

QD_INLINE void fma_vectors(__m256 w, const float *x, size_t cols, int nx, __m256 *acc) {
  for (int b = 0; b < nx; b++)
    acc[b] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + (size_t)b * cols), acc[b]);
}

QD_INLINE float f16_at(const uint8_t *p) { return _cvtsh_ss(float16_read_u16(p)); }

/* The f16 pair at p (d and m or dmin), converted together, broadcast. */
QD_INLINE void f16_pair(const uint8_t *p, __m256 *first, __m256 *second) {
  int32_t bits;
  memcpy(&bits, p, sizeof bits);
  __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
  *first = _mm256_broadcastss_ps(both);
  *second = _mm256_broadcastss_ps(_mm_movehdup_ps(both));
}

/* The low 8 signed bytes of v as 8 floats; the high 8 bytes. */
QD_INLINE __m256 i8_low_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
QD_INLINE __m256 i8_high_ps(__m128i v) { return i8_low_ps(_mm_unpackhi_epi64(v, v)); }

/* Elements x[0..16) with weights d * q, q the 16 signed bytes of v. */
QD_INLINE void scaled16(__m128i q, __m256 d, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(_mm256_mul_ps(d, i8_low_ps(q)), x, cols, nx, acc);
  fma_vectors(_mm256_mul_ps(d, i8_high_ps(q)), x + 8, cols, nx, acc);
}

/* Elements x[0..16) with weights d * q + m (m = -dm for the K types: a - b is
 * a + (-b) exactly). dequant_gguf rounds d * q, then the sum; one FMA gives
 * the same bits because d * q is exact in fp32: d has at most 17 significant
 * bits (an f16's 11, times a 6-bit K scale) and q < 32 adds 5. */
QD_INLINE void affine16(__m128i q, __m256 d, __m256 m, const float *x, size_t cols, int nx,
                        __m256 *acc) {
  fma_vectors(_mm256_fmadd_ps(d, i8_low_ps(q), m), x, cols, nx, acc);
  fma_vectors(_mm256_fmadd_ps(d, i8_high_ps(q), m), x + 8, cols, nx, acc);
}

QD_INLINE __m128i load16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }

/* ---- the float types: a "block" of 8 elements ---------------------------- */

QD_INLINE void unit_f32(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(_mm256_loadu_ps((const float *)b), x, cols, nx, acc);
}

QD_INLINE void unit_f16(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(_mm256_cvtph_ps(load16(b)), x, cols, nx, acc);
}

QD_INLINE void unit_bf16(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256i bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(load16(b)), 16);
  fma_vectors(_mm256_castsi256_ps(bits), x, cols, nx, acc);
}

/* ---- 32-element blocks ----------------------------------------------------- */

/* Q8_0: f16 d, int8 q[32]; w = d * q. */
QD_INLINE void block_q8_0(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 d = _mm256_set1_ps(f16_at(b));
  scaled16(load16(b + 2), d, x, cols, nx, acc);
  scaled16(load16(b + 18), d, x + 16, cols, nx, acc);
}

/* The 16 nibble bytes at p spread to 32-bit lanes: lo holds bytes 0-7 (one
 * per lane), hi bytes 8-15; a lane's low nibble is (lane & 15), its high
 * nibble (lane >> 4). */
QD_INLINE void nibble_lanes(const uint8_t *p, __m256i *lo, __m256i *hi) {
  __m256i v = _mm256_broadcastsi128_si256(load16(p));
  const char z = (char)0x80; /* pshufb: zero this byte */
  *lo = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, z, z, z, 1, z, z, z, 2, z, z, z, 3, z, z, z, 4,
                                                z, z, z, 5, z, z, z, 6, z, z, z, 7, z, z, z));
  *hi =
      _mm256_shuffle_epi8(v, _mm256_setr_epi8(8, z, z, z, 9, z, z, z, 10, z, z, z, 11, z, z, z, 12,
                                              z, z, z, 13, z, z, z, 14, z, z, z, 15, z, z, z));
}

/* Elements x[0..8) with weights d * q, q in 32-bit lanes. */
QD_INLINE void scaled8(__m256i q, __m256 d, const float *x, size_t cols, int nx, __m256 *acc) {
  fma_vectors(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), x, cols, nx, acc);
}

/* Elements x[0..8) with weights d * q + m, q in 32-bit lanes. */
QD_INLINE void affine8(__m256i q, __m256 d, __m256 m, const float *x, size_t cols, int nx,
                       __m256 *acc) {
  fma_vectors(_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), m), x, cols, nx, acc);
}

/* Q4_0: f16 d, 16 bytes of nibbles; w = d * (q - 8). */
QD_INLINE void block_q4_0(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 d = _mm256_set1_ps(f16_at(b));
  __m256i lo, hi, mask = _mm256_set1_epi32(0x0f), eight = _mm256_set1_epi32(8);
  nibble_lanes(b + 2, &lo, &hi);
  scaled8(_mm256_sub_epi32(_mm256_and_si256(lo, mask), eight), d, x, cols, nx, acc);
  scaled8(_mm256_sub_epi32(_mm256_and_si256(hi, mask), eight), d, x + 8, cols, nx, acc);
  scaled8(_mm256_sub_epi32(_mm256_srli_epi32(lo, 4), eight), d, x + 16, cols, nx, acc);
  scaled8(_mm256_sub_epi32(_mm256_srli_epi32(hi, 4), eight), d, x + 24, cols, nx, acc);
}

/* Q4_1: f16 d, f16 m, 16 bytes of nibbles; w = d * q + m. */
QD_INLINE void block_q4_1(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 d, m;
  f16_pair(b, &d, &m);
  __m256i lo, hi, mask = _mm256_set1_epi32(0x0f);
  nibble_lanes(b + 4, &lo, &hi);
  affine8(_mm256_and_si256(lo, mask), d, m, x, cols, nx, acc);
  affine8(_mm256_and_si256(hi, mask), d, m, x + 8, cols, nx, acc);
  affine8(_mm256_srli_epi32(lo, 4), d, m, x + 16, cols, nx, acc);
  affine8(_mm256_srli_epi32(hi, 4), d, m, x + 24, cols, nx, acc);
}

/* The 32 five-bit quants of a Q5_0/Q5_1 block as bytes 0-31 of a register:
 * element e (0-15) is the low nibble of qs[e], element e + 16 its high
 * nibble, and bit e of qh is bit 4 of element e. */
QD_INLINE __m256i q5_bytes(uint32_t qh, const uint8_t *qs) {
  __m256i v = _mm256_broadcastsi128_si256(load16(qs));
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

/* Q5_0: f16 d, uint32 qh, 16 bytes of nibbles; w = d * (q - 16). */
QD_INLINE void block_q5_0(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 d = _mm256_set1_ps(f16_at(b));
  uint32_t qh;
  memcpy(&qh, b + 2, sizeof qh);
  __m256i q = _mm256_sub_epi8(q5_bytes(qh, b + 6), _mm256_set1_epi8(16));
  scaled16(_mm256_castsi256_si128(q), d, x, cols, nx, acc);
  scaled16(_mm256_extracti128_si256(q, 1), d, x + 16, cols, nx, acc);
}

/* Q5_1: f16 d, f16 m, uint32 qh, 16 bytes of nibbles; w = d * q + m. */
QD_INLINE void block_q5_1(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 d, m;
  f16_pair(b, &d, &m);
  uint32_t qh;
  memcpy(&qh, b + 4, sizeof qh);
  __m256i q = q5_bytes(qh, b + 8);
  affine16(_mm256_castsi256_si128(q), d, m, x, cols, nx, acc);
  affine16(_mm256_extracti128_si256(q, 1), d, m, x + 16, cols, nx, acc);
}

/* ---- 256-element K super-blocks ------------------------------------------- */

/* The 8 scales and 8 mins of a Q4_K/Q5_K super-block as bytes 0-7 and 8-15,
 * unpacked as formats/dequant.c does: bytes 0-3 hold scales 0-3 (low 6 bits),
 * bytes 4-7 mins 0-3; scales/mins 4-7 take their low 4 bits from bytes 8-11
 * and their top 2 bits from the top bits of bytes 0-3 / 4-7. */
QD_INLINE __m128i k_scales_mins(const uint8_t *scales) {
  uint32_t a[3], out[4];
  memcpy(a, scales, sizeof a);
  out[0] = a[0] & 0x3f3f3f3f;                                            /* scales 0-3 */
  out[1] = (a[2] & 0x0f0f0f0f) | ((a[0] >> 6) & 0x03030303) << 4;        /* scales 4-7 */
  out[2] = a[1] & 0x3f3f3f3f;                                            /* mins 0-3 */
  out[3] = ((a[2] >> 4) & 0x0f0f0f0f) | ((a[1] >> 6) & 0x03030303) << 4; /* mins 4-7 */
  return _mm_loadu_si128((const __m128i *)out);
}

/* d * scale[j] and -(dmin * min[j]) for the 8 sub-blocks j, as dequant_gguf
 * rounds them (one fp32 product each; negation is exact). */
QD_INLINE void k_factors(const uint8_t *b, __m256 *ds, __m256 *neg_dm) {
  __m128i sm = k_scales_mins(b + 4);
  __m256 d, dmin;
  f16_pair(b, &d, &dmin);
  *ds = _mm256_mul_ps(d, i8_low_ps(sm)); /* values < 64: signed = unsigned */
  *neg_dm = _mm256_xor_ps(_mm256_mul_ps(dmin, i8_high_ps(sm)), _mm256_set1_ps(-0.0f));
}

QD_INLINE __m256 lane(__m256 v, int j) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j)); }

/* Sub-block `sub` (32 quants in lo, hi) of a Q4_K/Q5_K super-block:
 * w = ds[sub] * q - dm[sub]. */
QD_INLINE void k_sub(__m256 ds, __m256 neg_dm, int sub, __m128i lo, __m128i hi, const float *x,
                     size_t cols, int nx, __m256 *acc) {
  __m256 d = lane(ds, sub), m = lane(neg_dm, sub);
  affine16(lo, d, m, x, cols, nx, acc);
  affine16(hi, d, m, x + 16, cols, nx, acc);
}

/* Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles; 32-byte chunk
 * c holds sub-block 2c in its low nibbles and 2c + 1 in its high ones. */
QD_INLINE void block_q4_k(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 ds, neg_dm;
  k_factors(b, &ds, &neg_dm);
  const uint8_t *qs = b + 16;
  __m256i mask = _mm256_set1_epi32(0x0f);
  for (int c = 0; c < 4; c++) {
    __m256 d0 = lane(ds, 2 * c), m0 = lane(neg_dm, 2 * c);
    __m256 d1 = lane(ds, 2 * c + 1), m1 = lane(neg_dm, 2 * c + 1);
    for (int h = 0; h < 2; h++) {
      __m256i l0, l1;
      nibble_lanes(qs + 32 * c + 16 * h, &l0, &l1);
      const float *xc = x + 64 * c + 16 * h;
      affine8(_mm256_and_si256(l0, mask), d0, m0, xc, cols, nx, acc);
      affine8(_mm256_and_si256(l1, mask), d0, m0, xc + 8, cols, nx, acc);
      affine8(_mm256_srli_epi32(l0, 4), d1, m1, xc + 32, cols, nx, acc);
      affine8(_mm256_srli_epi32(l1, 4), d1, m1, xc + 40, cols, nx, acc);
    }
  }
}

/* 0x10 in byte l where bit `bit` of byte l of h is set (Q5_K high bits). */
QD_INLINE __m256i bit4_of_bytes32(__m256i h, int bit) {
  __m256i select = _mm256_set1_epi8((char)(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, select), select),
                          _mm256_set1_epi8(0x10));
}

/* Q5_K: as Q4_K with 32 bytes qh before the nibbles: bit `sub` of qh[l] is bit
 * 4 of element l of sub-block sub. */
QD_INLINE void block_q5_k(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  __m256 ds, neg_dm;
  k_factors(b, &ds, &neg_dm);
  const uint8_t *qs = b + 48;
  __m256i h = _mm256_loadu_si256((const __m256i *)(b + 16)), mask = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; c++) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
    __m256i lo = _mm256_or_si256(_mm256_and_si256(v, mask), bit4_of_bytes32(h, 2 * c));
    __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), mask),
                                 bit4_of_bytes32(h, 2 * c + 1));
    const float *xc = x + 64 * c;
    k_sub(ds, neg_dm, 2 * c, _mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1), xc, cols,
          nx, acc);
    k_sub(ds, neg_dm, 2 * c + 1, _mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1),
          xc + 32, cols, nx, acc);
  }
}

/* The 32 quants (q - 32, as signed bytes) of a Q6_K group: nibble from low
 * (shifted by low_shift), 2 high bits from high (bits high_shift, +1). */
QD_INLINE __m256i q6_quants(__m256i low, int low_shift, __m256i high, int high_shift) {
  __m256i nibble = _mm256_and_si256(_mm256_srli_epi16(low, low_shift), _mm256_set1_epi8(0x0f));
  __m256i top = _mm256_and_si256(_mm256_srli_epi16(high, high_shift), _mm256_set1_epi8(3));
  __m256i q = _mm256_or_si256(nibble, _mm256_slli_epi16(top, 4)); /* top < 4: no carry */
  return _mm256_sub_epi8(q, _mm256_set1_epi8(32));
}

/* Q6_K: ql[128], qh[64], int8 scales[16], f16 d; half h, group g of 32
 * elements takes nibble g/2 of ql[64h + 32(g%2) + l] and bits 2g, 2g+1 of
 * qh[32h + l]; w = (d * scale[element / 16]) * (q - 32). */
QD_INLINE void block_q6_k(const uint8_t *b, const float *x, size_t cols, int nx, __m256 *acc) {
  const uint8_t *ql = b, *qh = b + 128;
  __m128i sc = load16(b + 192); /* int8 scales */
  __m256 d = _mm256_set1_ps(f16_at(b + 208));
  __m256 dsc[2] = {_mm256_mul_ps(d, i8_low_ps(sc)), _mm256_mul_ps(d, i8_high_ps(sc))};
  for (int half = 0; half < 2; half++) {
    __m256i h = _mm256_loadu_si256((const __m256i *)(qh + 32 * half));
    for (int g = 0; g < 4; g++) {
      __m256i low = _mm256_loadu_si256((const __m256i *)(ql + 64 * half + 32 * (g % 2)));
      __m256i q = q6_quants(low, 4 * (g / 2), h, 2 * g);
      int e = 128 * half + 32 * g, k = e / 16; /* scale index of x[e..e+16) */
      __m256 d0 = lane(dsc[k / 8], k % 8), d1 = lane(dsc[k / 8], k % 8 + 1);
      scaled16(_mm256_castsi256_si128(q), d0, x + e, cols, nx, acc);
      scaled16(_mm256_extracti128_si256(q, 1), d1, x + e + 16, cols, nx, acc);
    }
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

/* How a type's rows are cut for the kernels: `unit` elements of `unit_bytes`
 * each (a block; 8 elements for the float types), and the float types' tail. */
typedef struct {
  uint32_t type;
  size_t unit, unit_bytes, units, tail, cols, row_bytes;
} QdShape;

/* R rows (R * nx accumulators, at most 8 live registers) from w, nx vectors
 * from x, results into y[b * y_stride + r]. */
QD_INLINE void rows_pass(BlockKernel kernel, const QdShape *s, const uint8_t *w, const float *x,
                         int R, int nx, float *y, size_t y_stride) {
  __m256 acc[4][MAX_X];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < nx; b++) acc[r][b] = _mm256_setzero_ps();
  /* The R rows lie back to back and are read at one pace, so the pass streams
   * through memory; the prefetch keeps PREFETCH_BYTES ahead of that stream
   * (past the matrix's end it is a hint that never faults). */
  for (size_t u = 0; u < s->units; u++)
    for (int r = 0; r < R; r++) {
      const uint8_t *unit = w + r * s->row_bytes + u * s->unit_bytes;
      uintptr_t ahead = (uintptr_t)w + (u * R + r) * s->unit_bytes + PREFETCH_BYTES;
      _mm_prefetch((const char *)ahead, _MM_HINT_T0);
      kernel(unit, x + u * s->unit, s->cols, nx, acc[r]);
    }
  if (s->tail)
    for (int r = 0; r < R; r++)
      float_tail(s->type, w + r * s->row_bytes, s->units * s->unit, s->tail, x, s->cols, nx,
                 acc[r]);
  for (int r = 0; r < R; r++)
    for (int b = 0; b < nx; b++) y[(size_t)b * y_stride + r] = lane_sum(acc[r][b]);
}

#define QD_PASS(R, NX) rows_pass(kernel, s, w + r * s->row_bytes, x, R, NX, y + r, y_stride)

/* n_rows rows against nx (1..8) vectors: 4 rows at a time for 1-2 vectors and
 * 2 for 3-4 (enough independent FMA chains), then row by row. */
QD_INLINE void rows_group(BlockKernel kernel, const QdShape *s, const uint8_t *w, size_t n_rows,
                          const float *x, int nx, float *y, size_t y_stride) {
  size_t r = 0;
  switch (nx) {
    case 1:
      for (; r + 4 <= n_rows; r += 4) QD_PASS(4, 1);
      break;
    case 2:
      for (; r + 4 <= n_rows; r += 4) QD_PASS(4, 2);
      break;
    case 3:
      for (; r + 2 <= n_rows; r += 2) QD_PASS(2, 3);
      break;
    case 4:
      for (; r + 2 <= n_rows; r += 2) QD_PASS(2, 4);
      break;
    default: break;
  }
  for (; r < n_rows; r++) {
    switch (nx) {
      case 1: QD_PASS(1, 1); break;
      case 2: QD_PASS(1, 2); break;
      case 3: QD_PASS(1, 3); break;
      case 4: QD_PASS(1, 4); break;
      case 5: QD_PASS(1, 5); break;
      case 6: QD_PASS(1, 6); break;
      case 7: QD_PASS(1, 7); break;
      default: QD_PASS(1, 8); break;
    }
  }
}

QD_INLINE void rows_all(BlockKernel kernel, const QdShape *s, const uint8_t *w, size_t n_rows,
                        const float *x, size_t n_x, float *y, size_t y_stride) {
  for (size_t b = 0; b < n_x; b += MAX_X) {
    int nx = n_x - b < MAX_X ? (int)(n_x - b) : MAX_X;
    rows_group(kernel, s, w, n_rows, x + b * s->cols, nx, y + b * y_stride, y_stride);
  }
}

void quant_dot_rows_avx2(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                         const float *x, size_t n_x, float *y, size_t y_stride) {
  QdShape s = {.type = type, .cols = cols, .row_bytes = row_bytes};
  size_t element_bytes = type == GGML_TYPE_F32 ? 4 : 2;
  int is_float = type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
  s.unit = is_float ? 8 : gguf_type_block_size(type);
  s.unit_bytes = is_float ? 8 * element_bytes : gguf_type_block_bytes(type);
  if (!s.unit || (!is_float && cols % s.unit)) { /* the twin writes NaN */
    quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
    return;
  }
  s.units = cols / s.unit;
  s.tail = cols % s.unit;
  const uint8_t *bytes = w;
  switch (type) {
    case GGML_TYPE_F32: rows_all(unit_f32, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_F16: rows_all(unit_f16, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_BF16: rows_all(unit_bf16, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q8_0: rows_all(block_q8_0, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q4_0: rows_all(block_q4_0, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q4_1: rows_all(block_q4_1, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q5_0: rows_all(block_q5_0, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q5_1: rows_all(block_q5_1, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q4_K: rows_all(block_q4_k, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q5_K: rows_all(block_q5_k, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q6_K: rows_all(block_q6_k, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    default: quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
  }
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
