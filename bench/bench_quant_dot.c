/* Benchmark of the quantised dot products (formats/quant_dot.h): one decode
 * step's matrix-vector products over a model-shaped set of weight matrices,
 * per ggml type, for 1 and 16 vectors (decode, and the most the runtime
 * passes at once), every kernel this processor runs (portable twin, AVX2,
 * AVX-512), single-threaded. Prints GB/s of weight bytes streamed, GFLOP/s,
 * and the share of this machine's read bandwidth, measured in the same run by
 * summing a large array; each kernel's speed-up over the one before it.
 * Every time is CPU time (obc_cpu_seconds: one thread, so this thread's): on
 * a shared machine the wall clock also measures the other users. Not a test:
 * figures only. *
 * usage: bench_quant_dot [smol|8b|all] [repeats] [TYPE,TYPE,...]
 *   smol: SmolLM2-135M (30 layers of 576/1536 columns, about 106M weights)
 *   8b:   one Llama-3.1-8B layer (4096x4096, 14336x4096, 4096x14336 ...),
 *         skipped for a type whose matrices would take over half the free memory
 *   default: all 3 (best of 3 passes), every type */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_startup.h"
#include "common/obc_time.h"
#include "formats/gguf.h"
#include "formats/quant_dot.h"
#include "runtime/cpu_ops.h"

/* Vectors of the batched figure: the most runtime/cpu_ops.c passes at once. */
enum { MAX_X = CPU_GEMM_DOT_MAX_ROWS };

typedef struct {
  const char *name;
  size_t rows, cols, count; /* count matrices of rows x cols */
} MatrixShape;

/* One SmolLM2-135M decoder layer (hidden 576, 3 KV heads of 64, MLP 1536) times
 * 30, and one Llama-3.1-8B layer (hidden 4096, 8 KV heads of 128, MLP 14336). */
static const MatrixShape SMOL[] = {{"q,o", 576, 576, 2 * 30},
                                   {"k,v", 192, 576, 2 * 30},
                                   {"gate,up", 1536, 576, 2 * 30},
                                   {"down", 576, 1536, 30}};
static const MatrixShape LLAMA8B[] = {{"q,o", 4096, 4096, 2},
                                      {"k,v", 1024, 4096, 2},
                                      {"gate,up", 14336, 4096, 2},
                                      {"down", 4096, 14336, 1}};

static const uint32_t TYPES[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                                 GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                 GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

static uint64_t rng = 88172645463325252ull;
static uint64_t next_random(void) { /* xorshift64 */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Random bytes with every f16 scale of the type set to a small normal value,
 * so no kernel meets an infinity or NaN (speed does not depend on values). */
static void fill_matrix(uint32_t type, uint8_t *w, size_t bytes) {
  size_t block_bytes = gguf_type_block_bytes(type);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v = next_random();
    memcpy(w + i, &v, 8);
  }
  uint16_t small = 0x1c00; /* 2^-8 as f16 */
  for (size_t b = 0; b + block_bytes <= bytes; b += block_bytes) {
    switch (type) {
      case GGML_TYPE_F32: memcpy(w + b, &(float){0.01f}, 4); break;
      case GGML_TYPE_F16:
      case GGML_TYPE_BF16:
        memcpy(w + b, type == GGML_TYPE_F16 ? &small : &(uint16_t){0x3c00}, 2);
        break;
      case GGML_TYPE_Q6_K: memcpy(w + b + 208, &small, 2); break;
      case GGML_TYPE_Q8_0:
      case GGML_TYPE_Q4_0:
      case GGML_TYPE_Q5_0: memcpy(w + b, &small, 2); break;
      default: memcpy(w + b, &small, 2), memcpy(w + b + 2, &small, 2); /* d and m/dmin */
    }
  }
}

/* Seconds of one sum over a (n words), with a software prefetch `ahead` bytes
 * in front when ahead > 0 (as the AVX2 kernels do). */
static double sum_seconds(const uint64_t *a, size_t n, size_t ahead) {
  static volatile uint64_t sink;
  double start = obc_cpu_seconds();
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < n; i += 8) {
    if (ahead) __builtin_prefetch((const char *)(a + i) + ahead);
    s0 += a[i] + a[i + 4], s1 += a[i + 1] + a[i + 5], s2 += a[i + 2] + a[i + 6];
    s3 += a[i + 3] + a[i + 7];
  }
  sink += s0 + s1 + s2 + s3;
  return obc_cpu_seconds() - start;
}

/* Bytes per second of a single-threaded sum over a 1 GiB array, best of 3
 * passes without and 3 with a software prefetch: the read bandwidth the
 * decode kernels are held against (their roofline). */
