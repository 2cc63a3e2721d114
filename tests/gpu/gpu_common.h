/* Shared by the GPU checks and the GPU benchmark: the skip when no CUDA device
 * is present (exit 77, which CTest reports as skipped), a seeded random fill,
 * the normalised comparison every check prints, and a Llama-shaped model with
 * random weights built in memory (no file), optionally with one set of layer
 * weights shared by every layer so an 8B shape fits in host memory quickly.
 * Test code. */
#ifndef OBC_TESTS_GPU_COMMON_H
#define OBC_TESTS_GPU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "runtime/cuda/backend_cuda.h"
#include "model/model.h"

enum { GPU_SKIP = 77 };

/* Exits 77 with a visible line when there is no usable CUDA device. */
static inline void gpu_require_device(const char *program) {
  if (cuda_backend_probe() < 0) {
    printf("SKIPPED: no CUDA device (%s: %s)\n", program, obc_error_message());
    exit(GPU_SKIP);
  }
}

/* The configuration of Llama-3.1-8B (32 layers, dim 4096, ffn 14336, 32/8
 * heads of 128, vocab 128256), for random models of its shape. */
static inline ModelConfig gpu_llama8b_config(void) {
  return (ModelConfig){.name = "llama-3.1-8b-shape",
                       .architecture = "llama",
                       .n_layers = 32,
                       .dim = 4096,
                       .ffn_dim = 14336,
                       .n_heads = 32,
                       .n_kv_heads = 8,
                       .head_dim = 128,
                       .vocab_size = 128256,
                       .context_length = 131072,
                       .norm_eps = 1e-5,
                       .rope_theta = 500000.0,
                       .rope_interleaved = false};
}

