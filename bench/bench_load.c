/* Benchmark of model loading: dequantisation throughput per ggml type over the
 * tensors of a GGUF file (1 and all threads) and of prefill's tiles of weight
 * rows (every type, one thread), each with the portable C decoders and the
 * AVX2 ones in the same run, and the wall time of model_load as a whole
 * (mapping, dequantisation into the fp32 arena, finiteness check, tokenizer).
 * Not a test: prints figures only.
 *
 * usage: bench_load [MODEL.gguf] [repeats]   (default: the embedded model, 3) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "common/obc_time.h"
#include "formats/gguf.h"
#include "formats/quant_dot.h"
#include "model/model.h"

static double cpu_seconds(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
         (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

typedef int (*DequantFn)(uint32_t type, const void *data, float *out, size_t n);

typedef struct {
  const char *name;
  DequantFn fn;
} DequantKernel;

/* The kernels to compare: the portable C twin always, AVX2 where it runs. */
static int dequant_kernels(DequantKernel out[2]) {
  out[0] = (DequantKernel){"portable", dequant_gguf_portable};
  out[1] = (DequantKernel){"avx2", dequant_gguf_avx2};
  return quant_dot_avx2_supported() ? 2 : 1;
}

static int bench_types(const GgufFile *file, int threads, int repeats, const DequantKernel *k) {
  omp_set_num_threads(threads);
  size_t largest = 0;
  for (size_t i = 0; i < gguf_tensor_count(file); i++)
    if (gguf_tensor(file, i)->n_elements > largest) largest = gguf_tensor(file, i)->n_elements;
  float *out = malloc(largest * sizeof *out);
  if (!out) return obc_fail(OBC_ENOMEM, "out of memory");
  for (uint32_t type = 0; type < 64; type++) {
    size_t elements = 0, bytes = 0;
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
      double start = obc_now_seconds();
      elements = bytes = 0;
      for (size_t i = 0; i < gguf_tensor_count(file); i++) {
        const GgufTensor *t = gguf_tensor(file, i);
        if (t->type != type) continue;
        int rc = k->fn(t->type, t->data, out, t->n_elements);
        if (rc) {
          free(out);
          return rc;
        }
        elements += t->n_elements;
        bytes += t->n_bytes;
      }
      double seconds = obc_now_seconds() - start;
      if (seconds < best) best = seconds;
    }
    if (elements)
      printf(
          "  %-5s %-8s %d thread(s): %9.1fM values in %7.3f s = %6.0f M values/s (%5.0f MB/s "
          "read)\n",
          gguf_type_name(type), k->name, threads, elements / 1e6, best, elements / best / 1e6,
          bytes / best / 1e6);
  }
  free(out);
  return OBC_OK;
}

/* Prefill's tile (runtime/cpu_ops.c): 64 rows of SmolLM2's 576 columns. */
enum { TILE_ELEMENTS = 64 * 576, STREAM_BYTES = 64 << 20 };

/* Random quants with f16 scales of 2^-8 (real models' size; random scale
 * bits would add NaN and subnormal cases that real weights do not have). */
static void fill_weights(uint32_t type, uint8_t *w, size_t bytes) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < bytes; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    w[i] = (uint8_t)(state >> 56);
  }
  size_t block_bytes = gguf_type_block_bytes(type);
  const uint16_t small = 0x1c00, bf16_small = 0x3b80; /* 2^-8 as f16, as bf16 */
  for (size_t b = 0; b + block_bytes <= bytes; b += block_bytes) switch (type) {
      case GGML_TYPE_F16: memcpy(w + b, &small, 2); break;
      case GGML_TYPE_BF16: w[b + 1] = (uint8_t)((bf16_small >> 8) ^ (w[b + 1] & 0x80)); break;
      case GGML_TYPE_Q6_K: memcpy(w + b + 208, &small, 2); break;
      case GGML_TYPE_Q8_0:
      case GGML_TYPE_Q4_0:
      case GGML_TYPE_Q5_0: memcpy(w + b, &small, 2); break;
      default: memcpy(w + b, &small, 2), memcpy(w + b + 2, &small, 2); /* d and m/dmin */
    }
}

/* Seconds of the best of `repeats` passes dequantising STREAM_BYTES of
 * weights tile by tile into one tile buffer, as prefill does. */
