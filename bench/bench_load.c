/* Benchmark of model loading: dequantisation throughput per ggml type over the
 * tensors of a GGUF file (1 and all threads), and the wall time of model_load
 * as a whole (mapping, dequantisation into the fp32 arena, finiteness check,
 * tokenizer). Not a test: prints figures only.
 *
 * usage: bench_load [MODEL.gguf] [repeats]   (default: the embedded model, 3) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "formats/gguf.h"
#include "model/model.h"

static double cpu_seconds(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 +
         (double)usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

static int bench_types(const GgufFile *file, int threads, int repeats) {
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
        int rc = gguf_tensor_to_f32(file, t, out);
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
      printf("  %-5s %d thread(s): %9.1fM values in %7.3f s = %6.0f M values/s (%5.0f MB/s read)\n",
             gguf_type_name(type), threads, elements / 1e6, best, elements / best / 1e6,
             bytes / best / 1e6);
  }
  free(out);
  return 0;
}

int main(int argc, char **argv) {
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
  printf("dequantisation of %s (best of %d)\n", path, repeats);
  for (int threads = 1; threads <= max_threads && !rc;
       threads = threads == max_threads ? threads + 1 : max_threads)
    rc = bench_types(file, threads, repeats);
  gguf_close(file);
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
