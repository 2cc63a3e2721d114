/* AVX-512 kernels of the quantised dot products (formats/quant_dot.h), for
 * processors with AVX-512 F, BW, DQ and VL besides FMA and F16C. Only this
 * file is compiled with those instruction sets (CMakeLists.txt); quant_dot.c
 * calls it only when CPUID reports them.
 *
 * Each block's weights are rebuilt in registers of 16 consecutive elements,
 * bit-identical to dequant_gguf's: the same exact products as the AVX2
 * decoders of formats/quant_avx2.h (which says why they are exact, and whose
 * scale helpers this file shares), on 16 lanes. Each register is decoded once
 * and multiplied into the accumulator of every vector of the pass with one
 * FMA. Order of the additions: a (row, vector) pair owns one 16-lane
 * accumulator; lane l sums elements l, l + 16, l + 32, ... of the row in
 * element order, for every type (a float row's tail of fewer than 16
 * elements in its place, the other lanes untouched), and a fixed tree adds
 * the lanes at the end (lane_sum). Rows and vectors are interleaved only to
 * hide the FMA latency and to share the decoding, which changes no pair's
 * operations (docs/SCIENCE.md, "Quantised weights"). */
#include "formats/quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "common/obc_startup.h"
#include "formats/gguf.h"
#include "formats/quant_avx2.h"

#define QD_INLINE OBC_QUANT_INLINE

/* MAX_X: vectors per pass (runtime/cpu_ops.c passes up to 16, in two
 * passes): passes of 16 ran 20 % slower than two of 8 (bench_quant_dot,
 * n_x = 16), as the compiler kept the 16 vector pointers on the stack and
 * reloaded one for every FMA. PREFETCH_WEIGHTS: how far ahead of the
 * weights being decoded a pass asks for the next ones, as in
 * formats/quant_dot_avx2.c. */
enum { MAX_X = 8, PREFETCH_WEIGHTS = 4096 };

/* Every kernel below adds w * x[b][0..16) into acc[b] for the nx vectors of
 * a pass; x points at the element, successive vectors are `cols` apart. */
typedef void (*BlockKernel)(const uint8_t *block, const float *x, size_t cols, int nx, __m512 *acc);

QD_INLINE void fma_vectors(__m512 w, const float *x, size_t cols, int nx, __m512 *acc) {
  for (int b = 0; b < nx; b++)
    acc[b] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + (size_t)b * cols), acc[b]);
}

/* ---- decoders: register k holds elements 16k..16k+15 of a block ----------- */

/* The 16 bytes at p zero- or sign-extended to 32-bit lanes. */
QD_INLINE __m512i u8_lanes(const uint8_t *p) { return _mm512_cvtepu8_epi32(quant_load16(p)); }
QD_INLINE __m512i i8_lanes(const uint8_t *p) { return _mm512_cvtepi8_epi32(quant_load16(p)); }

/* Lane j of v in every lane. */
QD_INLINE __m512 lane16(__m512 v, int j) { return _mm512_permutexvar_ps(_mm512_set1_epi32(j), v); }

/* The f16 at p, and the f16 pair at p, broadcast. */
QD_INLINE __m512 f16_broadcast(const uint8_t *p) { return _mm512_set1_ps(quant_f16_at(p)); }
QD_INLINE void f16_pair16(const uint8_t *p, __m512 *first, __m512 *second) {
  __m128 both = quant_f16_pair_ps(p);
  *first = _mm512_broadcastss_ps(both);
  *second = _mm512_broadcastss_ps(_mm_movehdup_ps(both));
}

/* The 4-bit quants of elements 16k..16k+15 (k = 0, 1) of the 16 nibble
 * bytes at p: element e (< 16) is the low nibble of byte e, e + 16 its high. */
QD_INLINE __m512i nibbles16(const uint8_t *p, int k) {
  __m512i v = u8_lanes(p);
  return k ? _mm512_srli_epi32(v, 4) : _mm512_and_si512(v, _mm512_set1_epi32(0x0f));
}