static double read_bandwidth(void) {
  size_t n = (size_t)1 << 27; /* uint64 words: 1 GiB */
  uint64_t *a = malloc(n * sizeof *a);
  if (!a) return 0.0;
  for (size_t i = 0; i < n; i++) a[i] = i;
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < 6; r++) {
    double t = sum_seconds(a, n, r % 2 ? 2048 : 0);
    if (t < best[r % 2]) best[r % 2] = t;
  }
  free(a);
  double bytes = (double)(n * sizeof(uint64_t));
  printf(
      "read bandwidth (sum of a 1 GiB array, 1 thread): %.2f GB/s plain, %.2f GB/s with a "
      "software prefetch; the better is the roofline below\n",
      bytes / best[0] / 1e9, bytes / best[1] / 1e9);
  return bytes / (best[0] < best[1] ? best[0] : best[1]);
}

typedef struct {
  const MatrixShape *shapes;
  size_t n_shapes;
  uint8_t **w; /* one buffer per shape: count matrices back to back */
  size_t bytes, weights;
} MatrixSet;

static size_t row_bytes_of(uint32_t type, size_t cols) {
  return cols / gguf_type_block_size(type) * gguf_type_block_bytes(type);
}

/* One decode step: every matrix of the set against n_x vectors. */
static void step(const MatrixSet *set, uint32_t type, QuantDotFn fn, const float *x, size_t n_x,
                 float *y) {
  for (size_t s = 0; s < set->n_shapes; s++) {
    const MatrixShape *m = &set->shapes[s];
    size_t row_bytes = row_bytes_of(type, m->cols), matrix_bytes = m->rows * row_bytes;
    for (size_t k = 0; k < m->count; k++)
      fn(type, set->w[s] + k * matrix_bytes, row_bytes, m->cols, m->rows, x, n_x, y, m->rows);
  }
}

static double step_seconds(const MatrixSet *set, uint32_t type, QuantDotFn fn, const float *x,
                           size_t n_x, float *y) {
  double start = obc_cpu_seconds();
  step(set, type, fn, x, n_x, y);
  return obc_cpu_seconds() - start;
}

/* seconds[k][v]: the best of `repeats` steps of kernel k (NULL: skipped, 0)
 * with 1 (v = 0) and MAX_X vectors, the kernels and vector counts in turns so
 * that a change in the machine's load touches them all alike. */
static void best_seconds(const MatrixSet *set, uint32_t type, const float *x, float *y, int repeats,
                         double seconds[QUANT_SIMD_COUNT][2]) {
  for (QuantSimd k = 0; k < QUANT_SIMD_COUNT; k++)
    for (int v = 0; v < 2; v++) {
      seconds[k][v] = 0.0;
      if (!quant_dot_kernel(k)) continue;
      step(set, type, quant_dot_kernel(k), x, v ? MAX_X : 1, y); /* warm-up: page faults */
      seconds[k][v] = 1e30;
    }
  for (int r = 0; r < repeats; r++)
    for (QuantSimd k = 0; k < QUANT_SIMD_COUNT; k++)
      for (int v = 0; v < 2; v++) {
        if (!quant_dot_kernel(k)) continue;
        double t = step_seconds(set, type, quant_dot_kernel(k), x, v ? MAX_X : 1, y);
        if (t < seconds[k][v]) seconds[k][v] = t;
      }
}

/* GB/s of the kernel, one vector, on the first rows (up to 256 KiB) of the
 * set's first matrix, read again and again from the L2 cache: its compute
 * ceiling, which says whether the streaming figure is bound by memory. */
static double cached_gbs(const MatrixSet *set, uint32_t type, QuantDotFn fn, const float *x,
                         float *y) {
  const MatrixShape *m = &set->shapes[0];
  size_t row_bytes = row_bytes_of(type, m->cols), rows = (256u << 10) / row_bytes;
  if (rows > m->rows) rows = m->rows;
  if (rows == 0) rows = 1;
  size_t passes = ((size_t)64 << 20) / (rows * row_bytes) + 1; /* 64 MiB per timing */
  double best = 1e30;
  for (int r = 0; r < 4; r++) {
    double start = obc_cpu_seconds();
    for (size_t p = 0; p < passes; p++)
      fn(type, set->w[0], row_bytes, m->cols, rows, x, 1, y, rows);
    double t = obc_cpu_seconds() - start;
    if (r && t < best) best = t; /* the first warms the cache */
  }
  return (double)(passes * rows * row_bytes) / best / 1e9;
}

static int make_set(const MatrixShape *shapes, size_t n_shapes, uint32_t type, MatrixSet *set) {
  *set = (MatrixSet){shapes, n_shapes, calloc(n_shapes, sizeof(uint8_t *)), 0, 0};
  if (!set->w) return -1;
  for (size_t s = 0; s < n_shapes; s++) {
    size_t bytes = shapes[s].count * shapes[s].rows * row_bytes_of(type, shapes[s].cols);
    set->w[s] = malloc(bytes);
    if (!set->w[s]) return -1;
    fill_matrix(type, set->w[s], bytes);
    set->bytes += bytes;
    set->weights += shapes[s].count * shapes[s].rows * shapes[s].cols;
  }
  return 0;
}

static void free_set(MatrixSet *set) {
  for (size_t s = 0; set->w && s < set->n_shapes; s++) free(set->w[s]);
  free(set->w);
}

