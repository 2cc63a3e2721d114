/* Trace writer: creates every dataset of the schema up front (chunked per
 * head, optionally shuffled and deflated, every chunk with a Fletcher32
 * checksum), accepts the tensors one (layer, head) at a time in any order,
 * hashing each slab as it goes, and on commit writes the content hash, then
 * `complete` last, and renames the temporary file into place. The file
 * format is pinned to HDF5 1.10 (superblock 3, object header 2), whose
 * metadata is checksummed throughout. See traces/SCHEMA.md. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_parse.h"
#include "traces/trace.h"
#include "traces/trace_h5.h"
#include "traces/trace_hash.h"

/* Which tensors have been written, so commit can refuse a partial trace. */
enum { WRITTEN_KV, WRITTEN_ROWS, WRITTEN_ATTN, WRITTEN_KINDS };

struct TraceWriter {
  ObcPendingFile pending;
  hid_t file;
  hid_t float_file_type; /* H5T_IEEE_F32LE or the 16-bit float type */
  TraceMeta meta;        /* deep copy; generated_text/needle_found updated late */
  TraceWriteOptions options;
  unsigned char *written[WRITTEN_KINDS]; /* (n_layers, heads of that kind) */
  bool logits_written;
  uint16_t *half_buffer; /* conversion scratch for f16 storage */
  size_t half_capacity;
  uint64_t *slab_hashes;       /* (trace_hash_slab_count) FNV-1a of each slab's stored bytes */
  unsigned char *sums_written; /* (n_layers) column sums written, with store_column_sums */
  bool counts_written;
  unsigned char *qstats_written; /* (n_layers) query statistics written, with store_query_stats */
  bool qcounts_written;
  float *sums_buffer; /* (TRACE_ROWS_VARIANTS, n_heads, n_prompt) f32 conversion scratch */
  uint64_t logits_hash;
};

static const char *writer_path(const TraceWriter *w) { return w->pending.final_path; }

/* ---- option values --------------------------------------------------------- */

int trace_parse_dtype(void *target, const char *option, const char *value) {
  if (strcmp(value, "f32") && strcmp(value, "f16"))
    return obc_fail(OBC_EINVAL, "%s: expected f32 or f16, got '%s'", option, value);
  *(bool *)target = !strcmp(value, "f16");
  return OBC_OK;
}

void trace_show_dtype(const void *target, char *text, size_t size) {
  snprintf(text, size, "%s", *(const bool *)target ? "f16" : "f32");
}

int trace_parse_compression(void *target, const char *option, const char *value) {
  long level = 0;
  int rc = obc_parse_int(option, value, &level);
  if (!rc && (level < 0 || level > 9))
    rc = obc_fail(OBC_EINVAL, "%s: expected 0..9, got '%s'", option, value);
  if (!rc) *(int *)target = (int)level;
  return rc;
}

/* ---- validation ------------------------------------------------------------ */

static int check_meta(const char *path, const TraceMeta *m, const TraceWriteOptions *o) {
  const TraceModel *c = &m->model;
  if (!c->n_layers || !c->n_heads || !c->n_kv_heads || !c->head_dim)
    return obc_fail(
        OBC_EINVAL,
        "%s: model shape has a zero (layers %zu, heads %zu, kv heads %zu, head dim %zu)", path,
        c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim);
  if (c->n_heads % c->n_kv_heads)
    return obc_fail(OBC_EINVAL, "%s: %zu query heads is not a multiple of %zu KV heads", path,
                    c->n_heads, c->n_kv_heads);
  if (m->n_positions != m->n_prompt + m->n_decode || !m->n_positions)
    return obc_fail(OBC_EINVAL, "%s: n_positions %zu != n_prompt %zu + n_decode %zu (or zero)",
                    path, m->n_positions, m->n_prompt, m->n_decode);
  if (!m->n_rows || !m->row_positions)
    return obc_fail(OBC_EINVAL, "%s: no captured query rows", path);
  for (size_t i = 0; i < m->n_rows; i++) {
    int64_t p = m->row_positions[i];
    if (p < 0 || p >= (int64_t)m->n_positions || (i && p <= m->row_positions[i - 1]))
      return obc_fail(OBC_EINVAL,
                      "%s: row_positions[%zu] = %lld is not strictly increasing within [0, %zu)",
                      path, i, (long long)p, m->n_positions);
  }
  if (m->n_spans > OBC_TRACE_MAX_SPANS)
    return obc_fail(OBC_EINVAL, "%s: %zu spans (at most %d)", path, m->n_spans,
                    OBC_TRACE_MAX_SPANS);
  for (size_t i = 0; i < m->n_spans; i++) {
    const TraceSpan *s = &m->spans[i];
    if (!s->name[0] || strchr(s->name, '/') || strchr(s->name, '.') == s->name)
      return obc_fail(OBC_EINVAL, "%s: span %zu has an invalid name '%s'", path, i, s->name);
    if (s->begin < 0 || s->end < s->begin || s->end > (int64_t)m->n_positions)
      return obc_fail(OBC_EINVAL, "%s: span '%s' [%lld, %lld) is outside [0, %zu]", path, s->name,
                      (long long)s->begin, (long long)s->end, m->n_positions);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(m->spans[j].name, s->name))
        return obc_fail(OBC_EINVAL, "%s: span name '%s' used twice", path, s->name);
  }
  if (o->store_logits && (!c->vocab_size || !m->n_decode))
    return obc_fail(OBC_EINVAL, "%s: logits need vocab_size > 0 and n_decode > 0", path);
  if (o->store_column_sums && (!m->n_prompt || m->agnostic_rows > m->n_prompt))
    return obc_fail(OBC_EINVAL, "%s: column sums need n_prompt > 0 and agnostic_rows %zu <= %zu",
                    path, m->agnostic_rows, m->n_prompt);
  if (o->store_query_stats && !o->store_column_sums)
    return obc_fail(OBC_EINVAL, "%s: query statistics need the column sums (schema 3)", path);
  if (o->store_query_stats && m->model.head_dim % 2)
    return obc_fail(OBC_EINVAL, "%s: query statistics need an even head_dim (found %zu)", path,
                    m->model.head_dim);
  if (o->compression_level < 0 || o->compression_level > 9)
    return obc_fail(OBC_EINVAL, "%s: compression level %d outside 0..9", path,
                    o->compression_level);
  if (o->compression_level > 0 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
    return obc_fail(OBC_EUNSUPPORTED, "%s: this HDF5 library has no deflate filter", path);
  return OBC_OK;
}

