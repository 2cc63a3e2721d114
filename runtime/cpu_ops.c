/* Element-wise kernels of the CPU forward pass. Each is a loop over rows (or
 * elements) split over OpenMP threads; sums are accumulated in double so that
 * the result does not depend on the thread count. */
#include "runtime/cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/obc_cli.h"

/* Below this many elements a kernel runs on one thread: waking the team costs
 * more than the work (one decode token). */
enum { PARALLEL_MIN = 1 << 15 };

void cpu_rmsnorm(float *out, const float *x, const float *weight, size_t n, size_t dim,
                 double eps) {
#pragma omp parallel for schedule(static) if (n * dim >= PARALLEL_MIN)
  for (size_t t = 0; t < n; t++) {
    const float *row = x + t * dim;
    double sum = 0.0;
    for (size_t i = 0; i < dim; i++) sum += (double)row[i] * row[i];
    float scale = (float)(1.0 / sqrt(sum / (double)dim + eps));
    float *dst = out + t * dim;
    for (size_t i = 0; i < dim; i++) dst[i] = row[i] * scale * weight[i];
  }
}

void cpu_rope(float *x, size_t n, size_t n_heads, size_t head_dim, size_t pos0,
              const float *cos_table, const float *sin_table, int interleaved) {
  size_t half = head_dim / 2;
#pragma omp parallel for schedule(static) if (n * n_heads * head_dim >= PARALLEL_MIN)
  for (size_t t = 0; t < n; t++) {
    const float *c = cos_table + (pos0 + t) * half;
    const float *s = sin_table + (pos0 + t) * half;
    for (size_t h = 0; h < n_heads; h++) {
      float *head = x + (t * n_heads + h) * head_dim;
      for (size_t i = 0; i < half; i++) {
        size_t a = interleaved ? 2 * i : i;
        size_t b = interleaved ? 2 * i + 1 : i + half;
        float x0 = head[a], x1 = head[b];
        head[a] = x0 * c[i] - x1 * s[i];
        head[b] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

void cpu_swiglu(float *gate, const float *up, size_t count) {
#pragma omp parallel for schedule(static) if (count >= PARALLEL_MIN)
  for (size_t i = 0; i < count; i++) {
    float g = gate[i];
    gate[i] = g / (1.0f + cpu_expf(-g)) * up[i];
  }
}

void cpu_embed(float *out, const float *table, const int32_t *tokens, size_t n, size_t dim) {
  for (size_t t = 0; t < n; t++)
    memcpy(out + t * dim, table + (size_t)tokens[t] * dim, dim * sizeof(float));
}

void cpu_add_bias(float *rows, const float *bias, size_t n, size_t width) {
#pragma omp parallel for schedule(static) if (n * width >= PARALLEL_MIN)
  for (size_t t = 0; t < n; t++)
    for (size_t i = 0; i < width; i++) rows[t * width + i] += bias[i];
}

void cpu_gemm_weight(float *c, const float *a, const float *w, size_t n, size_t in, size_t out,
                     float beta, double *seconds) {
  double start = obc_now_seconds();
  if (n == 1) /* one decode token: a matrix-vector product */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)out, (int)in, 1.0f, w, (int)in, a, 1, beta, c, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)out, (int)in, 1.0f, a,
                (int)in, w, (int)in, beta, c, (int)out);
  *seconds += obc_now_seconds() - start;
}
