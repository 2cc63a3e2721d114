/* Times score_window_sweep on one SmolLM2-shaped KV head: group 3, head_dim
 * 64, a prompt of 8192 tokens, the last 128 prompt rows captured, windows
 * 1, 2, 4, ..., 128, in FLOAT and DOUBLE, with 1 and 2 OpenMP threads; and
 * oracle_eviction_error for one decode step.
 *
 * Usage: bench_scores [n_prompt] [rows] [repeats]. Prints the best of
 * `repeats` runs in milliseconds (wall clock, and CPU time summed over threads:
 * the honest figure on a shared machine) and checks that 1 and 2 threads agree. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/obc_startup.h"
#include "scores/scores.h"
#include "common/obc_error.h"
#include "oracle/oracle.h"
#include "tests/fixture_attention.h"

static double now_seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  size_t s = argc > 1 ? strtoul(argv[1], NULL, 10) : 8192;
  size_t rows = argc > 2 ? strtoul(argv[2], NULL, 10) : 128;
  int repeats = argc > 3 ? atoi(argv[3]) : 5;
  size_t group = 3, d = 64;
  FixtureProblem t;
  fixture_make(&t, 2025, s, 1, d, group, rows);
  size_t windows[32], n_windows = 0;
  for (size_t w = 1; w <= rows; w *= 2) windows[n_windows++] = w;
  if (windows[n_windows - 1] != rows) windows[n_windows++] = rows;
  size_t n_out = n_windows * OBC_Q_COUNT * s;
  double *out[2] = {malloc(n_out * sizeof(double)), malloc(n_out * sizeof(double))};
  printf("score_window_sweep: group %zu, d %zu, s %zu, %zu rows, %zu windows (1..%zu)\n", group, d,
         s, rows, n_windows, rows);
  for (int precision = 0; precision < 2; precision++) {
    ScoreOptions options;
    score_options_default(&options);
    options.precision = precision;
    for (int threads = 1; threads <= 2; threads++) {
      omp_set_num_threads(threads);
      double best = 1e30, best_cpu = 1e30;
      for (int r = 0; r < repeats + 1; r++) {
        double t0 = now_seconds(CLOCK_MONOTONIC), c0 = now_seconds(CLOCK_PROCESS_CPUTIME_ID);
        if (score_window_sweep(&t.head, windows, n_windows, &options, out[threads - 1])) {
          fprintf(stderr, "bench_scores: %s\n", obc_error_message());
          return EXIT_FAILURE;
        }
        double elapsed = now_seconds(CLOCK_MONOTONIC) - t0;
        double cpu = now_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (r > 0 && elapsed < best) best = elapsed; /* r = 0 warms up */
        if (r > 0 && cpu < best_cpu) best_cpu = cpu;
      }
      printf(
          "  %-6s %d thread%s: %8.2f ms wall, %8.2f ms CPU (%.2f ns CPU per (row, token, head))\n",
          precision == OBC_PRECISION_DOUBLE ? "double" : "float", threads, threads > 1 ? "s" : " ",
          1e3 * best, 1e3 * best_cpu, 1e9 * best_cpu / ((double)rows * s * group));
    }
    /* oracle@1 (one decode row), what the analysis adds per head. */
    double *oracle = malloc(s * sizeof *oracle), best_oracle = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
      double t0 = now_seconds(CLOCK_PROCESS_CPUTIME_ID);
      if (oracle_eviction_error(&t.head, 1, 1, precision, oracle)) {
        fprintf(stderr, "bench_scores: %s\n", obc_error_message());
        return EXIT_FAILURE;
      }
      double cpu = now_seconds(CLOCK_PROCESS_CPUTIME_ID) - t0;
      if (r > 0 && cpu < best_oracle) best_oracle = cpu;
    }
    free(oracle);
    printf("  %-6s oracle@1 (2 threads): %.2f ms CPU\n",
           precision == OBC_PRECISION_DOUBLE ? "double" : "float", 1e3 * best_oracle);
    printf("  %-6s 1 and 2 threads bit-identical: %s\n",
           precision == OBC_PRECISION_DOUBLE ? "double" : "float",
           memcmp(out[0], out[1], n_out * sizeof(double)) == 0 ? "yes" : "NO");
  }
  free(out[0]);
  free(out[1]);
  fixture_free(&t);
  return EXIT_SUCCESS;
}