/* splitmix64: a fixed sequence per seed. */
static inline uint64_t gpu_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [-scale, scale). */
static inline void gpu_fill(float *x, size_t count, float scale, uint64_t seed) {
  uint64_t state = seed;
  for (size_t i = 0; i < count; i++)
    x[i] = scale * ((float)(gpu_next(&state) >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

/* max |a - b| / max |b| over count values (0 when both are all zero): the
 * error relative to the tensor's scale, which is what a rounding difference
 * produces (an element-wise ratio explodes on values near 0). Prints one line
 * and returns 1 when within tol. */
static inline int gpu_compare(const char *what, const float *a, const float *b, size_t count,
                              double tol) {
  double max_diff = 0.0, max_ref = 0.0;
  size_t worst = 0;
  int finite = 1;
  for (size_t i = 0; i < count; i++) {
    if (!isfinite(a[i]) || !isfinite(b[i])) finite = 0;
    double d = fabs((double)a[i] - (double)b[i]);
    if (d > max_diff) {
      max_diff = d;
      worst = i;
    }
    if (fabs((double)b[i]) > max_ref) max_ref = fabs((double)b[i]);
  }
  double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  int ok = finite && rel <= tol;
  printf("  %-40s n=%-10zu max|diff|=%.3e rel=%.3e (tol %.0e) %s", what, count, max_diff, rel, tol,
         ok ? "OK" : "FAIL");
  if (!ok && count) printf("  [worst at %zu: %.8g vs %.8g]", worst, a[worst], b[worst]);
  printf("%s\n", finite ? "" : " (non-finite values)");
  return ok;
}

/* gpu_compare for doubles (the capture's sums), also saying whether the two
 * are bit-equal. */
static inline int gpu_compare_doubles(const char *what, const double *a, const double *b,
                                      size_t count, double tol) {
  double max_diff = 0.0, max_ref = 0.0;
  int finite = 1, same = 1;
  for (size_t i = 0; i < count; i++) {
    finite &= isfinite(a[i]) && isfinite(b[i]);
    same &= !memcmp(&a[i], &b[i], sizeof a[i]);
    max_diff = fmax(max_diff, fabs(a[i] - b[i]));
    max_ref = fmax(max_ref, fabs(b[i]));
  }
  double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  int ok = finite && rel <= tol;
  printf("  %-40s n=%-10zu max|diff|=%.3e rel=%.3e (tol %.0e, %s) %s%s\n", what, count, max_diff,
         rel, tol, same ? "bit-equal" : "not bit-equal", ok ? "OK" : "FAIL",
         finite ? "" : " (non-finite values)");
  return ok;
}

/* A model with random weights: matrices uniform with variance 1/in, norm
 * weights near 1, biases small when config->qkv_bias, per-head Q/K norm
 * weights in [1, 2) (Q) and [0.5, 1) (K) when config->qk_norm. share_layers: every layer
 * points at the same matrices (benchmark shapes). model_free() frees it. */
static inline int gpu_random_model(const ModelConfig *config, uint64_t seed, int share_layers,
                                   Model **out) {
  const ModelConfig *c = config;
  size_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  size_t layer_floats = 2 * c->dim + q_dim * c->dim + 2 * kv_dim * c->dim + c->dim * q_dim +
                        3 * c->ffn_dim * c->dim + (c->qkv_bias ? q_dim + 2 * kv_dim : 0) +
                        (c->qk_norm ? 2 * c->head_dim : 0);
  size_t stored_layers = share_layers ? 1 : c->n_layers;
  size_t total =
      c->vocab_size * c->dim * (c->tied_embeddings ? 1 : 2) + c->dim + stored_layers * layer_floats;
  Model *m = calloc(1, sizeof(Model));
  float *storage = malloc(total * sizeof(float));
  ModelLayerWeights *layers = calloc(c->n_layers, sizeof(ModelLayerWeights));
  if (!m || !storage || !layers) {
    free(m);
    free(storage);
    free(layers);
    return obc_fail(OBC_ENOMEM, "random model: out of host memory (%zu floats)", total);
  }
  snprintf(m->path, sizeof m->path, "random:%s", c->name);
  m->config = *c;
  m->storage = storage;
  m->weights.layers = layers;
  float *p = storage;
#define TAKE(ptr, count, scale)            \
  do {                                     \
    (ptr) = p;                             \
    gpu_fill(p, (count), (scale), seed++); \
    p += (count);                          \
  } while (0)
#define TAKE_MATRIX(matrix, rows, cols, scale)             \
  do {                                                     \
    (matrix) = model_matrix_f32(p, (rows), (cols));        \
    gpu_fill(p, (size_t)(rows) * (cols), (scale), seed++); \
    p += (size_t)(rows) * (cols);                          \
  } while (0)
  TAKE_MATRIX(m->weights.token_embedding, c->vocab_size, c->dim, 1.0f);
  if (c->tied_embeddings)
    m->weights.output = m->weights.token_embedding;
  else
    TAKE_MATRIX(m->weights.output, c->vocab_size, c->dim, sqrtf(3.0f / (float)c->dim));
  m->weights.output_norm = p;
  for (size_t i = 0; i < c->dim; i++) p[i] = 1.0f;
  p += c->dim;
  for (size_t l = 0; l < stored_layers; l++) {
    ModelLayerWeights *w = &layers[l];
    float in_dim = sqrtf(3.0f / (float)c->dim), in_q = sqrtf(3.0f / (float)q_dim);
    float in_ffn = sqrtf(3.0f / (float)c->ffn_dim);
    w->attn_norm = p;
    w->ffn_norm = p + c->dim;
    for (size_t i = 0; i < 2 * c->dim; i++) p[i] = 1.0f + 0.1f * (float)((i * 7) % 5) / 5.0f;
    p += 2 * c->dim;
    TAKE_MATRIX(w->wq, q_dim, c->dim, in_dim);
    TAKE_MATRIX(w->wk, kv_dim, c->dim, in_dim);
    TAKE_MATRIX(w->wv, kv_dim, c->dim, in_dim);
    TAKE_MATRIX(w->wo, c->dim, q_dim, in_q);
    TAKE_MATRIX(w->w_gate, c->ffn_dim, c->dim, in_dim);
    TAKE_MATRIX(w->w_up, c->ffn_dim, c->dim, in_dim);
    TAKE_MATRIX(w->w_down, c->dim, c->ffn_dim, in_ffn);
    if (c->qkv_bias) {
      TAKE(w->bq, q_dim, 0.1f);
      TAKE(w->bk, kv_dim, 0.1f);
      TAKE(w->bv, kv_dim, 0.1f);
    }
    if (c->qk_norm) {
      w->q_norm = p;
      w->k_norm = p + c->head_dim;
      for (size_t i = 0; i < c->head_dim; i++) {
        w->q_norm[i] = 1.0f + (float)((i * 3) % 7) / 7.0f;
        w->k_norm[i] = 0.5f + 0.5f * (float)((i * 5) % 11) / 11.0f;
      }
      p += 2 * c->head_dim;
    }
  }
#undef TAKE
#undef TAKE_MATRIX
  for (size_t l = stored_layers; l < c->n_layers; l++) layers[l] = layers[0];
  *out = m;
  return 0;
}

#endif
