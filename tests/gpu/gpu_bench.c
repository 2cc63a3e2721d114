/* GPU prefill benchmark: tokens/s, achieved TFLOP/s and the cost of a capture
 * (128 rows, every layer's K/V mirrored to the host) for SmolLM2 (from its
 * GGUF) and for a Llama-3.1-8B-shaped model with random weights built here
 * (one random layer shared by all 32 layers: same shapes, memory and FLOPs,
 * no file), in bf16 weights ("cuda-bf16"), at 8K and 32K tokens.
 *
 * FLOPs counted: weight GEMMs 2 * tokens * (matrix parameters per layer) *
 * layers + the LM head of the last token; attention 4 * head_dim * n_heads *
 * layers * sum over queries of their key counts (QK^T and PV, causal). The
 * GEMM rate uses the GEMM time measured with CUDA events and is set against
 * a cuBLAS bf16 GEMM of the largest weight shape timed in the same run (the
 * datasheet's 989 TFLOP/s dense bf16 peak is printed beside it). After each
 * prefill, decode tokens/s: plain, and with a third of every (layer, KV head)
 * evicted (the marks are uploaded once, not per token), with the share of
 * decode time in attention (one thread block per query head). And the same
 * capture with the capture's column sums and query statistics of every
 * prompt row on the device (RuntimeSums, runtime/cuda/cuda_sums.cu): its time
 * over the capture without them, and the sums kernels' fp32 rate (9 head_dim
 * FLOPs per (row, key, head, layer) pair, docs/GPU.md).
 * Usage: gpu_bench [smollm2|llama8b|all] (default all). Exits 77 without a
 * CUDA device. A benchmark, not a test: nothing is asserted about timings. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_time.h"
#include "runtime/runtime.h"
#include "tests/gpu/gpu_common.h"

static const double PEAK_BF16_TFLOPS = 989.0;
enum { CAPTURE_ROWS = 128, BENCH_BATCH = 2048, DECODE_STEPS = 32 };

/* TFLOP/s of a cuBLAS GEMM exactly as the backend's weight products call it
 * (runtime/cuda/backend_cuda.cu, gemm): bf16 weight w (out, in) and
 * activations a (n, in), fp32 output and accumulation; the best of 10 after
 * 3 warm-ups; 0 when it cannot run. */
static double cublas_bf16_tflops(int out, int n, int in) {
  void *w = NULL, *a = NULL, *c = NULL;
  cublasHandle_t handle = NULL;
  cudaEvent_t start, stop;
  double best = 0.0;
  if (cudaMalloc(&w, (size_t)out * in * 2) || cudaMalloc(&a, (size_t)n * in * 2) ||
      cudaMalloc(&c, (size_t)out * n * 4) || cublasCreate(&handle))
    goto done;
  cudaMemset(w, 0x3c, (size_t)out * in * 2); /* bf16 0x3c3c ~ 0.0115: finite, nonzero */
  cudaMemset(a, 0x3c, (size_t)n * in * 2);
  cudaEventCreate(&start), cudaEventCreate(&stop);
  const float one = 1.0f, zero = 0.0f;
  for (int rep = 0; rep < 13; rep++) {
    cudaEventRecord(start, 0);
    cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w,
                                     CUDA_R_16BF, in, a, CUDA_R_16BF, in, &zero, c, CUDA_R_32F, out,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    double tflops = 2.0 * out * n * (double)in / (ms * 1e-3) * 1e-12;
    if (st == CUBLAS_STATUS_SUCCESS && rep >= 3 && tflops > best) best = tflops;
  }
  cudaEventDestroy(start), cudaEventDestroy(stop);
done:
  if (handle) cublasDestroy(handle);
  cudaFree(w), cudaFree(a), cudaFree(c);
  return best;
}

/* Decode tokens/s of DECODE_STEPS tokens after the cache's prompt, and the
 * share of that time in attention. */
static int decode(Runtime *rt, float *logits, double *tokens_per_second, double *attention_share) {
  size_t prompt = runtime_position(rt);
  runtime_profile_reset(rt);
  double start = obc_now_seconds();
  int32_t token = 1;
  int rc = 0;
  for (int t = 0; t < DECODE_STEPS && !rc; t++)
    rc = runtime_forward(rt, &token, 1, RUNTIME_LOGITS_LAST, logits, NULL);
  double seconds = obc_now_seconds() - start;
  *tokens_per_second = DECODE_STEPS / seconds;
  *attention_share = runtime_profile(rt)->attention_seconds / seconds;
  if (!rc) rc = runtime_rewind(rt, prompt);
  return rc;
}

