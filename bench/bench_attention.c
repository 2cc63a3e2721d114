/* Benchmark of the CPU attention of one layer (runtime/cpu_attention.h): the
 * tiled online-softmax pass against the former two-pass form
 * (cpu_attention_two_pass) in the same run, on SmolLM2-135M's shape (9 query
 * heads, 3 KV heads, head_dim 64) with random Q/K/V. Prefill of L tokens runs
 * as the runtime does, in chunks of 512 queries; decode is one query after L
 * cached keys. Prints the best of R runs: milliseconds, the non-GEMM part over
 * the GEMM part (attention minus its sgemm, over its sgemm) and GFLOP/s of the
 * causal Q K^T and P V products; the speed-up of the fused pass by wall time
 * and by CPU time of the process (the better figure on a busy machine).
 * Run: cmake --build B --target bench_attention && B/bench/bench_attention
 *      [--threads 1,2] [--lengths 512,2048,4096] [--runs 5] */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "common/obc_startup.h"
#include "common/obc_time.h"
#include "runtime/cpu_attention.h"

enum { HEADS = 9, KV_HEADS = 3, HEAD_DIM = 64, CHUNK = 512 };

typedef int (*AttentionFn)(const CpuAttentionShape *, const float *, const float *, const float *,
                           float *, float *, const CpuAttentionRows *, double *);

typedef struct {
  float *q, *k, *v, *out, *lse; /* sized for the longest length */
  size_t max_keys;
} Buffers;

typedef struct {
  double seconds, gemm_seconds; /* wall clock */
  double cpu_seconds;           /* CPU time of the process: less sensitive to a busy machine */
} Timing;

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fill_random(float *x, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i++) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = (float)((double)(*state >> 40) / 16777216.0) - 0.5f;
  }
}

/* Queries [pos0, pos0 + n) of one layer, in chunks of CHUNK as the runtime. */
static int run_once(AttentionFn fn, const Buffers *b, size_t pos0, size_t n, Timing *t) {
  double start = obc_now_seconds(), cpu_start = cpu_now(), gemm = 0.0;
  for (size_t c = pos0; c < pos0 + n; c += CHUNK) {
    size_t count = pos0 + n - c < CHUNK ? pos0 + n - c : CHUNK;
    CpuAttentionShape shape = {.n_heads = HEADS,
                               .n_kv_heads = KV_HEADS,
                               .head_dim = HEAD_DIM,
                               .kv_stride = b->max_keys,
                               .pos0 = c,
                               .n = count};
    int rc = fn(&shape, b->q, b->k, b->v, b->out, b->lse, NULL, &gemm);
    if (rc) return rc;
  }
  t->seconds = obc_now_seconds() - start;
  t->cpu_seconds = cpu_now() - cpu_start;
  t->gemm_seconds = gemm;
  return 0;
}

/* Best of `runs`: the run of least wall time, and the least CPU time. */
static int run_best(AttentionFn fn, const Buffers *b, size_t pos0, size_t n, size_t runs,
                    Timing *best) {
  *best = (Timing){1e30, 0.0, 1e30};
  for (size_t r = 0; r < runs; r++) {
    Timing t;
    int rc = run_once(fn, b, pos0, n, &t);
    if (rc) return rc;
    double cpu = t.cpu_seconds < best->cpu_seconds ? t.cpu_seconds : best->cpu_seconds;
    if (t.seconds < best->seconds) *best = t;
    best->cpu_seconds = cpu;
  }
  return 0;
}