static int wanted(const char *list, uint32_t type) {
  if (!list) return 1;
  const char *name = gguf_type_name(type), *p = list;
  size_t len = strlen(name);
  while ((p = strstr(p, name))) {
    if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')) return 1;
    p += len;
  }
  return 0;
}

static void bench_set(const char *title, const MatrixShape *shapes, size_t n_shapes,
                      double bandwidth, int repeats, const char *types) {
  size_t max_cols = 0, max_rows = 0;
  for (size_t s = 0; s < n_shapes; s++) {
    if (shapes[s].cols > max_cols) max_cols = shapes[s].cols;
    if (shapes[s].rows > max_rows) max_rows = shapes[s].rows;
  }
  float *x = malloc(MAX_X * max_cols * sizeof *x), *y = malloc(MAX_X * max_rows * sizeof *y);
  if (!x || !y) {
    fprintf(stderr, "bench_quant_dot: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < MAX_X * max_cols; i++) x[i] = (float)(next_random() % 2001) * 1e-3f - 1.0f;
  double free_bytes = (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  printf("\n%s\n%-5s %8s | %-31s | %-31s | %s\n", title, "type", "MB",
         "n_x = 1: GB/s (roofline), GFLOP/s", "n_x = 16: GB/s (roofline), GFLOP/s",
         "x previous n_x=1, n_x=16 | GB/s n_x=1 in L2");
  for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
    uint32_t type = TYPES[t];
    if (!wanted(types, type)) continue;
    size_t bytes = 0, odd_cols = 0;
    for (size_t s = 0; s < n_shapes; s++)
      if (shapes[s].cols % gguf_type_block_size(type)) odd_cols = shapes[s].cols;
    if (odd_cols) { /* as in real files, which store such matrices in another type */
      printf("%-5s      n/a | %zu columns are not a multiple of the %zu-element block\n",
             gguf_type_name(type), odd_cols, gguf_type_block_size(type));
      continue;
    }
    for (size_t s = 0; s < n_shapes; s++)
      bytes += shapes[s].count * shapes[s].rows * row_bytes_of(type, shapes[s].cols);
    if ((double)bytes > 0.5 * free_bytes) {
      printf("%-5s %8.1f | skipped: over half the free memory (%.0f MB)\n", gguf_type_name(type),
             bytes / 1e6, free_bytes / 1e6);
      continue;
    }
    MatrixSet set;
    if (make_set(shapes, n_shapes, type, &set)) {
      free_set(&set);
      printf("%-5s skipped: out of memory\n", gguf_type_name(type));
      continue;
    }
    double seconds[QUANT_SIMD_COUNT][2]; /* [kernel][n_x: 1, MAX_X] */
    best_seconds(&set, type, x, y, repeats, seconds);
    int previous = -1;
    for (QuantSimd k = 0; k < QUANT_SIMD_COUNT; k++) {
      if (!quant_dot_kernel(k)) continue;
      printf("%-5s %8.1f |", k ? "" : gguf_type_name(type), set.bytes / 1e6);
      for (int v = 0; v < 2; v++) {
        double gbs = set.bytes / seconds[k][v] / 1e9;
        double gflops = 2.0 * set.weights * (v ? MAX_X : 1) / seconds[k][v] / 1e9;
        printf(" %-8s %6.2f (%3.0f%%) %7.2f |", quant_dot_simd_name(k), gbs,
               100.0 * set.bytes / seconds[k][v] / bandwidth, gflops);
      }
      if (previous >= 0)
        printf(" %5.2fx %5.2fx", seconds[previous][0] / seconds[k][0],
               seconds[previous][1] / seconds[k][1]);
      else
        printf(" %13s", "");
      printf(" | %6.2f\n", cached_gbs(&set, type, quant_dot_kernel(k), x, y));
      previous = (int)k;
    }
    free_set(&set);
  }
  free(x);
  free(y);
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  const char *which = argc > 1 ? argv[1] : "all";
  int repeats = argc > 2 ? atoi(argv[2]) : 3;
  const char *types = argc > 3 ? argv[3] : NULL;
  if (repeats < 1) repeats = 1;
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line as it comes, also into a file */
  if (strcmp(which, "all") && strcmp(which, "smol") && strcmp(which, "8b")) {
    fprintf(stderr, "bench_quant_dot: unknown set '%s' (smol, 8b or all)\n", which);
    return 2;
  }
  printf("quantised dot products, 1 thread, best of %d; kernel chosen here: %s\n", repeats,
         quant_dot_kernel_name());
  double bandwidth = read_bandwidth();
  if (strcmp(which, "8b"))
    bench_set("SmolLM2-135M: 30 layers x (q,k,v,o 576 cols; gate,up 576; down 1536 cols)", SMOL, 4,
              bandwidth, repeats, types);
  if (strcmp(which, "smol"))
    bench_set("Llama-3.1-8B: one layer (4096x4096 x2, 1024x4096 x2, 14336x4096 x2, 4096x14336)",
              LLAMA8B, 4, bandwidth, repeats, types);
  return 0;
}