/* q + 16 in the lanes whose bit of `bits` is set (bit 4 of a five-bit quant). */
QD_INLINE __m512i add_bit4(__m512i q, __mmask16 bits) {
  return _mm512_mask_or_epi32(q, bits, q, _mm512_set1_epi32(0x10));
}

QD_INLINE __m512 scaled16(__m512i q, __m512 d) { return _mm512_mul_ps(d, _mm512_cvtepi32_ps(q)); }
QD_INLINE __m512 affine16(__m512i q, __m512 d, __m512 m) {
  return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(q), m);
}

/* Q8_0: f16 d, int8 q[32]; w = d * q. */
QD_INLINE __m512 q8_0(const uint8_t *b, int k) {
  return scaled16(i8_lanes(b + 2 + 16 * k), f16_broadcast(b));
}

/* Q4_0 and Q4_1 by table: a block's 16 possible weights, d * (q - 8) or
 * d * q + m for q = 0..15, each formed once as the per-element code would
 * (the same exact product, the same single rounding of + m), then picked by
 * the quants (vpermps reads the low 4 bits of each lane: the low nibble of a
 * byte as it is, the high one shifted down). Registers 0 and 1 are elements
 * 0-15 (low nibbles of the 16 bytes at b + 2 or b + 4) and 16-31 (high). */