static int bench_case(const char *what, const Buffers *b, size_t pos0, size_t n, size_t runs) {
  Timing fused, two;
  int rc = run_best(cpu_attention, b, pos0, n, runs, &fused);
  if (!rc) rc = run_best(cpu_attention_two_pass, b, pos0, n, runs, &two);
  if (rc) return rc;
  /* causal (query, key) pairs, 2 * head_dim flops each in Q K^T and in P V */
  double pairs = (double)n * (double)pos0 + (double)n * (double)(n + 1) / 2.0;
  double flops = pairs * HEADS * 4.0 * HEAD_DIM;
  printf("%-15s %9.2f %8.2f %7.1f   %9.2f %8.2f %7.1f   %6.2fx %6.2fx\n", what, 1e3 * fused.seconds,
         (fused.seconds - fused.gemm_seconds) / fused.gemm_seconds, flops / fused.seconds / 1e9,
         1e3 * two.seconds, (two.seconds - two.gemm_seconds) / two.gemm_seconds,
         flops / two.seconds / 1e9, two.seconds / fused.seconds,
         two.cpu_seconds / fused.cpu_seconds);
  return 0;
}

static int parse_list(const char *name, const char *text, size_t *out, size_t cap, size_t *n) {
  *n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    if (*n == cap)
      return obc_fail(OBC_EINVAL, "bench_attention: %s: at most %zu values", name, cap);
    int rc = obc_parse_size(name, tok, &out[(*n)++]);
    if (rc) return rc;
  }
  return *n ? 0 : obc_fail(OBC_EINVAL, "bench_attention: %s: empty list", name);
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  size_t threads[4] = {1, 2}, n_threads = 2, lengths[8] = {512, 2048, 4096}, n_lengths = 3;
  size_t runs = 5;
  for (int i = 1; i < argc; i++) {
    int rc;
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      rc = parse_list("--threads", argv[++i], threads, 4, &n_threads);
    else if (!strcmp(argv[i], "--lengths") && i + 1 < argc)
      rc = parse_list("--lengths", argv[++i], lengths, 8, &n_lengths);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      rc = obc_parse_size("--runs", argv[++i], &runs);
    else
      rc = obc_fail(OBC_EINVAL, "bench_attention: unknown argument %s", argv[i]);
    if (rc) return EXIT_FAILURE;
  }
  Buffers b = {.max_keys = 1};
  for (size_t i = 0; i < n_lengths; i++)
    if (lengths[i] + 1 > b.max_keys) b.max_keys = lengths[i] + 1;
  size_t q_size = (size_t)CHUNK * HEADS * HEAD_DIM, kv_size = KV_HEADS * b.max_keys * HEAD_DIM;
  b.q = malloc(q_size * sizeof(float));
  b.out = malloc(q_size * sizeof(float));
  b.lse = malloc((size_t)HEADS * CHUNK * sizeof(float));
  b.k = malloc(kv_size * sizeof(float));
  b.v = malloc(kv_size * sizeof(float));
  if (!b.q || !b.out || !b.lse || !b.k || !b.v) {
    fprintf(stderr, "bench_attention: out of memory\n");
    return EXIT_FAILURE;
  }
  uint64_t state = 7;
  fill_random(b.q, q_size, &state);
  fill_random(b.k, kv_size, &state);
  fill_random(b.v, kv_size, &state);

  int rc = 0;
  for (size_t t = 0; t < n_threads && !rc; t++) {
    omp_set_num_threads((int)threads[t]);
    printf("\nattention of one layer, %d/%d heads, head_dim %d, %zu thread(s), best of %zu\n",
           HEADS, KV_HEADS, HEAD_DIM, threads[t], runs);
    printf("%-15s %9s %8s %7s   %9s %8s %7s   %7s %7s\n", "", "fused ms", "non/GEMM", "GFLOP/s",
           "2-pass ms", "non/GEMM", "GFLOP/s", "speedup", "by CPU");
    for (size_t i = 0; i < n_lengths && !rc; i++) {
      char what[64];
      snprintf(what, sizeof what, "prefill %zu", lengths[i]);
      rc = bench_case(what, &b, 0, lengths[i], runs);
    }
    for (size_t i = 0; i < n_lengths && !rc; i++) {
      char what[64];
      snprintf(what, sizeof what, "decode at %zu", lengths[i]);
      rc = bench_case(what, &b, lengths[i], 1, runs * 20);
    }
  }
  free(b.q);
  free(b.out);
  free(b.lse);
  free(b.k);
  free(b.v);
  return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