/* ---- creation -------------------------------------------------------------- */

static int create_dataset(TraceWriter *w, const char *name, hid_t type, int rank,
                          const hsize_t *dims, const hsize_t *chunk, bool compress) {
  hid_t space = H5Screate_simple(rank, dims, NULL);
  hid_t plist =
      trace_h5_dataset_plist(rank, dims, chunk, compress ? w->options.compression_level : 0);
  hid_t dset = space >= 0 && plist >= 0
                   ? H5Dcreate2(w->file, name, type, space, H5P_DEFAULT, plist, H5P_DEFAULT)
                   : -1;
  if (plist >= 0) H5Pclose(plist);
  if (space >= 0) H5Sclose(space);
  if (dset < 0) return obc_fail(OBC_EIO, "%s: cannot create dataset %s", writer_path(w), name);
  H5Dclose(dset);
  return OBC_OK;
}

/* Chunk length along a dimension of n: at most cap, and balanced so that the
 * last chunk is not mostly empty (32784 positions -> 9 chunks of 3643, not
 * 9 of 4096, which would allocate 12% more than the data). */
static hsize_t at_most(size_t n, size_t cap) {
  if (n <= cap) return (hsize_t)n;
  size_t chunks = (n + cap - 1) / cap;
  return (hsize_t)((n + chunks - 1) / chunks);
}

