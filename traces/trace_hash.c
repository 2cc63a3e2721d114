/* The content hash of a trace (see trace_hash.h and traces/SCHEMA.md
 * "Content hash"): FNV-1a 64 over the stored bytes of each slab, then over a
 * text manifest that lists the shape, the small datasets and every slab hash
 * in a fixed order. FNV-1a is not cryptographic: the hash tells traces apart
 * and catches damage, it does not resist forgery. */
#include "traces/trace_hash.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Stored bytes are little-endian; hashing memory directly assumes the host is
 * too (as the f16 writer already does). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the trace content hash assumes a little-endian host"
#endif

static const char *const slab_names[OBC_TRACE_SLAB_KINDS] = {"K", "V", "Q", "O", "lse", "A"};

const char *trace_hash_slab_name(int kind) { return slab_names[kind]; }

size_t trace_hash_slab_heads(const TraceMeta *meta, int kind) {
  return kind <= OBC_TRACE_SLAB_V ? meta->model.n_kv_heads : meta->model.n_heads;
}

static size_t slabs_per_layer(const TraceMeta *meta) {
  return 2 * meta->model.n_kv_heads + (meta->has_attn ? 4 : 3) * meta->model.n_heads;
}

static const char *const sums_names[OBC_TRACE_SUMS_KINDS] = {"col_attn", "col_obc_v", "col_obc_k",
                                                             "col_obc_vk"};

const char *trace_hash_sums_name(int kind) { return sums_names[kind]; }

size_t trace_hash_slab_count(const TraceMeta *meta) {
  size_t sums = meta->has_column_sums ? meta->model.n_layers * OBC_TRACE_SUMS_KINDS + 1 : 0;
  size_t qstats = meta->has_query_stats ? (meta->model.n_layers + 1) * OBC_TRACE_QSTATS_KINDS : 0;
  return meta->model.n_layers * slabs_per_layer(meta) + sums + qstats;
}

size_t trace_hash_qstats_index(const TraceMeta *meta, size_t layer, int kind) {
  return trace_hash_counts_index(meta) + 1 + layer * OBC_TRACE_QSTATS_KINDS + (size_t)kind;
}

size_t trace_hash_sums_index(const TraceMeta *meta, size_t layer, int kind) {
  return meta->model.n_layers * slabs_per_layer(meta) + layer * OBC_TRACE_SUMS_KINDS + (size_t)kind;
}

size_t trace_hash_counts_index(const TraceMeta *meta) {
  return trace_hash_sums_index(meta, meta->model.n_layers, 0);
}

size_t trace_hash_slab_index(const TraceMeta *meta, size_t layer, int kind, size_t head) {
  size_t index = layer * slabs_per_layer(meta);
  for (int k = 0; k < kind; k++) index += trace_hash_slab_heads(meta, k);
  return index + head;
}

/* Appends one formatted manifest line (at most 255 bytes) to the hash. */
static uint64_t hash_line(uint64_t state, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static uint64_t hash_line(uint64_t state, const char *format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(line, sizeof line, format, args);
  va_end(args);
  size_t length = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  return obc_hash_bytes(state, line, length);
}

void trace_hash_manifest(const TraceMeta *m, uint64_t logits_hash, const uint64_t *slab_hashes,
                         char out[17]) {
  const TraceModel *c = &m->model;
  uint64_t h = OBC_HASH_SEED;
  h = hash_line(h, "obcache trace content 2\n");
  h = hash_line(h, "shape %zu %zu %zu %zu %zu %zu %zu %zu %s %d %d\n", c->n_layers, c->n_heads,
                c->n_kv_heads, c->head_dim, c->vocab_size, m->n_prompt, m->n_decode, m->n_rows,
                m->dtype, m->has_attn ? 1 : 0, m->has_logits ? 1 : 0);
  h = hash_line(
      h, "row_positions %016" PRIx64 "\n",
      obc_hash_bytes(OBC_HASH_SEED, m->row_positions, m->n_rows * sizeof *m->row_positions));
  if (m->tokens)
    h = hash_line(h, "tokens %016" PRIx64 "\n",
                  obc_hash_bytes(OBC_HASH_SEED, m->tokens, m->n_positions * sizeof *m->tokens));
  if (m->prompt_text)
    h = hash_line(h, "prompt_text %016" PRIx64 "\n",
                  obc_hash_bytes(OBC_HASH_SEED, m->prompt_text, strlen(m->prompt_text)));
  if (m->generated_text)
    h = hash_line(h, "generated_text %016" PRIx64 "\n",
                  obc_hash_bytes(OBC_HASH_SEED, m->generated_text, strlen(m->generated_text)));
  for (size_t i = 0; i < m->n_spans; i++)
    h = hash_line(h, "span %s %lld %lld\n", m->spans[i].name, (long long)m->spans[i].begin,
                  (long long)m->spans[i].end);
  if (m->has_logits) h = hash_line(h, "logits %016" PRIx64 "\n", logits_hash);
  int kinds = m->has_attn ? OBC_TRACE_SLAB_KINDS : OBC_TRACE_SLAB_A;
  for (size_t layer = 0; layer < c->n_layers; layer++)
    for (int k = 0; k < kinds; k++)
      for (size_t head = 0; head < trace_hash_slab_heads(m, k); head++)
        h = hash_line(h, "layer %zu %s %zu %016" PRIx64 "\n", layer, slab_names[k], head,
                      slab_hashes[trace_hash_slab_index(m, layer, k, head)]);
  if (m->has_column_sums) {
    for (size_t layer = 0; layer < c->n_layers; layer++)
      for (int k = 0; k < OBC_TRACE_SUMS_KINDS; k++)
        h = hash_line(h, "column_sums %zu %s %016" PRIx64 "\n", layer, sums_names[k],
                      slab_hashes[trace_hash_sums_index(m, layer, k)]);
    h = hash_line(h, "column_counts %zu %016" PRIx64 "\n", m->agnostic_rows,
                  slab_hashes[trace_hash_counts_index(m)]);
  }
  if (m->has_query_stats) {
    for (size_t layer = 0; layer < c->n_layers; layer++)
      h = hash_line(h, "query_stats %zu %016" PRIx64 " %016" PRIx64 "\n", layer,
                    slab_hashes[trace_hash_qstats_index(m, layer, OBC_TRACE_QSTATS_SUM)],
                    slab_hashes[trace_hash_qstats_index(m, layer, OBC_TRACE_QSTATS_OUTER)]);
    h = hash_line(h, "query_counts %d %016" PRIx64 " %016" PRIx64 "\n", TRACE_QSTATS_FIRST_ROW,
                  slab_hashes[trace_hash_qstats_index(m, c->n_layers, 0)],
                  slab_hashes[trace_hash_qstats_index(m, c->n_layers, 1)]);
  }
  snprintf(out, 17, "%016" PRIx64, h);
}

bool trace_content_hash_valid(const char *text) {
  size_t n = strlen(text);
  return n == 16 && strspn(text, "0123456789abcdef") == n;
}
