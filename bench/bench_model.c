/* Benchmark of the CPU runtime on a real model (default: SmolLM2-135M-Instruct):
 * prefill tokens/s at 512, 2048 and 4096 tokens with the share of time in the
 * weight GEMMs, in attention (and its sgemm part) and in element-wise work,
 * then decode tokens/s after a prompt (512 tokens by default), for the weights held in
 * their stored type (native) and dequantised to fp32 (f32), one after the
 * other in the same run. Decode is set against the memory roofline: the
 * weight bytes one step reads over the read bandwidth of a streaming sum
 * measured in the same run; and each path's peak RSS. Last, the floor table
 * (print_floor_table): each measured rate next to the best the machine allows,
 * prefill from its FLOPs per token over the sgemm rate of the linked BLAS
 * and decode from its bytes per token (weights in their held type plus the
 * fp32 KV cache at the depth) over the read bandwidth, both measured here.
 * Run: cmake --build B --target bench_model && B/bench/bench_model [MODEL]
 *      [--threads N] [--lengths 512,2048,4096] [--decode N] [--decode-after N]
 *      [--weights native|f32|both]
 * --decode N: decode steps (default 64) after a prompt of --decode-after tokens
 * (default 512). */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "common/obc_startup.h"
#include "common/obc_time.h"
#include "runtime/cpu_ops.h"
#include "runtime/generate.h"
#include "model/model.h"
#include "runtime/runtime.h"

/* VmRSS or VmHWM of this process in MB (-1 when unreadable). */
static double status_mb(const char *key) {
  char line[256];
  double kb = -1.0;
  size_t length = strlen(key);
  FILE *f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, length) && line[length] == ':') kb = atof(line + length + 1);
  if (f) fclose(f);
  return kb < 0 ? -1.0 : kb / 1024.0;
}

/* Read bandwidth in GB/s: the best of 5 sums of a 512 MB buffer (far beyond
 * the caches), on the threads decode uses. */
static double read_bandwidth(void) {
  size_t n = ((size_t)512 << 20) / sizeof(float);
  float *buffer = malloc(n * sizeof(float));
  if (!buffer) return -1.0;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) buffer[i] = (float)(i & 7);
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < 5; rep++) {
    double start = obc_now_seconds();
    float total = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : total)
    for (size_t i = 0; i < n; i++) total += buffer[i];
    double seconds = obc_now_seconds() - start;
    sink = total;
    double rate = (double)(n * sizeof(float)) / seconds / 1e9;
    if (rate > best) best = rate;
  }
  (void)sink;
  free(buffer);
  return best;
}

/* Weight bytes one decode step reads: every layer matrix, the LM head and
 * one embedding row (all of the embedding only when it is the LM head). */
static double decode_bytes(const Model *model) {
  const ModelWeights *w = &model->weights;
  double bytes = (double)model_matrix_bytes(model);
  if (w->output.data != w->token_embedding.data)
    bytes -= (double)((w->token_embedding.rows - 1) * w->token_embedding.row_bytes);
  return bytes;
}

static void fill_tokens(int32_t *tokens, size_t n, size_t vocab) {
  uint64_t state = 12345;
  for (size_t i = 0; i < n; i++) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    tokens[i] = (int32_t)((state >> 33) % vocab);
  }
}