static int create_layer(TraceWriter *w, size_t layer) {
  const TraceMeta *m = &w->meta;
  const TraceModel *c = &m->model;
  char name[64];
  trace_h5_layer_group(name, sizeof name, layer);
  hid_t group = H5Gcreate2(w->file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0) return obc_fail(OBC_EIO, "%s: cannot create group %s", writer_path(w), name);
  H5Gclose(group);

  hsize_t kv_dims[3] = {c->n_kv_heads, m->n_positions, c->head_dim};
  hsize_t kv_chunk[3] = {1, at_most(m->n_positions, 4096), c->head_dim};
  hsize_t row_dims[3] = {c->n_heads, m->n_rows, c->head_dim};
  hsize_t row_chunk[3] = {1, m->n_rows, c->head_dim};
  hsize_t lse_dims[2] = {c->n_heads, m->n_rows};
  hsize_t lse_chunk[2] = {1, m->n_rows};
  hsize_t attn_dims[3] = {c->n_heads, m->n_rows, m->n_positions};
  hsize_t attn_chunk[3] = {1, at_most(m->n_rows, 256), at_most(m->n_positions, 4096)};
  struct {
    const char *name;
    hid_t type;
    int rank;
    const hsize_t *dims, *chunk;
  } sets[] = {
      {"K", w->float_file_type, 3, kv_dims, kv_chunk},
      {"V", w->float_file_type, 3, kv_dims, kv_chunk},
      {"Q", w->float_file_type, 3, row_dims, row_chunk},
      {"O", w->float_file_type, 3, row_dims, row_chunk},
      /* lse is a log of a sum of up to 10^5+ terms: keep it f32 whatever the
       * tensor dtype, half would lose ~1e-2 absolute. */
      {"lse", H5T_IEEE_F32LE, 2, lse_dims, lse_chunk},
      {"A", w->float_file_type, 3, attn_dims, attn_chunk},
  };
  size_t n_sets = w->options.store_attn ? 6 : 5;
  for (size_t i = 0; i < n_sets; i++) {
    trace_h5_layer_dataset(name, sizeof name, layer, sets[i].name);
    int rc = create_dataset(w, name, sets[i].type, sets[i].rank, sets[i].dims, sets[i].chunk, true);
    if (rc) return rc;
  }
  /* Column sums: f32 (their accumulation in double is rounded once), one
   * chunk per variant. */
  hsize_t sums_dims[3] = {TRACE_ROWS_VARIANTS, c->n_heads, m->n_prompt};
  hsize_t sums_chunk[3] = {1, c->n_heads, at_most(m->n_prompt, 65536)};
  for (int k = 0; w->options.store_column_sums && k < OBC_TRACE_SUMS_KINDS; k++) {
    trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_sums_name(k));
    int rc = create_dataset(w, name, H5T_IEEE_F32LE, 3, sums_dims, sums_chunk, true);
    if (rc) return rc;
  }
  /* Query statistics: f64, one chunk per variant. */
  size_t d = c->head_dim;
  hsize_t qsum_dims[3] = {TRACE_ROWS_VARIANTS, c->n_heads, d};
  hsize_t qsum_chunk[3] = {1, c->n_heads, d};
  hsize_t outer_dims[3] = {TRACE_ROWS_VARIANTS, c->n_heads, d * d};
  hsize_t outer_chunk[3] = {1, c->n_heads, d * d};
  if (w->options.store_query_stats) {
    trace_h5_layer_dataset(name, sizeof name, layer, "q_sum");
    int rc = create_dataset(w, name, H5T_IEEE_F64LE, 3, qsum_dims, qsum_chunk, true);
    trace_h5_layer_dataset(name, sizeof name, layer, "q_outer");
    if (!rc) rc = create_dataset(w, name, H5T_IEEE_F64LE, 3, outer_dims, outer_chunk, true);
    if (rc) return rc;
  }
  return OBC_OK;
}

/* A small 1-D dataset written at once; chunked (one chunk up to 2^20
 * elements) only so that it carries a Fletcher32 checksum. */
static int write_whole(TraceWriter *w, const char *name, hid_t file_type, hid_t mem_type,
                       size_t count, const void *data) {
  hsize_t dims[1] = {count};
  hsize_t chunk[1] = {at_most(count, (size_t)1 << 20)};
  int rc = create_dataset(w, name, file_type, 1, dims, chunk, false);
  if (rc) return rc;
  hid_t dset = H5Dopen2(w->file, name, H5P_DEFAULT);
  herr_t status = count ? H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : 0;
  H5Dclose(dset);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot write dataset %s", writer_path(w), name);
  return OBC_OK;
}

/* /spans/<name> datasets, and the `names` attribute of /spans that lists
 * them in the producer's order: readers open spans by these names and never
 * walk the group's links (HDF5 1.10 crashes walking damaged link indexes). */
static int write_spans(TraceWriter *w) {
  hid_t group = H5Gcreate2(w->file, "/spans", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0) return obc_fail(OBC_EIO, "%s: cannot create group /spans", writer_path(w));
  char names[OBC_TRACE_MAX_SPANS][sizeof w->meta.spans[0].name];
  memset(names, 0, sizeof names);
  for (size_t i = 0; i < w->meta.n_spans; i++)
    memcpy(names[i], w->meta.spans[i].name, sizeof names[i]);
  int rc = trace_h5_attr_write_names(writer_path(w), group, "names", &names[0][0], sizeof names[0],
                                     w->meta.n_spans);
  H5Gclose(group);
  if (rc) return rc;
  for (size_t i = 0; i < w->meta.n_spans; i++) {
    char name[128];
    snprintf(name, sizeof name, "/spans/%s", w->meta.spans[i].name);
    int64_t range[2] = {w->meta.spans[i].begin, w->meta.spans[i].end};
    int rc = write_whole(w, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 2, range);
    if (rc) return rc;
  }
  return OBC_OK;
}