/* Marks a third of the prompt of every (layer, KV head) evicted. */
static int evict_third(Runtime *rt, const ModelConfig *c) {
  size_t n = runtime_position(rt);
  unsigned char *keep = malloc(n);
  if (!keep) return obc_fail(OBC_ENOMEM, "gpu_bench: out of host memory");
  for (size_t p = 0; p < n; p++) keep[p] = p % 3 != 1;
  int rc = 0;
  for (size_t l = 0; l < c->n_layers && !rc; l++)
    for (size_t g = 0; g < c->n_kv_heads && !rc; g++) rc = runtime_set_kept(rt, l, g, keep, n);
  free(keep);
  return rc;
}

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

/* FLOPs of the device column sums: 9 head_dim fp32 per causal pair. */
static double sums_flops(const ModelConfig *c, size_t tokens) {
  double key_pairs = (double)tokens * ((double)tokens + 1.0) / 2.0;
  return 9.0 * (double)c->head_dim * (double)c->n_heads * (double)c->n_layers * key_pairs;
}

/* Host arrays for the device sums of a prompt of `tokens` rows (question at
 * 90%), in RuntimeSums's layout; NULL arrays when out of memory. */
static RuntimeSums sums_alloc(const ModelConfig *c, size_t tokens) {
  size_t per = c->n_layers * RUNTIME_SUMS_VARIANTS * c->n_heads;
  RuntimeSums s = {.n_prompt = tokens,
                   .agnostic_rows = tokens / 10 * 9,
                   .qstats_first_row = 4,
                   .scale = (float)(1.0 / sqrt((double)c->head_dim)),
                   .attn = malloc(per * tokens * sizeof(double)),
                   .obc = malloc(per * RUNTIME_SUMS_OBC_TERMS * tokens * sizeof(double)),
                   .q_sum = malloc(per * c->head_dim * sizeof(double)),
                   .q_outer = malloc(per * c->head_dim * c->head_dim * sizeof(double))};
  return s;
}

static void sums_free(RuntimeSums *s) {
  free(s->attn), free(s->obc), free(s->q_sum), free(s->q_outer);
}

/* One prefill of `tokens` tokens, with or without a capture of the last rows
 * (and with sums: the capture's device sums). */
