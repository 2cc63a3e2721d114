/* GPU prefill benchmark: tokens/s, achieved TFLOP/s and the cost of a capture
 * (128 rows, every layer's K/V mirrored to the host) for SmolLM2 (from its
 * GGUF) and for a Llama-3.1-8B-shaped model with random weights built here
 * (one random layer shared by all 32 layers: same shapes, memory and FLOPs,
 * no file), in bf16 weights ("cuda-bf16"), at 8K and 32K tokens.
 *
 * FLOPs counted: weight GEMMs 2 * tokens * (matrix parameters per layer) *
 * layers + the LM head of the last token; attention 4 * head_dim * n_heads *
 * layers * sum over queries of their key counts (QK^T and PV, causal). The
 * GEMM rate uses the GEMM time measured with CUDA events; the card's dense
 * bf16 peak is taken as 989 TFLOP/s (H100/H200 SXM datasheet), not measured.
 * Usage: gpu_bench [smollm2|llama8b|all] (default all). Exits 77 without a
 * CUDA device. A benchmark, not a test: nothing is asserted about timings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_cli.h"
#include "runtime/runtime.h"
#include "tests/gpu/gpu_common.h"

static const double PEAK_BF16_TFLOPS = 989.0;
enum { CAPTURE_ROWS = 128, BENCH_BATCH = 2048 };

typedef struct {
  double bytes_seen; /* touches what on_layer gets, as a writer would */
  double checksum;
} Sink;

static int sink_layer(void *user, const RuntimeLayerCapture *view) {
  Sink *sink = user;
  size_t kv = view->n_kv_heads * view->n_tokens * view->head_dim;
  size_t rows = view->n_heads * view->n_rows;
  double sum = 0.0;
  for (size_t g = 0; g < view->n_kv_heads; g++)
    sum += view->k[g * view->kv_stride * view->head_dim] +
           view->v[g * view->kv_stride * view->head_dim];
  for (size_t i = 0; i < rows; i++)
    sum += view->lse[i] + view->q[i * view->head_dim] + view->o[i * view->head_dim];
  sink->checksum += sum;
  sink->bytes_seen += (double)(2 * kv + rows * (2 * view->head_dim + 1)) * sizeof(float);
  return 0;
}

static double gemm_flops(const ModelConfig *c, size_t tokens) {
  double q_dim = (double)(c->n_heads * c->head_dim), kv_dim = (double)(c->n_kv_heads * c->head_dim);
  double per_layer =
      (double)c->dim * (2.0 * q_dim + 2.0 * kv_dim) + 3.0 * (double)c->dim * (double)c->ffn_dim;
  return 2.0 * (double)tokens * per_layer * (double)c->n_layers +
         2.0 * (double)c->dim * (double)c->vocab_size;
}

static double attention_flops(const ModelConfig *c, size_t tokens) {
  double key_pairs = (double)tokens * ((double)tokens + 1.0) / 2.0;
  return 4.0 * (double)c->head_dim * (double)c->n_heads * (double)c->n_layers * key_pairs;
}

/* One prefill of `tokens` tokens, with or without a capture of the last rows. */
static int prefill(Runtime *rt, const int32_t *ids, size_t tokens, int with_capture, float *logits,
                   double *seconds, RuntimeProfile *profile) {
  size_t positions[CAPTURE_ROWS];
  for (size_t r = 0; r < CAPTURE_ROWS; r++) positions[r] = tokens - CAPTURE_ROWS + r;
  Sink sink = {0};
  RuntimeCapture capture = {.row_positions = positions,
                            .n_rows = CAPTURE_ROWS,
                            .want_attn = false,
                            .user = &sink,
                            .on_layer = sink_layer};
  runtime_reset(rt);
  runtime_profile_reset(rt);
  double start = obc_now_seconds();
  int rc =
      runtime_forward(rt, ids, tokens, RUNTIME_LOGITS_LAST, logits, with_capture ? &capture : NULL);
  *seconds = obc_now_seconds() - start;
  *profile = *runtime_profile(rt);
  return rc;
}