static int write_root_attributes(TraceWriter *w) {
  const char *path = writer_path(w);
  const TraceMeta *m = &w->meta;
  const TraceModel *c = &m->model;
  hid_t root = w->file;
  int rc = 0;
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "schema_version", m->schema_version);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "tool_version", m->tool_version);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "producer", m->producer);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "created", m->created);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "dtype", m->dtype);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "model_name", c->name);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "architecture", c->architecture);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_layers", (int64_t)c->n_layers);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_heads", (int64_t)c->n_heads);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_kv_heads", (int64_t)c->n_kv_heads);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "head_dim", (int64_t)c->head_dim);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "vocab_size", (int64_t)c->vocab_size);
  rc = rc ? rc : trace_h5_attr_write_f64(path, root, "rope_theta", c->rope_theta);
  rc = rc ? rc : trace_h5_attr_write_str(path, root, "rope_scaling", c->rope_scaling);
  rc = rc ? rc : trace_h5_attr_write_f64(path, root, "rope_factor", c->rope_factor);
  rc = rc ? rc
          : trace_h5_attr_write_f64(path, root, "rope_low_freq_factor", c->rope_low_freq_factor);
  rc = rc ? rc
          : trace_h5_attr_write_f64(path, root, "rope_high_freq_factor", c->rope_high_freq_factor);
  rc = rc ? rc
          : trace_h5_attr_write_i64(path, root, "rope_original_context",
                                    (int64_t)c->rope_original_context);
  rc = rc ? rc : trace_h5_attr_write_f64(path, root, "attn_scale", c->attn_scale);
  rc = rc ? rc
          : trace_h5_attr_write_str(path, root, "rope_layout",
                                    c->rope_layout[0] ? c->rope_layout : "none");
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_prompt", (int64_t)m->n_prompt);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_decode", (int64_t)m->n_decode);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_positions", (int64_t)m->n_positions);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "n_rows", (int64_t)m->n_rows);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "needle_found", m->needle_found);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "has_tokens", m->tokens != NULL);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "has_attn", m->has_attn);
  rc = rc ? rc : trace_h5_attr_write_i64(path, root, "has_logits", m->has_logits);
  if (m->has_column_sums) {
    rc = rc ? rc : trace_h5_attr_write_i64(path, root, "has_column_sums", 1);
    rc = rc ? rc : trace_h5_attr_write_i64(path, root, "agnostic_rows", (int64_t)m->agnostic_rows);
  }
  if (m->has_query_stats) {
    rc = rc ? rc : trace_h5_attr_write_i64(path, root, "has_query_stats", 1);
    rc = rc ? rc
            : trace_h5_attr_write_i64(path, root, "query_stats_first_row", TRACE_QSTATS_FIRST_ROW);
  }
  return rc;
}

