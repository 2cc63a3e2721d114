/* The floor of `obcache analyze` on one trace shape (bench/run_analyze.sh):
 * the FLOPs of the products the analysis cannot do without (q.k and o.v of
 * every window row and every decode row the oracles use, against every key:
 * docs/SCIENCE.md, "Cost of the analysis"), timed as sgemm calls of the
 * shapes the analyser issues (scores/scores.c: chunks of 64 rows against
 * 1024-key slabs; oracle/oracle.c: the decode rows against 512-key slabs),
 * plus reading the trace file at the speed measured here (page cache warm).
 *
 * usage: bench_analyze_floor TRACE QUERY_HEADS N_PROMPT N_POSITIONS HEAD_DIM
 *        WINDOW_ROWS DECODE_ROWS [REPEATS]
 * prints one line of key=value figures: flops, sgemm_gflops, sgemm_s,
 * read_bytes, read_gbs, read_s, floor_s (best wall times), and
 * sgemm_cpu_gflops, floor_cpu_s (the same with CPU time). */
#include <cblas.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/obc_startup.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the process (all threads): on a shared machine the wall time
 * also measures the other users' load. */
static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One query head's products: rows in chunks of `chunk` (the latest first, each
 * against keys 0..top as the sweep does) and keys in slabs of `slab`; two
 * products per call (q.k and o.v). Returns the FLOPs done. */
static double head_products(const float *Q, const float *K, float *C, size_t rows, size_t s,
                            size_t d, size_t chunk, size_t slab, int causal) {
  double flops = 0.0;
  for (size_t c0 = 0; c0 < rows; c0 += chunk) {
    size_t n = rows - c0 < chunk ? rows - c0 : chunk;
    size_t n_keys = causal ? s - c0 : s;
    for (size_t k0 = 0; k0 < n_keys; k0 += slab) {
      size_t nk = n_keys - k0 < slab ? n_keys - k0 : slab;
      for (int product = 0; product < 2; product++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)nk, (int)d, 1.0f,
                    Q + c0 * d, (int)d, K + k0 * d, (int)d, 0.0f, C + k0, (int)s);
      flops += 2.0 * 2.0 * (double)n * (double)nk * (double)d;
    }
  }
  return flops;
}

/* Seconds to read the file once (best of `repeats`), and its size. */
static double read_seconds(const char *path, int repeats, double *bytes) {
  size_t size = 4u << 20;
  char *buffer = malloc(size);
  double best = 1e30;
  for (int r = 0; r < repeats && buffer; r++) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) break;
    double t0 = now_seconds(), total = 0.0;
    ssize_t got;
    while ((got = read(fd, buffer, size)) > 0) total += (double)got;
    double t = now_seconds() - t0;
    close(fd);
    *bytes = total;
    best = t < best ? t : best;
  }
  free(buffer);
  return best;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  if (argc < 8) {
    fprintf(stderr,
            "usage: bench_analyze_floor TRACE QUERY_HEADS N_PROMPT N_POSITIONS HEAD_DIM "
            "WINDOW_ROWS DECODE_ROWS [REPEATS]\n");
    return EXIT_FAILURE;
  }
  const char *path = argv[1];
  size_t heads = strtoul(argv[2], NULL, 10), s = strtoul(argv[3], NULL, 10);
  size_t n_pos = strtoul(argv[4], NULL, 10), d = strtoul(argv[5], NULL, 10);
  size_t window = strtoul(argv[6], NULL, 10), decode = strtoul(argv[7], NULL, 10);
  int repeats = argc > 8 ? atoi(argv[8]) : 3;
  size_t rows = window > decode ? window : decode;
  float *Q = malloc(rows * d * sizeof *Q), *K = malloc(n_pos * d * sizeof *K);
  float *C = malloc(64 * n_pos * sizeof *C);
  if (!Q || !K || !C) return EXIT_FAILURE;
  for (size_t i = 0; i < rows * d; i++) Q[i] = (float)((i * 7919 % 1000) / 1000.0 - 0.5);
  for (size_t i = 0; i < n_pos * d; i++) K[i] = (float)((i * 104729 % 1000) / 1000.0 - 0.5);
  /* Time a sample of heads (all of them when few) and scale: the rate is the
   * same for every head. */
  size_t sample = heads < 30 ? heads : 30;
  double best = 1e30, best_cpu = 1e30, flops_sample = 0.0;
  for (int r = 0; r < repeats; r++) {
    double t0 = now_seconds(), c0 = cpu_seconds(), flops = 0.0;
    for (size_t h = 0; h < sample; h++) {
      flops += head_products(Q, K, C, window, s, d, 64, 1024, 1);
      if (decode) flops += head_products(Q, K, C, decode, n_pos, d, 64, 512, 0);
    }
    double t = now_seconds() - t0, c = cpu_seconds() - c0;
    best = t < best ? t : best;
    best_cpu = c < best_cpu ? c : best_cpu;
    flops_sample = flops;
  }
  double gflops = flops_sample / best * 1e-9, gflops_cpu = flops_sample / best_cpu * 1e-9;
  double flops = flops_sample * (double)heads / (double)sample;
  double bytes = 0.0, t_read = read_seconds(path, repeats, &bytes);
  double sgemm_s = flops / (gflops * 1e9), read_gbs = bytes / t_read * 1e-9;
  double sgemm_cpu_s = flops / (gflops_cpu * 1e9);
  printf(
      "flops=%.4g sgemm_gflops=%.1f sgemm_s=%.3f read_bytes=%.4g read_gbs=%.2f read_s=%.3f "
      "floor_s=%.3f sgemm_cpu_gflops=%.1f floor_cpu_s=%.3f\n",
      flops, gflops, sgemm_s, bytes, read_gbs, t_read, sgemm_s + t_read, gflops_cpu,
      sgemm_cpu_s + t_read);
  free(Q), free(K), free(C);
  return EXIT_SUCCESS;
}
