/* Causal GQA attention on the CPU. Work is split into (query head, block of
 * BLOCK queries) items over OpenMP threads; each item runs its two GEMMs
 * single-threaded (OpenBLAS does so inside a parallel region), so the result
 * of an item does not depend on which thread ran it or how many there are. */
#include "runtime/cpu_attention.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "runtime/cpu_ops.h"

enum { BLOCK = 64 };

/* Softmax of one row of scaled logits over its first n_valid entries (the
 * rest set to 0); returns lse. */
static float softmax_row(float *row, size_t n_valid, size_t n_total) {
  /* 16 lanes in a fixed order: vectorised, and the same for any thread count. */
  enum { LANES = 16 };
  float lane_max[LANES], lane_sum[LANES] = {0};
  for (size_t l = 0; l < LANES; l++) lane_max[l] = row[0];
  size_t body = n_valid / LANES * LANES;
  for (size_t j = 0; j < body; j += LANES)
    for (size_t l = 0; l < LANES; l++)
      lane_max[l] = row[j + l] > lane_max[l] ? row[j + l] : lane_max[l];
  float max = row[0];
  for (size_t l = 0; l < LANES; l++) max = lane_max[l] > max ? lane_max[l] : max;
  for (size_t j = body; j < n_valid; j++) max = row[j] > max ? row[j] : max;

  for (size_t j = 0; j < n_valid; j++) row[j] = cpu_expf(row[j] - max);
  for (size_t j = 0; j < body; j += LANES)
    for (size_t l = 0; l < LANES; l++) lane_sum[l] += row[j + l];
  float sum = 0.0f;
  for (size_t l = 0; l < LANES; l++) sum += lane_sum[l];
  for (size_t j = body; j < n_valid; j++) sum += row[j];

  float inv = 1.0f / sum;
  for (size_t j = 0; j < n_valid; j++) row[j] *= inv;
  if (n_total > n_valid) memset(row + n_valid, 0, (n_total - n_valid) * sizeof(float));
  return max + logf(sum);
}

int cpu_attention(const CpuAttentionShape *s, const float *q, const float *k, const float *v,
                  float *out, float *lse, const CpuAttentionRows *rows, double *gemm_seconds) {
  size_t q_dim = s->n_heads * s->head_dim;
  size_t group = s->n_heads / s->n_kv_heads;
  size_t n_blocks = (s->n + BLOCK - 1) / BLOCK;
  size_t n_items = s->n_heads * n_blocks;
  size_t max_keys = s->pos0 + s->n;
  size_t block_rows = s->n < BLOCK ? s->n : BLOCK; /* 1 for a decode step */
  float scale = (float)(1.0 / sqrt((double)s->head_dim));
  int n_threads = omp_get_max_threads();
  float *scores =
      obc_malloc((size_t)n_threads * block_rows * max_keys * sizeof(float), "attention scores");
  double *gemm_time = obc_calloc((size_t)n_threads, sizeof(double), "attention timers");
  if (!scores || !gemm_time) {
    free(scores);
    free(gemm_time);
    return OBC_ENOMEM;
  }

#pragma omp parallel for schedule(dynamic, 1)
  for (size_t item = 0; item < n_items; item++) {
    size_t h = item / n_blocks, b = item % n_blocks;
    size_t t0 = b * BLOCK;
    size_t nq = s->n - t0 < BLOCK ? s->n - t0 : BLOCK;
    size_t n_keys = s->pos0 + t0 + nq;
    const float *kh = k + (h / group) * s->kv_stride * s->head_dim;
    const float *vh = v + (h / group) * s->kv_stride * s->head_dim;
    int thread = omp_get_thread_num();
    float *sc = scores + (size_t)thread * block_rows * max_keys;
    double start = obc_now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)n_keys, (int)s->head_dim,
                scale, q + t0 * q_dim + h * s->head_dim, (int)q_dim, kh, (int)s->head_dim, 0.0f, sc,
                (int)n_keys);
    gemm_time[thread] += obc_now_seconds() - start;
    const unsigned char *evicted = s->evicted ? s->evicted + (h / group) * s->kv_stride : NULL;
    for (size_t r = 0; r < nq; r++) {
      float *row = sc + r * n_keys;
      size_t n_valid = s->pos0 + t0 + r + 1;
      if (evicted) /* dropped keys: out of the max and the sum, then exactly 0 */
        for (size_t p = 0; p < n_valid; p++)
          if (evicted[p]) row[p] = -INFINITY;
      lse[h * s->n + t0 + r] = softmax_row(row, n_valid, n_keys);
      if (evicted)
        for (size_t p = 0; p < n_valid; p++)
          if (evicted[p]) row[p] = 0.0f;
      int32_t captured = rows ? rows->row_of[t0 + r] : -1;
      if (captured >= 0) {
        float *dst = rows->attn + (h * rows->n_rows + (size_t)captured) * max_keys;
        memcpy(dst, row, n_keys * sizeof(float));
        memset(dst + n_keys, 0, (max_keys - n_keys) * sizeof(float));
      }
    }
    start = obc_now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)s->head_dim, (int)n_keys,
                1.0f, sc, (int)n_keys, vh, (int)s->head_dim, 0.0f,
                out + t0 * q_dim + h * s->head_dim, (int)q_dim);
    gemm_time[thread] += obc_now_seconds() - start;
  }
  /* Threads share the wall time: count the mean sgemm time per thread. */
  double total = 0.0;
  for (int t = 0; t < n_threads; t++) total += gemm_time[t];
  *gemm_seconds += total / n_threads;
  free(scores);
  free(gemm_time);
  return 0;
}