static int prefill(Runtime *rt, const int32_t *ids, size_t tokens, int with_capture,
                   const RuntimeSums *sums, float *logits, double *seconds,
                   RuntimeProfile *profile) {
  size_t positions[CAPTURE_ROWS];
  for (size_t r = 0; r < CAPTURE_ROWS; r++) positions[r] = tokens - CAPTURE_ROWS + r;
  Sink sink = {0};
  RuntimeCapture capture = {.row_positions = positions,
                            .n_rows = CAPTURE_ROWS,
                            .want_attn = false,
                            .user = &sink,
                            .on_layer = sink_layer,
                            .sums = sums};
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
                       size_t n_lengths, double measured_tflops) {
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
    rc = prefill(rt, ids, lengths[0] < 1024 ? lengths[0] : 1024, 0, NULL, logits, &seconds,
                 &p); /* warm-up */
  for (size_t i = 0; i < n_lengths && !rc; i++) {
    size_t n = lengths[i];
    double plain = 0.0, captured = 0.0;
    RuntimeProfile pp, pc;
    rc = prefill(rt, ids, n, 0, NULL, logits, &plain, &pp);
    if (!rc) rc = prefill(rt, ids, n, 1, NULL, logits, &captured, &pc);
    RuntimeSums sums = sums_alloc(c, n);
    double summed = 0.0;
    RuntimeProfile ps;
    if (!rc && (!sums.attn || !sums.obc || !sums.q_sum || !sums.q_outer))
      rc = obc_fail(OBC_ENOMEM, "gpu_bench: out of host memory for the sums");
    if (!rc) rc = prefill(rt, ids, n, 1, &sums, logits, &summed, &ps);
    sums_free(&sums);
    if (rc) break;
    double gf = gemm_flops(c, n), af = attention_flops(c, n);
    printf("  %6zu tokens: prefill %.2f s = %.0f tokens/s; %.1f TFLOP/s overall\n", n, plain,
           (double)n / plain, (gf + af) / plain * 1e-12);
    double achieved = gf / pp.gemm_seconds * 1e-12;
    printf(
        "      GEMMs %.2f s, %.1f TFLOP/s = %.1f%% of the measured cuBLAS bf16 GEMM "
        "(%.0f TFLOP/s), %.1f%% of the %.0f TFLOP/s datasheet peak\n",
        pp.gemm_seconds, achieved, measured_tflops > 0 ? 100.0 * achieved / measured_tflops : 0.0,
        measured_tflops, 100.0 * achieved / PEAK_BF16_TFLOPS, PEAK_BF16_TFLOPS);
    printf("      attention %.2f s, %.1f TFLOP/s (fp32 CUDA cores); other %.2f s\n",
           pp.attention_seconds, af / pp.attention_seconds * 1e-12, pp.other_seconds);
    printf("      capture (%d rows, all K/V to the host): %.2f s = %.2fx the plain prefill\n",
           CAPTURE_ROWS, captured, captured / plain);
    printf(
        "      capture with the column sums and query statistics on the device: %.2f s = %.2fx "
        "the capture without; the sums %.1f TFLOP/s fp32 (%.2g FLOP)\n",
        summed, summed / captured, sums_flops(c, n) / (summed - captured) * 1e-12,
        sums_flops(c, n));
    fflush(stdout);
    double plain_tps = 0.0, plain_att = 0.0, evicted_tps = 0.0, evicted_att = 0.0;
    rc = decode(rt, logits, &plain_tps, &plain_att);
    if (!rc) rc = evict_third(rt, c);
    if (!rc) rc = decode(rt, logits, &evicted_tps, &evicted_att);
    if (rc) break;
    runtime_clear_evictions(rt);
    printf(
        "      decode after it: %.1f tokens/s (attention %.0f%%); a third evicted: %.1f "
        "tokens/s (attention %.0f%%)\n",
        plain_tps, 100.0 * plain_att, evicted_tps, 100.0 * evicted_att);
  }
  free(ids);
  free(logits);
  runtime_free(rt);
  return rc;
}

int main(int argc, char **argv) {
  gpu_require_device("gpu_bench");
  setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach the kit's log even if the step times out */
  const char *which = argc > 1 ? argv[1] : "all";
  static const size_t lengths[] = {8192, 32768};
  int rc = 0;
  /* The largest weight GEMM of a prefill chunk: (2048 tokens, 4096) x (4096, 14336). */
  double measured = cublas_bf16_tflops(14336, BENCH_BATCH, 4096);
  printf(
      "cuBLAS GEMM as the backend calls it, bf16 (14336, 4096) x (2048, 4096)^T, fp32 out: "
      "%.0f TFLOP/s measured\n",
      measured);
  int smollm2 = !strcmp(which, "all") || !strcmp(which, "smollm2");
  if (smollm2 && access(model_default_path(), R_OK) != 0) {
    printf("SKIPPED: SmolLM2 benchmark: %s is not present (scripts/setup.sh fetches it)\n",
           model_default_path());
    smollm2 = 0;
  }
  if (smollm2) {
    Model *model = NULL;
    rc = model_load(NULL, &model);
    if (!rc) rc = bench_model(model, "SmolLM2-135M", lengths, 2, measured);
    model_free(model);
  }
  if (!rc && (!strcmp(which, "all") || !strcmp(which, "llama8b"))) {
    ModelConfig c = gpu_llama8b_config();
    Model *model = NULL;
    double t0 = obc_now_seconds();
    rc = gpu_random_model(&c, 11, 1, &model);
    if (!rc) printf("random 8B-shaped weights built in %.1f s\n", obc_now_seconds() - t0);
    if (!rc) rc = bench_model(model, "Llama-3.1-8B-shaped, random weights", lengths, 2, measured);
    model_free(model);
  }
  if (rc < 0) {
    fprintf(stderr, "gpu_bench: %s\n", obc_error_message());
    return 1;
  }
  return 0;
}
