/* Benchmark of the CPU runtime on a real model (default: SmolLM2-135M-Instruct):
 * prefill tokens/s at 512, 2048 and 4096 tokens with the share of time in the
 * weight GEMMs, in attention (and its sgemm part) and in element-wise work,
 * then decode tokens/s after a 512-token prompt.
 * Run: cmake --build B --target bench_model && B/bench/bench_model [MODEL]
 *      [--threads N] [--lengths 512,2048,4096] [--decode N] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "runtime/generate.h"
#include "model/model.h"
#include "runtime/runtime.h"

static void fill_tokens(int32_t *tokens, size_t n, size_t vocab) {
  uint64_t state = 12345;
  for (size_t i = 0; i < n; i++) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    tokens[i] = (int32_t)((state >> 33) % vocab);
  }
}

static int bench_prefill(Runtime *rt, const int32_t *tokens, size_t n, float *logits) {
  runtime_reset(rt);
  runtime_profile_reset(rt);
  double start = obc_now_seconds();
  int rc = runtime_forward(rt, tokens, n, RUNTIME_LOGITS_LAST, logits, NULL);
  if (rc < 0) return rc;
  double seconds = obc_now_seconds() - start;
  const RuntimeProfile *p = runtime_profile(rt);
  printf(
      "prefill %5zu tokens: %8.1f tokens/s (%.2f s)  GEMM %4.1f%%  attention %4.1f%% "
      "(its sgemm %4.1f%%)  other %4.1f%%\n",
      n, (double)n / seconds, seconds, 100 * p->gemm_seconds / seconds,
      100 * p->attention_seconds / seconds, 100 * p->attention_gemm_seconds / seconds,
      100 * p->other_seconds / seconds);
  return 0;
}

static int bench_decode(Runtime *rt, const int32_t *tokens, size_t n_prompt, size_t steps,
                        float *logits) {
  runtime_reset(rt);
  int rc = runtime_forward(rt, tokens, n_prompt, RUNTIME_LOGITS_LAST, logits, NULL);
  if (rc < 0) return rc;
  size_t vocab = runtime_model(rt)->config.vocab_size;
  double start = obc_now_seconds();
  for (size_t i = 0; i < steps && rc == 0; i++) {
    int32_t next = (int32_t)generate_argmax(logits, vocab);
    rc = runtime_forward(rt, &next, 1, RUNTIME_LOGITS_LAST, logits, NULL);
  }
  if (rc < 0) return rc;
  double seconds = obc_now_seconds() - start;
  printf("decode after %zu tokens: %.1f tokens/s (%zu steps, %.2f s)\n", n_prompt,
         (double)steps / seconds, steps, seconds);
  return 0;
}

/* The machine's 1-minute load average: figures taken on a busy machine are
 * not comparable with those of a quiet one. */
static double load_average(void) {
  double load = -1.0;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &load) != 1) load = -1.0;
    fclose(f);
  }
  return load;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  size_t threads = 0, decode_steps = 64, lengths[8] = {512, 2048, 4096}, n_lengths = 3;
  for (int i = 1; i < argc; i++) {
    int rc = 0;
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      rc = obc_parse_size("--threads", argv[++i], &threads);
    } else if (!strcmp(argv[i], "--decode") && i + 1 < argc) {
      rc = obc_parse_size("--decode", argv[++i], &decode_steps);
    } else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
      n_lengths = 0;
      rc = obc_parse_size_list("--lengths", argv[++i], lengths, &n_lengths, 8);
    } else {
      path = argv[i];
    }
    if (rc < 0) {
      fprintf(stderr, "bench_model: %s\n", obc_error_message());
      return 2;
    }
  }
  size_t max_len = 512;
  for (size_t i = 0; i < n_lengths; i++) max_len = lengths[i] > max_len ? lengths[i] : max_len;
  Model *model = NULL;
  double start = obc_now_seconds();
  int rc = model_load(path, &model);
  if (rc < 0) {
    fprintf(stderr, "bench_model: %s\n", obc_error_message());
    return 1;
  }
  printf("load average %.2f, OpenMP threads %d\n", load_average(),
         threads ? (int)threads : omp_get_max_threads());
  printf("model %s: %zu layers, dim %zu, %zu/%zu heads; loaded in %.2f s\n", model->config.name,
         model->config.n_layers, model->config.dim, model->config.n_heads, model->config.n_kv_heads,
         obc_now_seconds() - start);
  size_t vocab = model->config.vocab_size;
  RuntimeOptions options = {.max_context = max_len + 64, .threads = threads};
  Runtime *rt = NULL;
  int32_t *tokens = malloc(max_len * sizeof(int32_t));
  float *logits = malloc(vocab * sizeof(float));
  if (!tokens || !logits || (rc = runtime_create(model, &options, &rt)) < 0) {
    fprintf(stderr, "bench_model: %s\n", obc_error_message());
    return 1;
  }
  fill_tokens(tokens, max_len, vocab);
  rc = bench_prefill(rt, tokens, 64, logits); /* warm-up: page in weights and buffers */
  for (size_t i = 0; i < n_lengths && rc == 0; i++)
    rc = bench_prefill(rt, tokens, lengths[i], logits);
  if (rc == 0 && decode_steps) rc = bench_decode(rt, tokens, 512, decode_steps, logits);
  if (rc < 0) fprintf(stderr, "bench_model: %s\n", obc_error_message());
  runtime_free(rt);
  model_free(model);
  free(tokens);
  free(logits);
  return rc < 0 ? 1 : 0;
}
