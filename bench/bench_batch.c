/* Benchmark of batched decoding (runtime/batch.h), not a test: B sequences
 * over one prompt cache of s positions (random K/V, each sequence keeping a
 * different random share of it), one token per sequence per step, against
 * the same work one sequence at a time (runtime_forward of one token with the
 * marks set by runtime_set_kept), in the same run.
 *
 * usage: bench_batch [MODEL [S [B [STEPS [QUIET]]]]]   (defaults: the default
 *        model, 4096, 132 = the demo sweep's 66 kept sets x 2, 4, 0); the
 *        first QUIET steps compute no logits, as a re-run's tokens before
 *        its last (bench/run_eval.sh). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "common/obc_time.h"
#include "model/model.h"
#include "runtime/batch.h"
#include "runtime/runtime.h"

static uint64_t rng = 88172645463325252ULL;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

/* Keep mask of sequence b of n: 4 sinks, 8 recent and a random share of the
 * rest, 1%, 2%, 5%, 10%, 20%, 40% for a sixth of the sequences each, in
 * increasing order (as replay_model_run_batch orders its sets). */
static void marks(size_t b, size_t n, unsigned char *keep, size_t s) {
  static const double share[6] = {0.01, 0.02, 0.05, 0.10, 0.20, 0.40};
  for (size_t p = 0; p < s; p++) keep[p] = p < 4 || p + 8 >= s || uniform() < share[b * 6 / n];
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  const char *path = argc > 1 && argv[1][0] ? argv[1] : model_default_path();
  size_t s = argc > 2 ? (size_t)atol(argv[2]) : 4096, n = argc > 3 ? (size_t)atol(argv[3]) : 132;
  size_t steps = argc > 4 ? (size_t)atol(argv[4]) : 4;
  size_t quiet = argc > 5 ? (size_t)atol(argv[5]) : 0;
  Model *model = NULL;
  if (model_load(path, &model)) {
    fprintf(stderr, "%s\n", obc_error_message());
    return 1;
  }
  const ModelConfig *c = &model->config;
  RuntimeOptions options = {.max_context = s + steps};
  Runtime *rt = NULL;
  RuntimeBatch *batch = NULL;
  unsigned char *keep = malloc(n * c->n_layers * c->n_kv_heads * s);
  float *logits = malloc(n * c->vocab_size * sizeof(float));
  int32_t *tokens = malloc(n * sizeof *tokens);
  if (!keep || !logits || !tokens || runtime_create(model, &options, &rt)) return 1;
  RuntimeCache *cache = runtime_cache(rt);
  for (size_t l = 0; l < c->n_layers; l++)
    for (size_t g = 0; g < c->n_kv_heads; g++)
      for (size_t i = 0; i < s * c->head_dim; i++) {
        runtime_cache_k(cache, l, g)[i] = (float)(2.0 * uniform() - 1.0);
        runtime_cache_v(cache, l, g)[i] = (float)(2.0 * uniform() - 1.0);
      }
  size_t heads = c->n_layers * c->n_kv_heads;
  for (size_t b = 0; b < n; b++)
    for (size_t h = 0; h < heads; h++) marks(b, n, keep + (b * heads + h) * s, s);
  if (runtime_set_position(rt, s) || runtime_batch_create(rt, n, steps, &batch) ||
      runtime_batch_reset(batch, n))
    return 1;
  for (size_t b = 0; b < n; b++)
    for (size_t h = 0; h < heads; h++)
      runtime_batch_set_kept(batch, b, h / c->n_kv_heads, h % c->n_kv_heads,
                             keep + (b * heads + h) * s, s);
  for (size_t b = 0; b < n; b++) tokens[b] = (int32_t)(b * 31 % c->vocab_size);
  double start = obc_now_seconds();
  for (size_t t = 0; t < steps; t++)
    if (runtime_batch_forward(batch, tokens, t < quiet ? NULL : logits)) return 1;
  double batched = (obc_now_seconds() - start) / (double)steps;

  /* One at a time: a few sequences, their marks, all steps; scaled to n. */
  size_t probe = n < 6 ? n : 6;
  start = obc_now_seconds();
  for (size_t b = 0; b < probe; b++) {
    runtime_clear_evictions(rt);
    for (size_t h = 0; h < heads; h++)
      runtime_set_kept(rt, h / c->n_kv_heads, h % c->n_kv_heads, keep + (b * heads + h) * s, s);
    runtime_set_position(rt, s);
    for (size_t t = 0; t < steps; t++)
      if (runtime_forward(rt, &tokens[b], 1, RUNTIME_LOGITS_LAST, logits, NULL)) return 1;
  }
  double single = (obc_now_seconds() - start) / (double)(probe * steps);
  printf("bench_batch: %s, prompt %zu, %zu sequences, %zu steps\n", c->name, s, n, steps);
  printf("  batched:        %.3f s per step (%.1f tokens/s)\n", batched, (double)n / batched);
  printf("  one at a time:  %.4f s per token (%.1f tokens/s; %zu sequences timed)\n", single,
         1.0 / single, probe);
  printf("  ratio:          %.1fx\n", single * (double)n / batched);
  runtime_batch_free(batch);
  runtime_free(rt);
  model_free(model);
  free(keep);
  free(logits);
  free(tokens);
  return 0;
}