QD_INLINE __m512 iota16(void) {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

QD_INLINE __m512 q4_0_table(const uint8_t *b) {
  return _mm512_mul_ps(f16_broadcast(b), _mm512_sub_ps(iota16(), _mm512_set1_ps(8.0f)));
}

QD_INLINE __m512 q4_1_table(const uint8_t *b) {
  __m512 d, m;
  f16_pair16(b, &d, &m);
  return _mm512_fmadd_ps(d, iota16(), m);
}

QD_INLINE __m512 table_pick(__m512 table, __m512i bytes, int k) {
  return _mm512_permutexvar_ps(k ? _mm512_srli_epi32(bytes, 4) : bytes, table);
}

/* Q5_0: f16 d, uint32 qh (bit e: bit 4 of element e), 16 nibble bytes;
 * w = d * (q - 16). */
QD_INLINE __m512 q5_0(const uint8_t *b, int k) {
  uint32_t qh;
  memcpy(&qh, b + 2, sizeof qh);
  __m512i q = add_bit4(nibbles16(b + 6, k), (__mmask16)(qh >> 16 * k));
  return scaled16(_mm512_sub_epi32(q, _mm512_set1_epi32(16)), f16_broadcast(b));
}

/* Q5_1: f16 d, f16 m, uint32 qh, 16 nibble bytes; w = d * q + m. */
QD_INLINE __m512 q5_1(const uint8_t *b, int k) {
  __m512 d, m;
  f16_pair16(b, &d, &m);
  uint32_t qh;
  memcpy(&qh, b + 4, sizeof qh);
  return affine16(add_bit4(nibbles16(b + 8, k), (__mmask16)(qh >> 16 * k)), d, m);
}

/* Q4_K and Q5_K: ds[sub] = d * scale[sub] in lanes 0-7 and -(dmin * min[sub])
 * in lanes 8-15 (formats/quant_avx2.h, quant_k_factors). */
QD_INLINE __m512 k_factors16(const uint8_t *b) {
  __m256 ds, neg_dm;
  quant_k_factors(b, &ds, &neg_dm);
  return _mm512_insertf32x8(_mm512_castps256_ps512(ds), neg_dm, 1);
}

/* The 4-bit quants of elements 32 sub + 16 h + 0..15 of a Q4_K/Q5_K block
 * whose nibbles start at p: 32-byte chunk sub / 2 holds sub-block sub in its
 * low nibbles when sub is even, in its high ones when odd. */
QD_INLINE __m512i k_nibbles16(const uint8_t *p, int sub, int h) {
  __m512i v = u8_lanes(p + 32 * (sub / 2) + 16 * h);
  return sub % 2 ? _mm512_srli_epi32(v, 4) : _mm512_and_si512(v, _mm512_set1_epi32(0x0f));
}

/* Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes;
 * w = ds[sub] * q - dm[sub]. */
QD_INLINE __m512 q4_k(const uint8_t *b, __m512 factors, int sub, int h) {
  return affine16(k_nibbles16(b + 16, sub, h), lane16(factors, sub), lane16(factors, 8 + sub));
}

/* Q5_K: as Q4_K with 32 bytes qh before the nibbles: bit `sub` of qh[l] is
 * bit 4 of element l of sub-block sub. */
QD_INLINE __m512 q5_k(const uint8_t *b, __m512 factors, int sub, int h) {
  __mmask16 bits =
      _mm_test_epi8_mask(quant_load16(b + 16 + 16 * h), _mm_set1_epi8((char)(1 << sub)));
  __m512i q = add_bit4(k_nibbles16(b + 48, sub, h), bits);
  return affine16(q, lane16(factors, sub), lane16(factors, 8 + sub));
}

/* Q6_K: ql[128], qh[64], int8 scales[16], f16 d; dsc: d * scale[j] in lane
 * j (exact products). Element e = 128 half + 32 g + 16 h + l takes nibble
 * g / 2 of ql[64 half + 32 (g % 2) + 16 h + l] and bits 2g, 2g + 1 of
 * qh[32 half + 16 h + l]; w = dsc[e / 16] * (q - 32). */
QD_INLINE __m512 q6_k_scales(const uint8_t *b) {
  return _mm512_mul_ps(f16_broadcast(b + 208), _mm512_cvtepi32_ps(i8_lanes(b + 192)));
}

QD_INLINE __m512 q6_k(const uint8_t *b, __m512 dsc, int half, int g, int h) {
  __m512i low = u8_lanes(b + 64 * half + 32 * (g % 2) + 16 * h);
  __m512i high = u8_lanes(b + 128 + 32 * half + 16 * h);
  __m512i mask4 = _mm512_set1_epi32(0x0f), mask2 = _mm512_set1_epi32(0x30);
  __m512i nibble = g / 2 ? _mm512_srli_epi32(low, 4) : _mm512_and_si512(low, mask4);
  /* bits 2g, 2g + 1 moved to bits 4, 5 */
  __m512i top = g < 2 ? _mm512_slli_epi32(high, 4 - 2 * g) : _mm512_srli_epi32(high, 2 * g - 4);
  __m512i q = _mm512_or_si512(nibble, _mm512_and_si512(top, mask2));
  return scaled16(_mm512_sub_epi32(q, _mm512_set1_epi32(32)), lane16(dsc, 8 * half + 2 * g + h));
}

/* ---- the float types: a "block" of 16 elements ----------------------------- */

QD_INLINE void unit_f32(const uint8_t *b, const float *x, size_t cols, int nx, __m512 *acc) {
  fma_vectors(_mm512_loadu_ps((const float *)b), x, cols, nx, acc);
}

QD_INLINE __m512 bf16_to_ps(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

QD_INLINE void unit_f16(const uint8_t *b, const float *x, size_t cols, int nx, __m512 *acc) {
  fma_vectors(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b)), x, cols, nx, acc);
}

QD_INLINE void unit_bf16(const uint8_t *b, const float *x, size_t cols, int nx, __m512 *acc) {
  fma_vectors(bf16_to_ps(_mm256_loadu_si256((const __m256i *)b)), x, cols, nx, acc);
}

/* The last `tail` (< 16) elements of a float-type row, from `start`: masked
 * loads (the masked-off bytes are never read) and masked FMAs, which leave
 * the other lanes as they are. */
static void float_tail(uint32_t type, const uint8_t *row, size_t start, size_t tail, const float *x,
                       size_t cols, int nx, __m512 *acc) {
  __mmask16 live = (__mmask16)((1u << tail) - 1);
  __m512 w;
  if (type == GGML_TYPE_F32) {
    w = _mm512_maskz_loadu_ps(live, row + 4 * start);
  } else {
    __m256i halves = _mm256_maskz_loadu_epi16(live, row + 2 * start);
    w = type == GGML_TYPE_F16 ? _mm512_cvtph_ps(halves) : bf16_to_ps(halves);
  }
  for (int b = 0; b < nx; b++)
    acc[b] = _mm512_mask3_fmadd_ps(w, _mm512_maskz_loadu_ps(live, x + (size_t)b * cols + start),
                                   acc[b], live);
}