static double tile_pass_seconds(DequantFn fn, uint32_t type, const uint8_t *w, size_t n_tiles,
                                float *tile, int repeats) {
  size_t tile_bytes = TILE_ELEMENTS / gguf_type_block_size(type) * gguf_type_block_bytes(type);
  double best = 1e30;
  for (int r = 0; r < repeats + 1; r++) {
    double start = obc_now_seconds();
    for (size_t t = 0; t < n_tiles; t++) fn(type, w + t * tile_bytes, tile, TILE_ELEMENTS);
    double seconds = obc_now_seconds() - start;
    if (r && seconds < best) best = seconds; /* the first pages the weights in */
  }
  return best;
}

/* Every supported type but F32 (a copy): tiles of TILE_ELEMENTS weights, one
 * thread, each kernel; GB/s of weights read and of fp32 written. */
static int bench_tiles(int repeats) {
  static const uint32_t types[] = {GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                                   GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q4_K,
                                   GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
  DequantKernel kernels[2];
  int n_kernels = dequant_kernels(kernels);
  omp_set_num_threads(1);
  printf(
      "prefill tiles of %d weights, %d MB of weights streamed per pass, 1 thread (best of "
      "%d; GB/s read -> written)\n",
      TILE_ELEMENTS, STREAM_BYTES >> 20, repeats);
  float *tile = aligned_alloc(64, TILE_ELEMENTS * sizeof *tile);
  if (!tile) return obc_fail(OBC_ENOMEM, "out of memory");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    uint32_t type = types[i];
    size_t tile_bytes = TILE_ELEMENTS / gguf_type_block_size(type) * gguf_type_block_bytes(type);
    size_t n_tiles = STREAM_BYTES / tile_bytes;
    uint8_t *w = malloc(n_tiles * tile_bytes);
    if (!w) {
      free(tile);
      return obc_fail(OBC_ENOMEM, "out of memory");
    }
    fill_weights(type, w, n_tiles * tile_bytes);
    double seconds[2];
    printf("  %-5s", gguf_type_name(type));
    for (int k = 0; k < n_kernels; k++) {
      seconds[k] = tile_pass_seconds(kernels[k].fn, type, w, n_tiles, tile, repeats);
      double values = (double)n_tiles * TILE_ELEMENTS;
      printf("  %-8s %6.0f M values/s (%5.2f -> %5.2f GB/s)", kernels[k].name,
             values / seconds[k] / 1e6, n_tiles * tile_bytes / seconds[k] / 1e9,
             values * 4 / seconds[k] / 1e9);
    }
    if (n_kernels == 2) printf("  avx2 %.1fx", seconds[0] / seconds[1]);
    printf("\n");
    free(w);
  }
  free(tile);
  return OBC_OK;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  const char *path = argc > 1 ? argv[1] : model_default_path();
  int repeats = argc > 2 ? atoi(argv[2]) : 3;
  if (repeats < 1) repeats = 1;
  GgufFile *file;
  int rc = gguf_open(path, &file);
  if (rc) {
    fprintf(stderr, "bench_load: %s\n", obc_error_message());
    return 1;
  }
  int max_threads = omp_get_max_threads();
  DequantKernel kernels[2];
  int n_kernels = dequant_kernels(kernels);
  printf("dequantisation of %s (best of %d; dequant_gguf runs %s)\n", path, repeats,
         quant_dot_kernel_name());
  for (int threads = 1; threads <= max_threads && !rc;
       threads = threads == max_threads ? threads + 1 : max_threads)
    for (int k = 0; k < n_kernels && !rc; k++)
      rc = bench_types(file, threads, repeats, &kernels[k]);
  gguf_close(file);
  if (!rc) rc = bench_tiles(repeats);
  omp_set_num_threads(max_threads);
  for (int r = 0; r < repeats && !rc; r++) {
    double start = obc_now_seconds(), cpu = cpu_seconds();
    Model *model;
    rc = model_load(path, &model);
    if (rc) break;
    printf("model_load (%d threads): %.3f s wall, %.3f s CPU\n", max_threads,
           obc_now_seconds() - start, cpu_seconds() - cpu);
    model_free(model);
  }
  if (rc) {
    fprintf(stderr, "bench_load: %s\n", obc_error_message());
    return 1;
  }
  return 0;
}