static int bench_model(const Model *model, const char *label, const size_t *lengths,
                       size_t n_lengths) {
  const ModelConfig *c = &model->config;
  size_t max_len = lengths[n_lengths - 1];
  RuntimeOptions options = {
      .max_context = max_len, .max_batch = BENCH_BATCH, .backend = "cuda-bf16"};
  Runtime *rt = NULL;
  double t0 = obc_now_seconds();
  int rc = runtime_create(model, &options, &rt);
  if (rc < 0) return rc;
  printf("%s (bf16 weights, chunks of %d): upload %.1f s\n", label, BENCH_BATCH,
         obc_now_seconds() - t0);
  int32_t *ids = malloc(max_len * sizeof(int32_t));
  float *logits = malloc(c->vocab_size * sizeof(float));
  if (!ids || !logits) rc = obc_fail(OBC_ENOMEM, "gpu_bench: out of host memory");
  uint64_t state = 3;
  for (size_t t = 0; t < max_len && !rc; t++) ids[t] = (int32_t)(gpu_next(&state) % c->vocab_size);
  double seconds = 0.0;
  RuntimeProfile p;
  if (!rc)
    rc = prefill(rt, ids, lengths[0] < 1024 ? lengths[0] : 1024, 0, logits, &seconds,
                 &p); /* warm-up */
  for (size_t i = 0; i < n_lengths && !rc; i++) {
    size_t n = lengths[i];
    double plain = 0.0, captured = 0.0;
    RuntimeProfile pp, pc;
    rc = prefill(rt, ids, n, 0, logits, &plain, &pp);
    if (!rc) rc = prefill(rt, ids, n, 1, logits, &captured, &pc);
    if (rc) break;
    double gf = gemm_flops(c, n), af = attention_flops(c, n);
    printf("  %6zu tokens: prefill %.2f s = %.0f tokens/s; %.1f TFLOP/s overall\n", n, plain,
           (double)n / plain, (gf + af) / plain * 1e-12);
    printf("      GEMMs %.2f s, %.1f TFLOP/s = %.1f%% of the %.0f TFLOP/s bf16 peak\n",
           pp.gemm_seconds, gf / pp.gemm_seconds * 1e-12,
           100.0 * gf / pp.gemm_seconds * 1e-12 / PEAK_BF16_TFLOPS, PEAK_BF16_TFLOPS);
    printf("      attention %.2f s, %.1f TFLOP/s (fp32 CUDA cores); other %.2f s\n",
           pp.attention_seconds, af / pp.attention_seconds * 1e-12, pp.other_seconds);
    printf("      capture (%d rows, all K/V to the host): %.2f s = %.2fx the plain prefill\n",
           CAPTURE_ROWS, captured, captured / plain);
  }
  free(ids);
  free(logits);
  runtime_free(rt);
  return rc;
}

int main(int argc, char **argv) {
  gpu_require_device("gpu_bench");
  const char *which = argc > 1 ? argv[1] : "all";
  static const size_t lengths[] = {8192, 32768};
  int rc = 0;
  int smollm2 = !strcmp(which, "all") || !strcmp(which, "smollm2");
  if (smollm2 && access(model_default_path(), R_OK) != 0) {
    printf("SKIPPED: SmolLM2 benchmark: %s is not present (scripts/setup.sh fetches it)\n",
           model_default_path());
    smollm2 = 0;
  }
  if (smollm2) {
    Model *model = NULL;
    rc = model_load(NULL, &model);
    if (!rc) rc = bench_model(model, "SmolLM2-135M", lengths, 2);
    model_free(model);
  }
  if (!rc && (!strcmp(which, "all") || !strcmp(which, "llama8b"))) {
    ModelConfig c = {.name = "llama-3.1-8b-shape",
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
    Model *model = NULL;
    double t0 = obc_now_seconds();
    rc = gpu_random_model(&c, 11, 1, &model);
    if (!rc) printf("random 8B-shaped weights built in %.1f s\n", obc_now_seconds() - t0);
    if (!rc) rc = bench_model(model, "Llama-3.1-8B-shaped, random weights", lengths, 2);
    model_free(model);
  }
  if (rc < 0) {
    fprintf(stderr, "gpu_bench: %s\n", obc_error_message());
    return 1;
  }
  return 0;
}
