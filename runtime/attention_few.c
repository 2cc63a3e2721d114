/* The portable twins of runtime/attention_few.h and the choice of kernel. */
#include "runtime/attention_few.h"

#include <math.h>

#include "formats/quant_dot.h"

void attention_few_scores_portable(const float *q, size_t ldq, const float *k, size_t hd, size_t m,
                                   size_t kn, float scale, float *scores) {
  for (size_t t = 0; t < kn; t++)
    for (size_t i = 0; i < m; i++) {
      float lane[8] = {0};
      for (size_t d = 0; d < hd; d++)
        lane[d % 8] = fmaf(k[t * hd + d], q[i * ldq + d], lane[d % 8]);
      float sum =
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      scores[i * kn + t] = scale * sum;
    }
}

void attention_few_values_portable(const float *p, const float *v, size_t hd, size_t m, size_t kn,
                                   float beta, float *o, size_t ldo) {
  for (size_t i = 0; i < m; i++)
    for (size_t c = 0; c < hd; c++) {
      float sum = 0.0f;
      for (size_t t = 0; t < kn; t++) sum = fmaf(p[i * kn + t], v[t * hd + c], sum);
      o[i * ldo + c] = beta == 0.0f ? sum : sum + beta * o[i * ldo + c];
    }
}

int attention_few_avx2_runs(size_t hd) {
  return hd % 8 == 0 && quant_dot_simd() >= QUANT_SIMD_AVX2;
}