/* ---- the blocks: each register built just before its FMAs ------------------ */

/* The loops over a block's registers are unrolled so that their indices are
 * constants: the decoders' selections then fold away and the compiler shares
 * their common work (the scales, the bytes two registers take nibbles of). */

#define QD_BLOCK32(NAME)                                                             \
  QD_INLINE void block_##NAME(const uint8_t *b, const float *x, size_t cols, int nx, \
                              __m512 *acc) {                                         \
    _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++)                              \
        fma_vectors(NAME(b, k), x + 16 * k, cols, nx, acc);                          \
  }
QD_BLOCK32(q8_0)
QD_BLOCK32(q5_0)
QD_BLOCK32(q5_1)

#define QD_BLOCK_TABLE4(NAME, QS)                                                    \
  QD_INLINE void block_##NAME(const uint8_t *b, const float *x, size_t cols, int nx, \
                              __m512 *acc) {                                         \
    __m512 table = NAME##_table(b);                                                  \
    __m512i bytes = u8_lanes(b + QS);                                                \
    _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++)                              \
        fma_vectors(table_pick(table, bytes, k), x + 16 * k, cols, nx, acc);         \
  }
QD_BLOCK_TABLE4(q4_0, 2)
QD_BLOCK_TABLE4(q4_1, 4)

QD_INLINE void block_q4_k(const uint8_t *b, const float *x, size_t cols, int nx, __m512 *acc) {
  __m512 factors = k_factors16(b);
#pragma GCC unroll 8
  for (int sub = 0; sub < 8; sub++)
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
      fma_vectors(q4_k(b, factors, sub, h), x + 32 * sub + 16 * h, cols, nx, acc);
}

QD_INLINE void block_q5_k(const uint8_t *b, const float *x, size_t cols, int nx, __m512 *acc) {
  __m512 factors = k_factors16(b);
#pragma GCC unroll 8
  for (int sub = 0; sub < 8; sub++)
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
      fma_vectors(q5_k(b, factors, sub, h), x + 32 * sub + 16 * h, cols, nx, acc);
}

QD_INLINE void block_q6_k(const uint8_t *b, const float *x, size_t cols, int nx, __m512 *acc) {
  __m512 dsc = q6_k_scales(b);
#pragma GCC unroll 2
  for (int half = 0; half < 2; half++)
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++)
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++)
        fma_vectors(q6_k(b, dsc, half, g, h), x + 128 * half + 32 * g + 16 * h, cols, nx, acc);
}

/* ---- the row driver ------------------------------------------------------------ */

/* The lanes of v added by a fixed tree: lane l + lane l + 8, then l + 4,
 * l + 2, l + 1. */
QD_INLINE float lane_sum(__m512 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

typedef __m512 QdVec;
QD_INLINE QdVec qd_zero(void) { return _mm512_setzero_ps(); }
/* Rows a pass for nx vectors: 4 for 1-4, 2 for 5-8 (enough independent FMA
 * chains, at most 16 accumulators, and each load of x serves several rows). */
#define QD_ROWS(NX) ((NX) <= 4 ? 4 : 2)
enum { QD_FLOAT_UNIT = 16 };
#include "formats/quant_dot_rows.h"

void quant_dot_rows_avx512(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                           size_t n_rows, const float *x, size_t n_x, float *y, size_t y_stride) {
  qd_rows(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}

int quant_dot_avx512_supported(void) {
  ObcCpuFeatures f; /* os_zmm: the OS saves the AVX-512 registers (XGETBV) */
  obc_cpu_features(&f);
  return quant_dot_avx2_supported() && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl &&
         f.os_zmm;
}

#else /* not x86: no AVX-512 kernel; quant_dot_rows never chooses it */

void quant_dot_rows_avx512(uint32_t type, const void *w, size_t row_bytes, size_t cols,
                           size_t n_rows, const float *x, size_t n_x, float *y, size_t y_stride) {
  quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
}

int quant_dot_avx512_supported(void) { return 0; }

#endif
