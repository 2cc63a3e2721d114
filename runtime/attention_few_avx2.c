/* AVX2 + FMA kernels of runtime/attention_few.h, the same operations in the
 * same order as their portable twins (runtime/attention_few.c). Only this
 * file is compiled with those instruction sets (CMakeLists.txt); it runs
 * only where attention_few_avx2_runs() says so. */
#include "runtime/attention_few.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>
#include <stdint.h>

/* How many key (value) rows ahead of the one being read the kernels ask for
 * theirs: the cache's rows come from memory in a decode step, read once.
 * Past the last row this is a hint that never faults. */
enum { PREFETCH_KEYS = 16 };

/* A hint for the line of base[i], which may lie past the array: the address
 * is formed as an integer, never as an out-of-bounds pointer. */
static inline void prefetch_row(const float *base, size_t i) {
  _mm_prefetch((const char *)((uintptr_t)base + i * sizeof(float)), _MM_HINT_T0);
}

/* ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) of one register. */
static inline float lane_sum(__m256 a) {
  __m128 h = _mm_hadd_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  h = _mm_hadd_ps(h, h); /* (l0 + l1) + (l2 + l3), (l4 + l5) + (l6 + l7) */
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* The lane sums of a[0..8) in lanes 0..7, each as lane_sum adds them: the
 * hadds pair lanes (0, 1), (2, 3) and then those pairs within each half;
 * the halves are added last. */
static inline __m256 lane_sums8(const __m256 a[8]) {
  __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                       _mm256_permute2f128_ps(h0123, h4567, 0x31));
}

void attention_few_scores_avx2(const float *q, size_t ldq, const float *k, size_t hd, size_t m,
                               size_t kn, float scale, float *scores) {
  __m256 s = _mm256_set1_ps(scale);
  size_t t = 0;
  for (; t + 8 <= kn; t += 8) { /* 8 keys at a time; their rows stay in L1 for the m rows */
    for (size_t c = 0; c < 8 * hd; c += 16) /* the rows PREFETCH_KEYS ahead */
      prefetch_row(k, (t + PREFETCH_KEYS) * hd + c);
    for (size_t i = 0; i < m; i++) {
      __m256 a[8];
      for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
      for (size_t d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + i * ldq + d);
        for (int j = 0; j < 8; j++)
          a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(k + (t + j) * hd + d), qv, a[j]);
      }
      _mm256_storeu_ps(scores + i * kn + t, _mm256_mul_ps(s, lane_sums8(a)));
    }
  }
  for (; t < kn; t++)
    for (size_t i = 0; i < m; i++) {
      __m256 a = _mm256_setzero_ps();
      for (size_t d = 0; d < hd; d += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(k + t * hd + d), _mm256_loadu_ps(q + i * ldq + d), a);
      scores[i * kn + t] = scale * lane_sum(a);
    }
}

/* Columns [c0, c0 + 8 * W) of every row: W registers per row, m * W
 * independent FMA chains over the keys. Inlined with m and W constant, so
 * that the accumulators stay in registers. */
static inline __attribute__((always_inline)) void values_columns(const float *p, const float *v,
                                                                 size_t hd, size_t m, size_t kn,
                                                                 float beta, float *o, size_t ldo,
                                                                 size_t c0, int W) {
  __m256 acc[ATTENTION_FEW_ROWS][2];
  for (size_t i = 0; i < m; i++)
    for (int w = 0; w < W; w++) acc[i][w] = _mm256_setzero_ps();
  for (size_t t = 0; t < kn; t++) {
    if (c0 == 0) /* the first pass brings the rows in for the others */
      for (size_t c = 0; c < hd; c += 16) prefetch_row(v, (t + PREFETCH_KEYS) * hd + c);
    __m256 vv[2];
    for (int w = 0; w < W; w++) vv[w] = _mm256_loadu_ps(v + t * hd + c0 + 8 * w);
    for (size_t i = 0; i < m; i++) {
      __m256 pt = _mm256_broadcast_ss(p + i * kn + t);
      for (int w = 0; w < W; w++) acc[i][w] = _mm256_fmadd_ps(pt, vv[w], acc[i][w]);
    }
  }
  __m256 b = _mm256_set1_ps(beta);
  for (size_t i = 0; i < m; i++)
    for (int w = 0; w < W; w++) {
      float *dst = o + i * ldo + c0 + 8 * w;
      __m256 r = acc[i][w];
      if (beta != 0.0f) r = _mm256_add_ps(r, _mm256_mul_ps(b, _mm256_loadu_ps(dst)));
      _mm256_storeu_ps(dst, r);
    }
}

/* Every column of m (constant) rows, 16 at a time. */
static inline __attribute__((always_inline)) void values_rows(const float *p, const float *v,
                                                              size_t hd, size_t m, size_t kn,
                                                              float beta, float *o, size_t ldo) {
  size_t c0 = 0;
  for (; c0 + 16 <= hd; c0 += 16) values_columns(p, v, hd, m, kn, beta, o, ldo, c0, 2);
  if (c0 < hd) values_columns(p, v, hd, m, kn, beta, o, ldo, c0, 1);
}

void attention_few_values_avx2(const float *p, const float *v, size_t hd, size_t m, size_t kn,
                               float beta, float *o, size_t ldo) {
  switch (m) {
    case 1: values_rows(p, v, hd, 1, kn, beta, o, ldo); break;
    case 2: values_rows(p, v, hd, 2, kn, beta, o, ldo); break;
    case 3: values_rows(p, v, hd, 3, kn, beta, o, ldo); break;
    default: values_rows(p, v, hd, 4, kn, beta, o, ldo); break;
  }
}

#else /* not x86: attention_few_avx2_runs() is 0 there, so these never run */

void attention_few_scores_avx2(const float *q, size_t ldq, const float *k, size_t hd, size_t m,
                               size_t kn, float scale, float *scores) {
  attention_few_scores_portable(q, ldq, k, hd, m, kn, scale, scores);
}

void attention_few_values_avx2(const float *p, const float *v, size_t hd, size_t m, size_t kn,
                               float beta, float *o, size_t ldo) {
  attention_few_values_portable(p, v, hd, m, kn, beta, o, ldo);
}

#endif
