/* libFuzzer harness: a trace file as every command that takes a trace reads
 * it. The input is the whole HDF5 file. It is opened with trace_open, then
 * every dataset of every layer and head is read (K and V per KV head; Q, O,
 * lse and A per query head; both variants of the column sums; the logits),
 * the content hash is recomputed as
 * `obcache verify` does, and the reader is closed. Seeds:
 * tests/fuzz/make_seeds.py (traces of `obcache synth`). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_common.h"
#include "traces/trace.h"

/* A buffer of a * b floats, or NULL above 16M floats: a damaged trace may
 * declare shapes far beyond its bytes, and the harness would spend its time
 * in the allocator instead of in the reader. */
static float *fuzz_floats(size_t a, size_t b) {
  if (a && b > ((size_t)1 << 24) / a) return NULL;
  return calloc(a * b ? a * b : 1, sizeof(float));
}

static void read_layer(TraceReader *reader, const TraceMeta *meta, size_t layer) {
  const TraceModel *m = &meta->model;
  float *K = fuzz_floats(meta->n_positions, m->head_dim);
  float *V = fuzz_floats(meta->n_positions, m->head_dim);
  float *Q = fuzz_floats(meta->n_rows, m->head_dim);
  float *O = fuzz_floats(meta->n_rows, m->head_dim);
  float *lse = fuzz_floats(meta->n_rows, 1);
  float *A = meta->has_attn ? fuzz_floats(meta->n_rows, meta->n_positions) : NULL;
  if (K && V && Q && O && lse) {
    for (size_t h = 0; h < m->n_kv_heads; h++)
      if (trace_read_kv(reader, layer, h, K, V)) break;
    for (size_t h = 0; h < m->n_heads; h++)
      if (trace_read_rows(reader, layer, h, Q, O, lse) ||
          (A && trace_read_attn(reader, layer, h, A)))
        break;
  }
  free(K), free(V), free(Q), free(O), free(lse), free(A);
  if (!meta->has_column_sums) return;
  /* doubles: (n_heads, n_prompt) sums and three times that for OBCache's */
  double *attn = (double *)fuzz_floats(2 * m->n_heads, meta->n_prompt);
  double *obc = (double *)fuzz_floats(6 * m->n_heads, meta->n_prompt);
  int64_t *counts = (int64_t *)fuzz_floats(2, meta->n_prompt);
  for (int v = 0; attn && obc && counts && v < TRACE_ROWS_VARIANTS; v++)
    if (trace_read_column_sums(reader, layer, (TraceSumRows)v, attn, obc, counts)) break;
  free(attn), free(obc), free(counts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[8192];
  fuzz_write("trace.h5", data, size, path, sizeof path);
  TraceReader *reader;
  if (!trace_open(path, &reader)) {
    const TraceMeta *meta = trace_meta(reader);
    for (size_t layer = 0; layer < meta->model.n_layers; layer++) read_layer(reader, meta, layer);
    if (meta->has_logits) {
      float *logits = fuzz_floats(meta->n_decode, meta->model.vocab_size);
      if (logits) trace_read_logits(reader, logits);
      free(logits);
    }
    char hash[17];
    trace_compute_hash(reader, hash);
    trace_close(reader);
  }
  unlink(path);
  return 0;
}