static int bench_prefill(Runtime *rt, const int32_t *tokens, size_t n, float *logits,
                         double *tokens_per_second) {
  runtime_reset(rt);
  runtime_profile_reset(rt);
  double start = obc_now_seconds();
  int rc = runtime_forward(rt, tokens, n, RUNTIME_LOGITS_LAST, logits, NULL);
  if (rc) return rc;
  double seconds = obc_now_seconds() - start;
  if (tokens_per_second) *tokens_per_second = (double)n / seconds;
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
                        float *logits, double *tokens_per_second) {
  runtime_reset(rt);
  int rc = runtime_forward(rt, tokens, n_prompt, RUNTIME_LOGITS_LAST, logits, NULL);
  if (rc) return rc;
  size_t vocab = runtime_model(rt)->config.vocab_size;
  runtime_profile_reset(rt);
  double start = obc_now_seconds(), cpu_start = obc_cpu_seconds();
  for (size_t i = 0; i < steps && !rc; i++) {
    int32_t next = (int32_t)generate_argmax(logits, vocab);
    rc = runtime_forward(rt, &next, 1, RUNTIME_LOGITS_LAST, logits, NULL);
  }
  if (rc) return rc;
  double seconds = obc_now_seconds() - start, cpu = obc_cpu_seconds() - cpu_start;
  *tokens_per_second = (double)steps / seconds;
  const RuntimeProfile *p = runtime_profile(rt);
  /* CPU time: at 1 thread, less sensitive to a busy machine than the wall */
  printf(
      "decode after %zu tokens: %.1f tokens/s (%zu steps, %.2f s; %.2f s CPU)  weights %4.1f%%  "
      "attention %4.1f%%  other %4.1f%%\n",
      n_prompt, (double)steps / seconds, steps, seconds, cpu, 100 * p->gemm_seconds / seconds,
      100 * p->attention_seconds / seconds, 100 * p->other_seconds / seconds);
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

typedef struct {
  const char *path;
  size_t threads, decode_steps, decode_after, lengths[8], n_lengths;
} BenchArgs;

typedef struct {
  double decode_tps, bytes_per_token, rss_mb, hwm_mb;
  double prefill_tps[8];     /* (n_lengths) measured */
  double prefill_flops[8];   /* (n_lengths) FLOPs per token at each length */
  double decode_floor_bytes; /* bytes per decode token at the decode depth */
  size_t decode_depth;       /* mean cached positions over the decode steps */
  char held[256];
} BenchResult;

/* ---- the floor: work per token over the machine's measured rates ---- */

/* sgemm GFLOP/s of the BLAS the tool links: the best of 5 products of
 * 1024 x 1024 matrices (2.1 GFLOP each), on the current OpenMP/BLAS threads. */
static double sgemm_gflops(void) {
  enum { SIDE = 1024 };
  float *a = malloc((size_t)SIDE * SIDE * sizeof(float));
  float *b = malloc((size_t)SIDE * SIDE * sizeof(float));
  float *c = malloc((size_t)SIDE * SIDE * sizeof(float));
  double best = -1.0;
  for (size_t i = 0; a && b && c && i < (size_t)SIDE * SIDE; i++) {
    a[i] = (float)((i * 7919) % 113) / 113.0f - 0.5f;
    b[i] = (float)((i * 104729) % 127) / 127.0f - 0.5f;
  }
  for (int rep = 0; a && b && c && rep < 5; rep++) {
    double start = obc_now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, SIDE, SIDE, SIDE, 1.0f, a, SIDE, b, SIDE,
                0.0f, c, SIDE);
    double rate = 2.0 * SIDE * SIDE * (double)SIDE / (obc_now_seconds() - start) / 1e9;
    best = rate > best ? rate : best;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

/* FLOPs of one prefill token at a prompt of n tokens: 2 per weight of the
 * layer matrices (Q, K, V, O, gate, up, down), attention's 4 head_dim per
 * (head, key) over the (n + 1) / 2 keys a row sees on average, and the LM
 * head once per prefill (RUNTIME_LOGITS_LAST), shared by the n tokens. */
static double prefill_flops_per_token(const ModelConfig *c, size_t n) {
  double dim = (double)c->dim, q_dim = (double)(c->n_heads * c->head_dim);
  double kv_dim = (double)(c->n_kv_heads * c->head_dim), ffn = (double)c->ffn_dim;
  double layer_weights = dim * q_dim + 2.0 * dim * kv_dim + q_dim * dim + 3.0 * dim * ffn;
  double attention = 4.0 * (double)(c->n_heads * c->head_dim) * ((double)n + 1.0) / 2.0;
  double head = 2.0 * dim * (double)c->vocab_size / (double)n;
  return (double)c->n_layers * (2.0 * layer_weights + attention) + head;
}

/* Bytes of one decode step at depth cached positions: the weights in their
 * held type (decode_bytes) and the fp32 K and V rows of every layer. */
static double decode_bytes_at(const Model *model, double weight_bytes, size_t depth) {
  const ModelConfig *c = &model->config;
  double kv = 2.0 * (double)(c->n_layers * c->n_kv_heads * c->head_dim) * sizeof(float);
  return weight_bytes + kv * (double)depth;
}

/* One table row: the measured rate, the work per token, the floor's rate
 * (the machine's rate over that work) and the fraction of it achieved. */
static void print_floor_row(const char *phase, const char *weights, const char *at, double measured,
                            double work, const char *unit, double rate) {
  double floor_tps = rate / work;
  printf("  %-8s %-7s %-8s %12.1f %12.3f %-7s %12.1f %8.1f%%\n", phase, weights, at, measured,
         work / (unit[0] == 'G' ? 1e9 : 1e6), unit, floor_tps, 100.0 * measured / floor_tps);
}

static void print_floor_table(const BenchArgs *a, const BenchResult *results, const bool *ran,
                              const char *const *names, double gflops, double bandwidth) {
  printf(
      "\nfloor: sgemm %.1f GFLOP/s (1024^3, linked BLAS), read bandwidth %.1f GB/s, same "
      "threads\n",
      gflops, bandwidth);
  printf("  %-8s %-7s %-8s %12s %12s %-7s %12s %9s\n", "phase", "weights", "at", "tokens/s",
         "per token", "", "floor tok/s", "achieved");
  for (size_t m = 0; m < 2; m++) {
    if (!ran[m]) continue;
    const BenchResult *r = &results[m];
    for (size_t i = 0; i < a->n_lengths; i++) {
      char at[32];
      snprintf(at, sizeof at, "%zu", a->lengths[i]);
      print_floor_row("prefill", names[m], at, r->prefill_tps[i], r->prefill_flops[i], "GFLOP",
                      gflops * 1e9);
    }
    if (a->decode_steps) {
      char at[32];
      snprintf(at, sizeof at, "@%zu", r->decode_depth);
      print_floor_row("decode", names[m], at, r->decode_tps, r->decode_floor_bytes, "MB",
                      bandwidth * 1e9);
    }
  }
  printf(
      "  (prefill: FLOPs per token / sgemm rate; decode: weight + KV-cache bytes per token / "
      "read bandwidth)\n");
}

/* Seconds per call of one forced path, the best of a few repeats. */
static double time_path(const ModelMatrix *w, const float *a, float *c, size_t n,
                        CpuGemmPath path) {
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double start = obc_now_seconds();
    cpu_gemm_weight_path(c, a, w, n, 0.0f, path);
    double seconds = obc_now_seconds() - start;
    best = seconds < best ? seconds : best;
  }
  return best;
}

/* Where quant_dot (CPU_GEMM_DOT) and dequantised tiles (CPU_GEMM_TILES) cross
 * over, on layer 0's gate projection: cpu_gemm_weight takes the dot path up to
 * CPU_GEMM_DOT_MAX_ROWS rows. */
static void bench_paths(const Model *model) {
  const ModelMatrix *w = &model->weights.layers[0].w_gate;
  if (w->type == MODEL_MATRIX_F32) return;
  enum { MAX_N = 32 };
  float *a = malloc(MAX_N * w->cols * sizeof(float)), *c = malloc(MAX_N * w->rows * sizeof(float));
  if (!a || !c) {
    free(a);
    free(c);
    return;
  }
  for (size_t i = 0; i < MAX_N * w->cols; i++) a[i] = (float)((i * 7919) % 101) / 101.0f - 0.5f;
  printf("layer 0 w_gate (%zu x %zu) per call, dot | tiles (auto: dot up to n = %d):", w->rows,
         w->cols, CPU_GEMM_DOT_MAX_ROWS);
  for (size_t n = 1; n <= MAX_N; n *= 2)
    printf("  n=%zu %.2f|%.2f ms", n, 1e3 * time_path(w, a, c, n, CPU_GEMM_DOT),
           1e3 * time_path(w, a, c, n, CPU_GEMM_TILES));
  printf("\n");
  free(a);
  free(c);
}

/* Loads the model in one weights mode and runs prefill and decode. */
static int bench_mode(const BenchArgs *a, ModelWeightsMode mode, BenchResult *r) {
  size_t max_len = a->decode_after;
  for (size_t i = 0; i < a->n_lengths; i++)
    max_len = a->lengths[i] > max_len ? a->lengths[i] : max_len;
  Model *model = NULL;
  double start = obc_now_seconds();
  ModelLoadOptions load = {.weights = mode};
  int rc = model_load_with(a->path, &load, &model);
  if (rc) return rc;
  model_weights_describe(model, r->held, sizeof r->held);
  printf("\n-- weights %s --\n", r->held);
  printf("model %s: %zu layers, dim %zu, %zu/%zu heads; loaded in %.2f s\n", model->config.name,
         model->config.n_layers, model->config.dim, model->config.n_heads, model->config.n_kv_heads,
         obc_now_seconds() - start);
  r->bytes_per_token = decode_bytes(model);
  size_t vocab = model->config.vocab_size;
  RuntimeOptions options = {.max_context = max_len + a->decode_steps + 1, .threads = a->threads};
  Runtime *rt = NULL;
  int32_t *tokens = malloc(max_len * sizeof(int32_t));
  float *logits = malloc(vocab * sizeof(float));
  if (!tokens || !logits) rc = OBC_ENOMEM;
  if (!rc) rc = runtime_create(model, &options, &rt);
  if (!rc) {
    fill_tokens(tokens, max_len, vocab);
    rc = bench_prefill(rt, tokens, 64, logits, NULL); /* warm-up: page in weights and buffers */
  }
  for (size_t i = 0; i < a->n_lengths && !rc; i++) {
    rc = bench_prefill(rt, tokens, a->lengths[i], logits, &r->prefill_tps[i]);
    r->prefill_flops[i] = prefill_flops_per_token(&model->config, a->lengths[i]);
  }
  r->decode_depth = a->decode_after + a->decode_steps / 2;
  r->decode_floor_bytes = decode_bytes_at(model, r->bytes_per_token, r->decode_depth);
  if (!rc && mode == MODEL_WEIGHTS_NATIVE) bench_paths(model);
  r->decode_tps = 0.0;
  if (!rc && a->decode_steps)
    rc = bench_decode(rt, tokens, a->decode_after, a->decode_steps, logits, &r->decode_tps);
  r->rss_mb = status_mb("VmRSS");
  r->hwm_mb = status_mb("VmHWM");
  printf("RSS %.0f MB with the model and runtime alive; peak so far %.0f MB\n", r->rss_mb,
         r->hwm_mb);
  runtime_free(rt);
  model_free(model);
  free(tokens);
  free(logits);
  return rc;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  BenchArgs a = {NULL, 0, 64, 512, {512, 2048, 4096}, 3};
  const char *weights = "both";
  for (int i = 1; i < argc; i++) {
    int rc = 0;
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      rc = obc_parse_size("--threads", argv[++i], &a.threads);
    } else if (!strcmp(argv[i], "--decode") && i + 1 < argc) {
      rc = obc_parse_size("--decode", argv[++i], &a.decode_steps);
    } else if (!strcmp(argv[i], "--decode-after") && i + 1 < argc) {
      rc = obc_parse_size("--decode-after", argv[++i], &a.decode_after);
      if (!rc && !a.decode_after) rc = obc_fail(OBC_EINVAL, "--decode-after: at least 1 token");
    } else if (!strcmp(argv[i], "--lengths") && i + 1 < argc) {
      a.n_lengths = 0;
      rc = obc_parse_size_list("--lengths", argv[++i], a.lengths, &a.n_lengths, 8);
    } else if (!strcmp(argv[i], "--weights") && i + 1 < argc) {
      weights = argv[++i];
      if (strcmp(weights, "native") && strcmp(weights, "f32") && strcmp(weights, "both"))
        rc = obc_fail(OBC_EINVAL, "--weights: expected native, f32 or both, got '%s'", weights);
    } else {
      a.path = argv[i];
    }
    if (rc) {
      fprintf(stderr, "bench_model: %s\n", obc_error_message());
      return 2;
    }
  }
  if (a.threads) omp_set_num_threads((int)a.threads);
  printf("load average %.2f, OpenMP threads %d\n", load_average(),
         a.threads ? (int)a.threads : omp_get_max_threads());
  /* native first: the f32 model's pages would otherwise raise its peak RSS */
  const ModelWeightsMode modes[] = {MODEL_WEIGHTS_NATIVE, MODEL_WEIGHTS_F32};
  BenchResult results[2];
  bool ran[2] = {false, false};
  int rc = 0;
  for (size_t m = 0; m < 2 && !rc; m++) {
    if (strcmp(weights, "both") && strcmp(weights, model_weights_mode_name(modes[m]))) continue;
    rc = bench_mode(&a, modes[m], &results[m]);
    ran[m] = !rc;
  }
  if (rc) {
    fprintf(stderr, "bench_model: %s\n", obc_error_message());
    return 1;
  }
  double bandwidth = read_bandwidth(); /* last: its buffer must not count in the RSS above */
  printf("\nread bandwidth (streaming sum of 512 MB, same threads): %.1f GB/s\n", bandwidth);
  for (size_t m = 0; m < 2; m++) {
    if (!ran[m] || !a.decode_steps) continue;
    const BenchResult *r = &results[m];
    double roofline = bandwidth * 1e9 / r->bytes_per_token;
    printf(
        "decode %-6s: %6.1f tokens/s = %4.1f%% of the roofline %.1f tokens/s (%.1f MB read per "
        "token); peak RSS %.0f MB\n",
        model_weights_mode_name(modes[m]), r->decode_tps, 100.0 * r->decode_tps / roofline,
        roofline, r->bytes_per_token / 1e6, r->hwm_mb);
  }
  if (ran[0] && ran[1] && a.decode_steps)
    printf("decode native / f32: %.2fx\n", results[0].decode_tps / results[1].decode_tps);
  const char *names[2] = {model_weights_mode_name(modes[0]), model_weights_mode_name(modes[1])};
  print_floor_table(&a, results, ran, names, sgemm_gflops(), bandwidth);
  return 0;
}