static void format_now(char *out, size_t size) {
  time_t now = time(NULL);
  struct tm utc;
  gmtime_r(&now, &utc);
  strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

static void writer_free(TraceWriter *w) {
  if (w->file >= 0) H5Fclose(w->file);
  if (w->float_file_type >= 0 && w->options.store_f16) H5Tclose(w->float_file_type);
  for (int k = 0; k < WRITTEN_KINDS; k++) free(w->written[k]);
  free(w->half_buffer);
  free(w->slab_hashes);
  free(w->sums_written);
  free(w->qstats_written);
  free(w->sums_buffer);
  trace_meta_free(&w->meta);
  free(w);
}

static int create_contents(TraceWriter *w) {
  const TraceMeta *m = &w->meta;
  int rc = write_root_attributes(w);
  if (!rc)
    rc = write_whole(w, "/row_positions", H5T_STD_I64LE, H5T_NATIVE_INT64, m->n_rows,
                     m->row_positions);
  if (!rc && m->tokens)
    rc = write_whole(w, "/tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, m->n_positions, m->tokens);
  if (!rc && m->prompt_text)
    rc = trace_h5_text_write(writer_path(w), w->file, "/prompt_text", m->prompt_text);
  if (!rc) rc = write_spans(w);
  if (!rc && w->options.store_logits) {
    hsize_t dims[2] = {m->n_decode, m->model.vocab_size};
    hsize_t chunk[2] = {1, m->model.vocab_size};
    rc = create_dataset(w, "/logits", H5T_IEEE_F32LE, 2, dims, chunk, true);
  }
  if (!rc && w->options.store_column_sums) {
    hsize_t dims[2] = {TRACE_ROWS_VARIANTS, m->n_prompt};
    hsize_t chunk[2] = {TRACE_ROWS_VARIANTS, at_most(m->n_prompt, (size_t)1 << 19)};
    rc = create_dataset(w, "/column_counts", H5T_STD_I64LE, 2, dims, chunk, false);
  }
  if (!rc && w->options.store_query_stats) {
    hsize_t dims[1] = {TRACE_ROWS_VARIANTS}, freq_dims[1] = {m->model.head_dim / 2};
    rc = create_dataset(w, "/query_counts", H5T_STD_I64LE, 1, dims, dims, false);
    if (!rc)
      rc = create_dataset(w, "/rope_inv_freq", H5T_IEEE_F64LE, 1, freq_dims, freq_dims, false);
  }
  if (!rc) {
    hid_t group = H5Gcreate2(w->file, "/layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (group < 0) return obc_fail(OBC_EIO, "%s: cannot create group /layers", writer_path(w));
    H5Gclose(group);
  }
  for (size_t layer = 0; !rc && layer < m->model.n_layers; layer++) rc = create_layer(w, layer);
  return rc;
}

int trace_create(const char *path, const TraceMeta *meta, const TraceWriteOptions *options,
                 TraceWriter **out) {
  assert(path && meta && options && out);
  *out = NULL;
  trace_h5_silence();
  int rc = check_meta(path, meta, options);
  if (rc) return rc;
  TraceWriter *w = obc_calloc(1, sizeof *w, "trace writer");
  if (!w) return OBC_ENOMEM;
  w->file = -1;
  w->float_file_type = -1;
  w->options = *options;
  rc = obc_pending_init(&w->pending, path);
  if (!rc) rc = trace_meta_copy(&w->meta, meta);
  if (rc) {
    free(w);
    return rc;
  }
  TraceMeta *m = &w->meta;
  m->schema_version =
      options->store_column_sums ? OBC_TRACE_SCHEMA_VERSION : OBC_TRACE_SCHEMA_VERSION_PLAIN;
  snprintf(m->tool_version, sizeof m->tool_version, "%s", OBC_VERSION);
  format_now(m->created, sizeof m->created);
  snprintf(m->dtype, sizeof m->dtype, "%s", options->store_f16 ? "f16" : "f32");
  m->complete = false;
  m->has_attn = options->store_attn;
  m->has_logits = options->store_logits;
  m->has_column_sums = options->store_column_sums;
  if (!m->has_column_sums) m->agnostic_rows = 0;
  m->has_query_stats = options->store_query_stats;
  m->content_hash[0] = '\0'; /* known at commit */
  size_t sizes[WRITTEN_KINDS] = {m->model.n_kv_heads, m->model.n_heads, m->model.n_heads};
  for (int k = 0; k < WRITTEN_KINDS; k++) {
    w->written[k] = obc_calloc(m->model.n_layers * sizes[k], 1, "trace write flags");
    if (!w->written[k]) {
      writer_free(w);
      return OBC_ENOMEM;
    }
  }
  w->slab_hashes = obc_calloc(trace_hash_slab_count(m), sizeof *w->slab_hashes, "slab hashes");
  if (!w->slab_hashes) {
    writer_free(w);
    return OBC_ENOMEM;
  }
  if (options->store_column_sums) {
    w->sums_written = obc_calloc(m->model.n_layers, 1, "column sums write flags");
    w->sums_buffer =
        obc_malloc(TRACE_ROWS_VARIANTS * m->model.n_heads * m->n_prompt * sizeof *w->sums_buffer,
                   "column sums conversion buffer");
    if (!w->sums_written || !w->sums_buffer) {
      writer_free(w);
      return OBC_ENOMEM;
    }
  }
  if (options->store_query_stats &&
      !(w->qstats_written = obc_calloc(m->model.n_layers, 1, "query statistics write flags"))) {
    writer_free(w);
    return OBC_ENOMEM;
  }
  w->float_file_type = options->store_f16 ? trace_h5_f16_type() : H5T_IEEE_F32LE;

  /* HDF5 1.10 formats exactly (superblock 3, object headers 2, checksummed
   * metadata): neither older unchecksummed ones nor newer ones that a 1.10
   * reader would refuse. */
  /* Registered before the file exists: a signal between the create and the
   * registration would otherwise leave it behind. */
  obc_pending_register(&w->pending);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  errno = 0;
  if (fapl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0)
    w->file = H5Fcreate(w->pending.temp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  int err = errno;
  if (fapl >= 0) H5Pclose(fapl);
  if (w->file < 0) {
    rc = obc_fail(OBC_EIO, "%s: cannot create temporary file %s: %s", path, w->pending.temp_path,
                  obc_write_error_text(w->pending.temp_path, err));
    obc_pending_abort(&w->pending);
    writer_free(w);
    return rc;
  }
  rc = create_contents(w);
  if (rc) {
    trace_abort(w);
    return rc;
  }
  *out = w;
  return OBC_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

/* Writes the slab [head, :, ...] (count floats) of a rank-2/3 layer dataset
 * and records the hash of its stored bytes. as_f32 forces single precision
 * whatever the trace dtype (lse). */
static int write_head_slab(TraceWriter *w, size_t layer, int kind, size_t head, const float *data,
                           size_t count, bool as_f32) {
  char dset_name[64];
  trace_h5_layer_dataset(dset_name, sizeof dset_name, layer, trace_hash_slab_name(kind));
  uint64_t *slab_hash = &w->slab_hashes[trace_hash_slab_index(&w->meta, layer, kind, head)];
  hid_t dset = H5Dopen2(w->file, dset_name, H5P_DEFAULT);
  if (dset < 0) return obc_fail(OBC_EIO, "%s: cannot open dataset %s", writer_path(w), dset_name);
  hid_t file_space = H5Dget_space(dset);
  int rank = H5Sget_simple_extent_ndims(file_space);
  hsize_t dims[3], start[3] = {0, 0, 0}, block[3];
  H5Sget_simple_extent_dims(file_space, dims, NULL);
  start[0] = head;
  block[0] = 1;
  for (int i = 1; i < rank; i++) block[i] = dims[i];
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, block, NULL);
  /* A memory space of the block's own shape lets HDF5 copy whole rows
   * instead of mapping element by element. */
  assert(count == (size_t)H5Sget_select_npoints(file_space));
  hid_t mem_space = H5Screate_simple(rank, block, NULL);
  herr_t status;
  errno = 0; /* HDF5 keeps the errno of a failed write (disk full, ulimit -f) */
  if (!as_f32 && w->options.store_f16) {
    if (w->half_capacity < count) {
      free(w->half_buffer);
      w->half_buffer = obc_malloc(count * sizeof *w->half_buffer, "half conversion buffer");
      w->half_capacity = w->half_buffer ? count : 0;
    }
    if (!w->half_buffer) {
      status = -1;
    } else {
      for (size_t i = 0; i < count; i++) w->half_buffer[i] = trace_h5_half_from_float(data[i]);
      *slab_hash = obc_hash_bytes(OBC_HASH_SEED, w->half_buffer, count * 2);
      status =
          H5Dwrite(dset, w->float_file_type, mem_space, file_space, H5P_DEFAULT, w->half_buffer);
    }
  } else {
    *slab_hash = obc_hash_bytes(OBC_HASH_SEED, data, count * sizeof *data);
    status = H5Dwrite(dset, H5T_NATIVE_FLOAT, mem_space, file_space, H5P_DEFAULT, data);
  }
  H5Sclose(mem_space);
  H5Sclose(file_space);
  int err = errno;
  H5Dclose(dset);
  if (status < 0)
    return obc_fail(OBC_EIO, "%s: cannot write %s head %zu: %s", writer_path(w), dset_name, head,
                    obc_write_error_text(w->pending.temp_path, err));
  return OBC_OK;
}

int trace_write_kv(TraceWriter *w, size_t layer, size_t kv_head, const float *K, const float *V) {
  const TraceMeta *m = &w->meta;
  assert(layer < m->model.n_layers && kv_head < m->model.n_kv_heads && K && V);
  size_t count = m->n_positions * m->model.head_dim;
  int rc = write_head_slab(w, layer, OBC_TRACE_SLAB_K, kv_head, K, count, false);
  if (!rc) rc = write_head_slab(w, layer, OBC_TRACE_SLAB_V, kv_head, V, count, false);
  if (!rc) w->written[WRITTEN_KV][layer * m->model.n_kv_heads + kv_head] = 1;
  return rc;
}

int trace_write_rows(TraceWriter *w, size_t layer, size_t head, const float *Q, const float *O,
                     const float *lse) {
  const TraceMeta *m = &w->meta;
  assert(layer < m->model.n_layers && head < m->model.n_heads && Q && O && lse);
  size_t count = m->n_rows * m->model.head_dim;
  int rc = write_head_slab(w, layer, OBC_TRACE_SLAB_Q, head, Q, count, false);
  if (!rc) rc = write_head_slab(w, layer, OBC_TRACE_SLAB_O, head, O, count, false);
  if (!rc) rc = write_head_slab(w, layer, OBC_TRACE_SLAB_LSE, head, lse, m->n_rows, true);
  if (!rc) w->written[WRITTEN_ROWS][layer * m->model.n_heads + head] = 1;
  return rc;
}

int trace_write_attn(TraceWriter *w, size_t layer, size_t head, const float *A) {
  const TraceMeta *m = &w->meta;
  assert(layer < m->model.n_layers && head < m->model.n_heads && A);
  if (!w->options.store_attn)
    return obc_fail(OBC_EINVAL, "%s: attention rows written but the trace was created without them",
                    writer_path(w));
  int rc = write_head_slab(w, layer, OBC_TRACE_SLAB_A, head, A, m->n_rows * m->n_positions, false);
  if (!rc) w->written[WRITTEN_ATTN][layer * m->model.n_heads + head] = 1;
  return rc;
}

int trace_write_logits(TraceWriter *w, const float *logits) {
  assert(logits);
  if (!w->options.store_logits)
    return obc_fail(OBC_EINVAL, "%s: logits written but the trace was created without them",
                    writer_path(w));
  hid_t dset = H5Dopen2(w->file, "/logits", H5P_DEFAULT);
  herr_t status =
      dset >= 0 ? H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, logits) : -1;
  if (dset >= 0) H5Dclose(dset);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot write /logits", writer_path(w));
  w->logits_hash = obc_hash_bytes(OBC_HASH_SEED, logits,
                                  w->meta.n_decode * w->meta.model.vocab_size * sizeof *logits);
  w->logits_written = true;
  return OBC_OK;
}

/* Writes a whole dataset from memory of mem_type (every element). */
static int write_dataset_native(TraceWriter *w, const char *name, hid_t mem_type,
                                const void *data) {
  hid_t dset = H5Dopen2(w->file, name, H5P_DEFAULT);
  errno = 0;
  herr_t status = dset >= 0 ? H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
  int err = errno;
  if (dset >= 0) H5Dclose(dset);
  if (status < 0)
    return obc_fail(OBC_EIO, "%s: cannot write %s: %s", writer_path(w), name,
                    obc_write_error_text(w->pending.temp_path, err));
  return OBC_OK;
}

/* Writes a whole f32 dataset of count values (converted from double) and
 * returns the hash of its stored bytes. */
static int write_sums_dataset(TraceWriter *w, const char *name, const double *data, size_t count,
                              uint64_t *hash) {
  for (size_t i = 0; i < count; i++) w->sums_buffer[i] = (float)data[i];
  *hash = obc_hash_bytes(OBC_HASH_SEED, w->sums_buffer, count * sizeof *w->sums_buffer);
  return write_dataset_native(w, name, H5T_NATIVE_FLOAT, w->sums_buffer);
}

int trace_write_column_sums(TraceWriter *w, size_t layer, const double *attn, const double *obc) {
  const TraceMeta *m = &w->meta;
  assert(layer < m->model.n_layers && attn && obc);
  if (!w->options.store_column_sums)
    return obc_fail(OBC_EINVAL, "%s: column sums written but the trace was created without them",
                    writer_path(w));
  size_t plane = m->model.n_heads * m->n_prompt, count = TRACE_ROWS_VARIANTS * plane;
  double *term = obc_malloc(count * sizeof *term, "one OBCache term of the column sums");
  if (!term) return OBC_ENOMEM;
  int rc = OBC_OK;
  for (int k = 0; !rc && k < OBC_TRACE_SUMS_KINDS; k++) {
    const double *data = attn;
    if (k != OBC_TRACE_SUMS_ATTN) { /* (variant, term, h, p) -> (variant, h, p) of one term */
      size_t t = (size_t)(k - OBC_TRACE_SUMS_OBC_V);
      for (size_t v = 0; v < TRACE_ROWS_VARIANTS; v++)
        memcpy(term + v * plane, obc + (v * TRACE_OBC_TERMS + t) * plane, plane * sizeof *term);
      data = term;
    }
    char name[64];
    trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_sums_name(k));
    rc = write_sums_dataset(w, name, data, count,
                            &w->slab_hashes[trace_hash_sums_index(m, layer, k)]);
  }
  free(term);
  if (!rc) w->sums_written[layer] = 1;
  return rc;
}

int trace_write_column_counts(TraceWriter *w, const int64_t *counts) {
  const TraceMeta *m = &w->meta;
  assert(counts);
  if (!w->options.store_column_sums)
    return obc_fail(OBC_EINVAL, "%s: column counts written but the trace was created without them",
                    writer_path(w));
  int rc = write_dataset_native(w, "/column_counts", H5T_NATIVE_INT64, counts);
  if (rc) return rc;
  w->slab_hashes[trace_hash_counts_index(m)] =
      obc_hash_bytes(OBC_HASH_SEED, counts, TRACE_ROWS_VARIANTS * m->n_prompt * sizeof *counts);
  w->counts_written = true;
  return OBC_OK;
}

int trace_write_query_stats(TraceWriter *w, size_t layer, const double *sum, const double *outer) {
  const TraceMeta *m = &w->meta;
  assert(layer < m->model.n_layers && sum && outer);
  if (!w->options.store_query_stats)
    return obc_fail(OBC_EINVAL,
                    "%s: query statistics written but the trace was created without them",
                    writer_path(w));
  size_t elements = TRACE_ROWS_VARIANTS * m->model.n_heads * m->model.head_dim;
  char name[64];
  trace_h5_layer_dataset(name, sizeof name, layer, "q_sum");
  int rc = write_dataset_native(w, name, H5T_NATIVE_DOUBLE, sum);
  trace_h5_layer_dataset(name, sizeof name, layer, "q_outer");
  if (!rc) rc = write_dataset_native(w, name, H5T_NATIVE_DOUBLE, outer);
  if (rc) return rc;
  w->slab_hashes[trace_hash_qstats_index(m, layer, OBC_TRACE_QSTATS_SUM)] =
      obc_hash_bytes(OBC_HASH_SEED, sum, elements * sizeof *sum);
  w->slab_hashes[trace_hash_qstats_index(m, layer, OBC_TRACE_QSTATS_OUTER)] =
      obc_hash_bytes(OBC_HASH_SEED, outer, elements * m->model.head_dim * sizeof *outer);
  w->qstats_written[layer] = 1;
  return rc;
}

int trace_write_query_counts(TraceWriter *w, const int64_t *counts, const double *inv_freq) {
  assert(counts && inv_freq);
  if (!w->options.store_query_stats)
    return obc_fail(OBC_EINVAL, "%s: query counts written but the trace was created without them",
                    writer_path(w));
  const TraceMeta *m = &w->meta;
  int rc = write_dataset_native(w, "/query_counts", H5T_NATIVE_INT64, counts);
  if (!rc) rc = write_dataset_native(w, "/rope_inv_freq", H5T_NATIVE_DOUBLE, inv_freq);
  if (rc) return rc;
  w->slab_hashes[trace_hash_qstats_index(m, m->model.n_layers, 0)] =
      obc_hash_bytes(OBC_HASH_SEED, counts, TRACE_ROWS_VARIANTS * sizeof *counts);
  w->slab_hashes[trace_hash_qstats_index(m, m->model.n_layers, 1)] =
      obc_hash_bytes(OBC_HASH_SEED, inv_freq, m->model.head_dim / 2 * sizeof *inv_freq);
  w->qcounts_written = true;
  return OBC_OK;
}

int trace_set_result(TraceWriter *w, const char *generated_text, int needle_found) {
  free(w->meta.generated_text);
  w->meta.generated_text = NULL;
  if (generated_text) {
    size_t n = strlen(generated_text);
    w->meta.generated_text = obc_malloc(n + 1, "generated text");
    if (!w->meta.generated_text) return OBC_ENOMEM;
    memcpy(w->meta.generated_text, generated_text, n + 1);
  }
  w->meta.needle_found = needle_found;
  return OBC_OK;
}

/* The first tensor that was never written, as a message; OBC_OK if none. */
static int check_all_written(const TraceWriter *w) {
  const TraceMeta *m = &w->meta;
  const char *names[WRITTEN_KINDS] = {"K/V of KV head", "Q/O/lse of head", "A of head"};
  size_t heads[WRITTEN_KINDS] = {m->model.n_kv_heads, m->model.n_heads, m->model.n_heads};
  for (int k = 0; k < WRITTEN_KINDS; k++) {
    if (k == WRITTEN_ATTN && !w->options.store_attn) continue;
    for (size_t i = 0; i < m->model.n_layers * heads[k]; i++)
      if (!w->written[k][i])
        return obc_fail(OBC_EINVAL, "%s: layer %zu %s %zu was never written", writer_path(w),
                        i / heads[k], names[k], i % heads[k]);
  }
  for (size_t layer = 0; w->options.store_column_sums && layer < m->model.n_layers; layer++)
    if (!w->sums_written[layer])
      return obc_fail(OBC_EINVAL, "%s: layer %zu column sums were never written", writer_path(w),
                      layer);
  if (w->options.store_column_sums && !w->counts_written)
    return obc_fail(OBC_EINVAL, "%s: column counts were never written", writer_path(w));
  for (size_t layer = 0; w->options.store_query_stats && layer < m->model.n_layers; layer++)
    if (!w->qstats_written[layer])
      return obc_fail(OBC_EINVAL, "%s: layer %zu query statistics were never written",
                      writer_path(w), layer);
  if (w->options.store_query_stats && !w->qcounts_written)
    return obc_fail(OBC_EINVAL, "%s: query counts were never written", writer_path(w));
  if (w->options.store_logits && !w->logits_written)
    return obc_fail(OBC_EINVAL, "%s: logits were never written", writer_path(w));
  return OBC_OK;
}

int trace_commit(TraceWriter *w) {
  const char *path = writer_path(w);
  int rc = check_all_written(w);
  if (!rc && w->meta.generated_text)
    rc = trace_h5_text_write(path, w->file, "/generated_text", w->meta.generated_text);
  if (!rc) rc = trace_h5_attr_write_i64(path, w->file, "needle_found", w->meta.needle_found);
  if (!rc) {
    trace_hash_manifest(&w->meta, w->logits_hash, w->slab_hashes, w->meta.content_hash);
    rc = trace_h5_attr_write_str(path, w->file, "content_hash", w->meta.content_hash);
  }
  if (!rc) rc = trace_h5_attr_write_i64(path, w->file, "complete", 1);
  errno = 0;
  if (!rc && H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
    rc = obc_fail(OBC_EIO, "%s: cannot flush: %s", path,
                  obc_write_error_text(w->pending.temp_path, errno));
  if (!rc) {
    herr_t status = H5Fclose(w->file);
    int err = errno;
    w->file = -1;
    if (status < 0)
      rc = obc_fail(OBC_EIO, "%s: cannot close: %s", path,
                    obc_write_error_text(w->pending.temp_path, err));
  }
  if (!rc) rc = obc_pending_commit(&w->pending);
  if (rc) {
    trace_abort(w);
    return rc;
  }
  writer_free(w);
  return OBC_OK;
}

void trace_abort(TraceWriter *w) {
  if (!w) return;
  if (w->file >= 0) H5Fclose(w->file);
  w->file = -1;
  obc_pending_abort(&w->pending);
  writer_free(w);
}
