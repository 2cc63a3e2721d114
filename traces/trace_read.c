/* Trace reader: opens a trace, validates everything the attributes promise
 * (schema version, complete flag, every dataset's presence, type and shape)
 * before handing out any tensor, and then reads one (layer, head) slab at a
 * time, converting half to float and refusing NaN/Inf. Schema 2 files are
 * read by known names only (never by walking links) and with no
 * variable-length data, so damage shows up as a failed checksum, reported as
 * "<path>: <object>: checksum mismatch". Every object header on the way to
 * a schema-2 object is checked from the raw bytes to be a checksummed
 * version-2 one before HDF5 parses it (traces/trace_format.h). Files not in
 * that format, and schema-1 traces, are read in a child process
 * (traces/trace_legacy.h); there, trace_open reads them directly. See
 * SCHEMA.md. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_child.h"
#include "common/obc_error.h"
#include "common/obc_text.h"
#include "traces/trace.h"
#include "traces/trace_format.h"
#include "traces/trace_h5.h"
#include "traces/trace_hash.h"
#include "traces/trace_legacy.h"

struct TraceReader {
  char path[4096];
  hid_t file;
  TraceFileFormat format;  /* from the raw bytes, before HDF5 opened it */
  int raw_fd;              /* the file, for raw reads of object headers (find_link) */
  bool legacy;             /* schema 1 in the checksummed format: read in a child */
  double *original_stored; /* (n_layers, OBC_TRACE_SLAB_KINDS) bytes in the original of a
                            * converted copy (trace_legacy.h); NULL otherwise */
  TraceMeta meta;
  /* trace_keep_slabs: the K, V, Q, O and lse slabs read so far, each
   * (layer, kind, head) at kept[(layer * KEPT_KINDS + kind) * n_heads +
   * head] or NULL, and their bytes against the limit. */
  float **kept;
  size_t kept_bytes, kept_limit;
};

enum { KEPT_KINDS = 5 };
static const char *const kept_names[KEPT_KINDS] = {"K", "V", "Q", "O", "lse"};

const TraceMeta *trace_meta(const TraceReader *reader) { return &reader->meta; }
const char *trace_path(const TraceReader *reader) { return reader->path; }

void *trace_alloc(const TraceReader *reader, size_t count, size_t size, const char *what) {
  size_t bytes = 0;
  void *p = __builtin_mul_overflow(count, size, &bytes) ? NULL : malloc(bytes ? bytes : 1);
  if (!p)
    obc_fail(OBC_ENOMEM, "%s: out of memory allocating %zu x %zu bytes for %s", reader->path, count,
             size, what);
  return p;
}

/* HDF5 calls are serialised by the critical section obc_hdf5; a child of
 * obc_child_run has one thread and may have been forked while another
 * thread of the parent held it, so there it is skipped. */
#define WITH_HDF5_LOCK(statement)                      \
  do {                                                 \
    if (obc_child_active()) {                          \
      statement;                                       \
    } else {                                           \
      _Pragma("omp critical(obc_hdf5)") { statement; } \
    }                                                  \
  } while (0)

void trace_close(TraceReader *reader) {
  if (!reader) return;
  WITH_HDF5_LOCK(if (reader->file >= 0) H5Fclose(reader->file));
  if (reader->raw_fd >= 0) close(reader->raw_fd);
  free(reader->original_stored);
  if (reader->kept) {
    size_t n = reader->meta.model.n_layers * KEPT_KINDS * reader->meta.model.n_heads;
    for (size_t i = 0; i < n; i++) free(reader->kept[i]);
    free(reader->kept);
  }
  trace_meta_free(&reader->meta);
  free(reader);
}

int trace_keep_slabs(TraceReader *r, size_t max_bytes) {
  if (r->kept) return OBC_OK;
  const TraceModel *c = &r->meta.model;
  r->kept = obc_calloc(c->n_layers * KEPT_KINDS * c->n_heads, sizeof *r->kept, "kept slabs");
  if (!r->kept) return OBC_ENOMEM;
  r->kept_limit = max_bytes;
  return OBC_OK;
}

void trace_reader_relabel(TraceReader *r, const char *path, TraceLegacyLabels *legacy) {
  TraceMeta *m = &r->meta;
  const TraceMeta *labels = &legacy->labels;
  free(r->original_stored);
  r->original_stored = legacy->stored;
  legacy->stored = NULL;
  snprintf(r->path, sizeof r->path, "%s", path);
  m->schema_version = 1;
  m->content_hash[0] = '\0';
  memcpy(m->tool_version, labels->tool_version, sizeof m->tool_version);
  memcpy(m->created, labels->created, sizeof m->created);
  memcpy(m->model.rope_layout, labels->model.rope_layout, sizeof m->model.rope_layout);
  m->tool_version[sizeof m->tool_version - 1] = '\0';
  m->created[sizeof m->created - 1] = '\0';
  m->model.rope_layout[sizeof m->model.rope_layout - 1] = '\0';
}

/* ---- validation ------------------------------------------------------------ */

/* 1 when the link `name` exists, 0 when it does not; an obc_fail (< 0) when
 * looking it up hit a failed checksum. */
static int find_one_link(const TraceReader *r, const char *name) {
  htri_t exists = H5Lexists(r->file, name, H5P_DEFAULT);
  if (exists > 0) return 1;
  if (exists < 0 && trace_h5_checksum_failed()) return trace_h5_fail_damaged(r->path, name);
  return 0;
}

/* find_one_link, and in the checksummed format the raw check of the object
 * header of every group on the way and of the object itself ("/layers",
 * "/layers/003", "/layers/003/K"), each before HDF5 reads it: a forged
 * file may point from checksummed headers to unchecksummed ones. */
static int find_link(const TraceReader *r, const char *name) {
  if (!r->format.checksummed) return find_one_link(r, name);
  char prefix[256];
  size_t length = strlen(name);
  if (length >= sizeof prefix || name[0] != '/')
    return obc_fail(OBC_EFORMAT, "%s: object name %s too long", r->path, name);
  for (size_t end = 1; end <= length; end++) {
    if (end < length && name[end] != '/') continue;
    memcpy(prefix, name, end);
    prefix[end] = '\0';
    int exists = find_one_link(r, prefix);
    if (exists <= 0) return exists;
    H5L_info_t info;
    if (H5Lget_info(r->file, prefix, &info, H5P_DEFAULT) < 0)
      return trace_h5_fail_damaged(r->path, prefix);
    if (info.type != H5L_TYPE_HARD)
      return obc_fail(OBC_EFORMAT, "%s: %s is not a hard link (schema 2 has no others)", r->path,
                      prefix);
    int rc = trace_format_check_header(r->path, r->raw_fd, &r->format, info.u.address, prefix);
    if (rc) return rc;
  }
  return 1;
}

/* Schema 1 stored its strings with variable length; schema 2 must not. */
static int read_str_attr(const TraceReader *r, const char *name, char *out, size_t size) {
  return trace_h5_attr_read_str(r->path, r->file, name, r->meta.schema_version == 1, out, size);
}

static void format_dims(char *out, size_t size, int rank, const hsize_t *dims) {
  size_t used = (size_t)snprintf(out, size, "(");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)dims[i]);
  if (rank == 1 && used < size) used += (size_t)snprintf(out + used, size - used, ",");
  if (used < size) snprintf(out + used, size - used, ")");
}

/* The most deflate can compress: 1032 bytes into 1 (a run of one byte value
 * in 258-byte matches of one bit each); shuffle and Fletcher32 do not shrink
 * a chunk. A dataset whose logical size exceeds its stored bytes times this
 * cannot have been written in full. */
#define TRACE_DEFLATE_MAX_RATIO 1032

/* Refuses dataset `name` (dims, elements of type_size bytes) unless every
 * element is in the file: a written trace allocates every chunk (the writer
 * creates each dataset at its final size and writes each head), so a
 * chunked dataset must have as many allocated chunks as its chunk grid, and
 * any dataset at least its logical size divided by deflate's best ratio in
 * storage. Forged shapes of 2^60 positions with no chunk written fail here,
 * before any reader sizes a buffer by them. */
static int check_storage(const TraceReader *r, const char *name, hid_t dset, int rank,
                         const hsize_t *dims, size_t type_size) {
  uint64_t elements = 1, bytes = 0;
  for (int i = 0; i < rank; i++)
    if (__builtin_mul_overflow(elements, (uint64_t)dims[i], &elements)) elements = UINT64_MAX;
  if (!elements) return OBC_OK;
  if (__builtin_mul_overflow(elements, (uint64_t)type_size, &bytes)) bytes = UINT64_MAX;
  char shape[128];
  format_dims(shape, sizeof shape, rank, dims);
  hid_t dcpl = H5Dget_create_plist(dset);
  if (dcpl < 0) return trace_h5_fail_damaged(r->path, name);
  H5D_layout_t layout = H5Pget_layout(dcpl);
  hsize_t chunk[8] = {0};
  int chunk_rank = layout == H5D_CHUNKED ? H5Pget_chunk(dcpl, 8, chunk) : 0;
  H5Pclose(dcpl);
  if (layout == H5D_CHUNKED) {
    uint64_t grid = 1;
    for (int i = 0; i < rank; i++) {
      if (chunk_rank != rank || !chunk[i]) return trace_h5_fail_damaged(r->path, name);
      if (__builtin_mul_overflow(grid, (uint64_t)((dims[i] + chunk[i] - 1) / chunk[i]), &grid))
        grid = UINT64_MAX;
    }
    hsize_t allocated = 0;
    hid_t space = H5Dget_space(dset);
    herr_t status = space >= 0 ? H5Dget_num_chunks(dset, space, &allocated) : -1;
    if (space >= 0) H5Sclose(space);
    if (status < 0) return trace_h5_fail_damaged(r->path, name);
    if (allocated != grid)
      return obc_fail(OBC_EFORMAT,
                      "%s: %s declares shape %s in %llu chunks, but the file stores %llu of them "
                      "(a written trace stores every chunk)",
                      r->path, name, shape, (unsigned long long)grid,
                      (unsigned long long)allocated);
  }
  uint64_t stored = (uint64_t)H5Dget_storage_size(dset), most = 0;
  if (__builtin_mul_overflow(stored, (uint64_t)TRACE_DEFLATE_MAX_RATIO, &most)) most = UINT64_MAX;
  if (bytes > most)
    return obc_fail(OBC_EFORMAT,
                    "%s: %s declares shape %s (%llu bytes), but the file stores %llu bytes of it "
                    "(deflate compresses at most %d:1)",
                    r->path, name, shape, (unsigned long long)bytes, (unsigned long long)stored,
                    TRACE_DEFLATE_MAX_RATIO);
  return OBC_OK;
}

/* The type half of check_dataset. */
static int check_dataset_type(const TraceReader *r, const char *name, H5T_class_t cls,
                              size_t int_size, size_t float_size, H5T_class_t found_cls,
                              size_t type_size, bool ieee_half) {
  if (found_cls != cls)
    return obc_fail(OBC_EFORMAT, "%s: %s has the wrong type (expected %s)", r->path, name,
                    cls == H5T_FLOAT ? "floats" : "integers");
  if (cls == H5T_FLOAT && type_size != 2 && type_size != 4 && type_size != 8)
    return obc_fail(OBC_EFORMAT, "%s: %s has %zu-byte floats (expected 2, 4 or 8)", r->path, name,
                    type_size);
  if (cls == H5T_FLOAT && float_size && type_size != float_size)
    return obc_fail(OBC_EFORMAT, "%s: %s has %zu-byte floats, but dtype '%s' says %zu", r->path,
                    name, type_size, r->meta.dtype, float_size);
  if (cls == H5T_FLOAT && type_size == 2 && !ieee_half)
    return obc_fail(OBC_EFORMAT,
                    "%s: %s has a 16-bit float type that is not little-endian IEEE half", r->path,
                    name);
  if (cls == H5T_INTEGER && type_size != int_size)
    return obc_fail(OBC_EFORMAT, "%s: %s has %zu-byte integers (expected %zu)", r->path, name,
                    type_size, int_size);
  return OBC_OK;
}

/* Checks that dataset `name` exists, has the type class (and, for floats, a
 * size of `float_size` bytes, or 2, 4 or 8 when float_size is 0; for
 * integers `int_size`), exactly the shape expected, and every element
 * stored (check_storage); `meaning` names the dimensions in the message. */
static int check_dataset(const TraceReader *r, const char *name, H5T_class_t cls, size_t int_size,
                         size_t float_size, int rank, const hsize_t *expected,
                         const char *meaning) {
  int exists = find_link(r, name);
  if (exists < 0) return exists;
  if (!exists)
    return obc_fail(OBC_EFORMAT, "%s: dataset %s is missing (expected shape %s)", r->path, name,
                    meaning);
  hid_t dset = H5Dopen2(r->file, name, H5P_DEFAULT);
  if (dset < 0) {
    if (trace_h5_checksum_failed()) return trace_h5_fail_damaged(r->path, name);
    return obc_fail(OBC_EFORMAT, "%s: %s is not a dataset", r->path, name);
  }
  hid_t type = H5Dget_type(dset);
  hid_t space = H5Dget_space(dset);
  if (type < 0 || space < 0) {
    int rc = trace_h5_fail_damaged(r->path, name);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    H5Dclose(dset);
    return rc;
  }
  H5T_class_t found_cls = H5Tget_class(type);
  size_t type_size = H5Tget_size(type);
  bool ieee_half = false; /* 16-bit floats must be IEEE half (not bfloat16) */
  if (found_cls == H5T_FLOAT && type_size == 2) {
    size_t spos, epos, esize, mpos, msize;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    ieee_half = spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 &&
                H5Tget_ebias(type) == 15 && H5Tget_order(type) == H5T_ORDER_LE;
  }
  int found_rank = H5Sget_simple_extent_ndims(space);
  hsize_t dims[8] = {0};
  if (found_rank > 0 && found_rank <= 8) H5Sget_simple_extent_dims(space, dims, NULL);
  H5Tclose(type);
  H5Sclose(space);
  int rc = check_dataset_type(r, name, cls, int_size, float_size, found_cls, type_size, ieee_half);
  bool same = found_rank == rank;
  for (int i = 0; same && i < rank; i++) same = dims[i] == expected[i];
  if (!rc && !same) {
    char want[128], got[128];
    format_dims(want, sizeof want, rank, expected);
    format_dims(got, sizeof got, found_rank > 0 && found_rank <= 8 ? found_rank : 0, dims);
    rc = obc_fail(OBC_EFORMAT, "%s: %s has shape %s, expected %s = %s", r->path, name, got, want,
                  meaning);
  }
  if (!rc) rc = check_storage(r, name, dset, rank, dims, type_size);
  H5Dclose(dset);
  return rc;
}

static int read_size_attr(const TraceReader *r, const char *name, size_t *out) {
  int64_t v = 0;
  int rc = trace_h5_attr_read_i64(r->path, r->file, name, &v);
  if (rc) return rc;
  if (v < 0)
    return obc_fail(OBC_EFORMAT, "%s: attribute '%s' is negative (%lld)", r->path, name,
                    (long long)v);
  *out = (size_t)v;
  return OBC_OK;
}

static int read_flag_attr(const TraceReader *r, const char *name, bool *out) {
  int64_t v = 0;
  int rc = trace_h5_attr_read_i64(r->path, r->file, name, &v);
  if (!rc && v != 0 && v != 1)
    rc = obc_fail(OBC_EFORMAT, "%s: %s is %lld (expected 0 or 1)", r->path, name, (long long)v);
  *out = v != 0;
  return rc;
}

/* The real attributes the analysis computes with: attn_scale multiplies
 * every logit, so it must be finite and positive; rope_theta is a RoPE base
 * (finite, positive) or 0 in a trace without RoPE (rope_layout "none" or
 * architecture "synthetic"); the scaling
 * parameters are finite and not negative (0 when unused). */
static int check_reals(const TraceReader *r) {
  const TraceModel *c = &r->meta.model;
  if (!(isfinite(c->attn_scale) && c->attn_scale > 0))
    return obc_fail(OBC_EFORMAT, "%s: attn_scale is %g (expected a finite number > 0)", r->path,
                    c->attn_scale);
  bool no_rope = !strcmp(c->rope_layout, "none") || !strcmp(c->architecture, "synthetic");
  if (!(isfinite(c->rope_theta) && (c->rope_theta > 0 || (no_rope && c->rope_theta == 0))))
    return obc_fail(OBC_EFORMAT, "%s: rope_theta is %g (expected a finite RoPE base > 0%s)",
                    r->path, c->rope_theta, no_rope ? ", or 0: no RoPE" : "");
  const struct {
    const char *name;
    double value;
  } scaling[] = {
      {"rope_factor", c->rope_factor},
      {"rope_low_freq_factor", c->rope_low_freq_factor},
      {"rope_high_freq_factor", c->rope_high_freq_factor},
  };
  for (size_t i = 0; i < sizeof scaling / sizeof scaling[0]; i++)
    if (!(isfinite(scaling[i].value) && scaling[i].value >= 0))
      return obc_fail(OBC_EFORMAT, "%s: %s is %g (expected a finite number >= 0)", r->path,
                      scaling[i].name, scaling[i].value);
  return OBC_OK;
}

/* The largest extent a trace may declare: BLAS (trace_attend.h) takes int
 * extents. */
#define TRACE_MAX_EXTENT ((size_t)INT32_MAX)

/* Whether a * b * c * 8 (the bytes of as many doubles) fits a size_t. */
static bool bytes_fit(size_t a, size_t b, size_t c) {
  size_t n;
  return !__builtin_mul_overflow(a, b, &n) && !__builtin_mul_overflow(n, c, &n) &&
         !__builtin_mul_overflow(n, (size_t)8, &n);
}

/* Every size product a reader of the trace forms, checked once: each extent
 * fits an int, and every tensor's element count (and every one-head slab
 * the consumers buffer, which is smaller), times 8 bytes, fits a size_t; so
 * do the slab hashes trace_compute_hash keeps. Callers may then multiply
 * extents, and by sizeof(double), without overflow checks (trace.h). */
static int check_sizes(const TraceReader *r) {
  const TraceMeta *m = &r->meta;
  const TraceModel *c = &m->model;
  const struct {
    const char *name;
    size_t value;
  } extents[] = {
      {"n_layers", c->n_layers}, {"n_heads", c->n_heads},         {"n_kv_heads", c->n_kv_heads},
      {"head_dim", c->head_dim}, {"vocab_size", c->vocab_size},   {"n_prompt", m->n_prompt},
      {"n_decode", m->n_decode}, {"n_positions", m->n_positions}, {"n_rows", m->n_rows},
  };
  for (size_t i = 0; i < sizeof extents / sizeof extents[0]; i++)
    if (extents[i].value > TRACE_MAX_EXTENT)
      return obc_fail(OBC_EFORMAT, "%s: %s is %zu (at most %zu)", r->path, extents[i].name,
                      extents[i].value, TRACE_MAX_EXTENT);
  const struct {
    const char *name, *meaning;
    size_t a, b, c;
  } tensors[] = {
      {"K, V", "(n_kv_heads, n_positions, head_dim)", c->n_kv_heads, m->n_positions, c->head_dim},
      {"Q, O", "(n_heads, n_rows, head_dim)", c->n_heads, m->n_rows, c->head_dim},
      {"A", "(n_heads, n_rows, n_positions)", c->n_heads, m->n_rows, m->n_positions},
      {"/logits", "(n_decode, vocab_size)", 1, m->n_decode, c->vocab_size},
      {"the slab hashes", "(n_layers, 2 n_kv_heads + 4 n_heads)", c->n_layers,
       2 * c->n_kv_heads + 4 * c->n_heads, 1},
  };
  for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
    if (!bytes_fit(tensors[i].a, tensors[i].b, tensors[i].c))
      return obc_fail(OBC_EFORMAT,
                      "%s: %s of shape %s = (%zu, %zu, %zu) would need more than 2^64 bytes "
                      "(no file holds that)",
                      r->path, tensors[i].name, tensors[i].meaning, tensors[i].a, tensors[i].b,
                      tensors[i].c);
  return OBC_OK;
}

static int read_attributes(TraceReader *r) {
  TraceMeta *m = &r->meta;
  TraceModel *c = &m->model;
  const char *p = r->path;
  hid_t f = r->file;
  int64_t needle = 0;
  bool has_tokens = false;
  int rc = 0;
  rc = rc ? rc : read_str_attr(r, "tool_version", m->tool_version, sizeof m->tool_version);
  rc = rc ? rc : read_str_attr(r, "producer", m->producer, sizeof m->producer);
  rc = rc ? rc : read_str_attr(r, "created", m->created, sizeof m->created);
  rc = rc ? rc : read_str_attr(r, "dtype", m->dtype, sizeof m->dtype);
  rc = rc ? rc : read_str_attr(r, "model_name", c->name, sizeof c->name);
  rc = rc ? rc : read_str_attr(r, "architecture", c->architecture, sizeof c->architecture);
  rc = rc ? rc : read_size_attr(r, "n_layers", &c->n_layers);
  rc = rc ? rc : read_size_attr(r, "n_heads", &c->n_heads);
  rc = rc ? rc : read_size_attr(r, "n_kv_heads", &c->n_kv_heads);
  rc = rc ? rc : read_size_attr(r, "head_dim", &c->head_dim);
  rc = rc ? rc : read_size_attr(r, "vocab_size", &c->vocab_size);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_theta", &c->rope_theta);
  rc = rc ? rc : read_str_attr(r, "rope_scaling", c->rope_scaling, sizeof c->rope_scaling);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_factor", &c->rope_factor);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_low_freq_factor", &c->rope_low_freq_factor);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_high_freq_factor", &c->rope_high_freq_factor);
  rc = rc ? rc : read_size_attr(r, "rope_original_context", &c->rope_original_context);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "attn_scale", &c->attn_scale);
  c->rope_layout[0] = '\0'; /* optional (SCHEMA.md): a trace may lack it */
  if (!rc && H5Aexists(r->file, "rope_layout") > 0)
    rc = read_str_attr(r, "rope_layout", c->rope_layout, sizeof c->rope_layout);
  rc = rc ? rc : read_size_attr(r, "n_prompt", &m->n_prompt);
  rc = rc ? rc : read_size_attr(r, "n_decode", &m->n_decode);
  rc = rc ? rc : read_size_attr(r, "n_positions", &m->n_positions);
  rc = rc ? rc : read_size_attr(r, "n_rows", &m->n_rows);
  rc = rc ? rc : trace_h5_attr_read_i64(p, f, "needle_found", &needle);
  rc = rc ? rc : read_flag_attr(r, "has_tokens", &has_tokens);
  rc = rc ? rc : read_flag_attr(r, "has_attn", &m->has_attn);
  rc = rc ? rc : read_flag_attr(r, "has_logits", &m->has_logits);
  if (!rc && m->schema_version >= 3) { /* the column sums: version 3 only */
    rc = read_flag_attr(r, "has_column_sums", &m->has_column_sums);
    if (!rc) rc = read_size_attr(r, "agnostic_rows", &m->agnostic_rows);
    if (!rc && !m->has_column_sums)
      rc = obc_fail(OBC_EFORMAT, "%s: schema version 3 but has_column_sums is 0", p);
    /* optional: absent in schema-3 traces written before they were added */
    if (!rc && H5Aexists(r->file, "has_query_stats") > 0)
      rc = read_flag_attr(r, "has_query_stats", &m->has_query_stats);
    int64_t first_row = TRACE_QSTATS_FIRST_ROW;
    if (!rc && m->has_query_stats)
      rc = trace_h5_attr_read_i64(p, f, "query_stats_first_row", &first_row);
    if (!rc && first_row != TRACE_QSTATS_FIRST_ROW)
      rc = obc_fail(OBC_EFORMAT, "%s: query_stats_first_row is %lld (expected %d)", p,
                    (long long)first_row, TRACE_QSTATS_FIRST_ROW);
  }
  if (rc) return rc;
  m->needle_found = (int)needle;
  char escaped[OBC_ESCAPED_SIZE(sizeof m->dtype)];
  if (strcmp(m->dtype, "f32") && strcmp(m->dtype, "f16"))
    return obc_fail(OBC_EFORMAT, "%s: dtype '%s' (expected f32 or f16)", p,
                    obc_text_escape(escaped, sizeof escaped, m->dtype, false));
  if (!c->n_layers || !c->n_heads || !c->n_kv_heads || !c->head_dim || c->n_heads % c->n_kv_heads)
    return obc_fail(
        OBC_EFORMAT,
        "%s: inconsistent model shape (layers %zu, heads %zu, kv heads %zu, head dim %zu)", p,
        c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim);
  if (m->n_positions != m->n_prompt + m->n_decode)
    return obc_fail(OBC_EFORMAT, "%s: n_positions is %zu, expected n_prompt + n_decode = %zu", p,
                    m->n_positions, m->n_prompt + m->n_decode);
  if (m->has_logits && !c->vocab_size)
    return obc_fail(OBC_EFORMAT, "%s: has_logits is set but vocab_size is 0", p);
  if (m->has_column_sums && (!m->n_prompt || m->agnostic_rows > m->n_prompt))
    return obc_fail(OBC_EFORMAT, "%s: agnostic_rows is %zu, expected at most n_prompt = %zu", p,
                    m->agnostic_rows, m->n_prompt);
  if (needle < -1 || needle > 1)
    return obc_fail(OBC_EFORMAT, "%s: needle_found is %lld (expected 1, 0 or -1: not applicable)",
                    p, (long long)needle);
  rc = check_reals(r);
  if (!rc) rc = check_sizes(r);
  if (rc) return rc;
  /* has_tokens is implied by meta->tokens being non-NULL after the read. */
  if (has_tokens) {
    hsize_t dims[1] = {m->n_positions};
    rc = check_dataset(r, "/tokens", H5T_INTEGER, 4, 0, 1, dims, "(n_positions)");
    if (rc) return rc;
    m->tokens = trace_alloc(r, m->n_positions, sizeof *m->tokens, "/tokens");
    if (!m->tokens) return OBC_ENOMEM;
    hid_t dset = H5Dopen2(f, "/tokens", H5P_DEFAULT);
    herr_t status =
        dset >= 0 ? H5Dread(dset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->tokens) : -1;
    rc = status < 0 ? trace_h5_fail_damaged(p, "/tokens") : OBC_OK;
    if (dset >= 0) H5Dclose(dset);
    if (rc) return rc;
  }
  return OBC_OK;
}

static int read_row_positions(TraceReader *r) {
  TraceMeta *m = &r->meta;
  hsize_t dims[1] = {m->n_rows};
  int rc = check_dataset(r, "/row_positions", H5T_INTEGER, 8, 0, 1, dims, "(n_rows)");
  if (rc) return rc;
  m->row_positions = trace_alloc(r, m->n_rows, sizeof *m->row_positions, "/row_positions");
  if (!m->row_positions) return OBC_ENOMEM;
  hid_t dset = H5Dopen2(r->file, "/row_positions", H5P_DEFAULT);
  herr_t status =
      dset < 0    ? -1
      : m->n_rows ? H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->row_positions)
                  : 0;
  rc = status < 0 ? trace_h5_fail_damaged(r->path, "/row_positions") : OBC_OK;
  if (dset >= 0) H5Dclose(dset);
  if (rc) return rc;
  for (size_t i = 0; i < m->n_rows; i++) {
    int64_t pos = m->row_positions[i];
    if (pos < 0 || pos >= (int64_t)m->n_positions || (i && pos <= m->row_positions[i - 1]))
      return obc_fail(OBC_EFORMAT,
                      "%s: /row_positions[%zu] = %lld is not strictly increasing within [0, %zu)",
                      r->path, i, (long long)pos, m->n_positions);
  }
  return OBC_OK;
}

static int read_texts(TraceReader *r) {
  TraceMeta *m = &r->meta;
  bool variable = m->schema_version == 1;
  int rc = find_link(r, "/prompt_text");
  if (rc > 0) rc = trace_h5_text_read(r->path, r->file, "/prompt_text", variable, &m->prompt_text);
  if (rc >= 0) rc = find_link(r, "/generated_text");
  if (rc > 0)
    rc = trace_h5_text_read(r->path, r->file, "/generated_text", variable, &m->generated_text);
  return rc < 0 ? rc : OBC_OK;
}

/* Reads the span dataset /spans/<span->name> into span. */
static int read_span(TraceReader *r, TraceSpan *span) {
  const TraceMeta *m = &r->meta;
  char name[128];
  snprintf(name, sizeof name, "/spans/%s", span->name);
  hsize_t dims[1] = {2};
  int rc = check_dataset(r, name, H5T_INTEGER, 8, 0, 1, dims, "(2) = [begin, end)");
  if (rc) return rc;
  int64_t range[2];
  hid_t dset = H5Dopen2(r->file, name, H5P_DEFAULT);
  herr_t status =
      dset >= 0 ? H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, range) : -1;
  rc = status < 0 ? trace_h5_fail_damaged(r->path, name) : OBC_OK;
  if (dset >= 0) H5Dclose(dset);
  if (rc) return rc;
  if (range[0] < 0 || range[1] < range[0] || range[1] > (int64_t)m->n_prompt)
    return obc_fail(OBC_EFORMAT,
                    "%s: span %s = [%lld, %lld) is outside the prompt [0, %zu) (spans name prompt "
                    "tokens)",
                    r->path, name, (long long)range[0], (long long)range[1], m->n_prompt);
  span->begin = range[0];
  span->end = range[1];
  return OBC_OK;
}

/* Schema 2: the spans the `names` attribute of /spans lists, in its order. */
static int read_named_spans(TraceReader *r) {
  TraceMeta *m = &r->meta;
  int exists = find_link(r, "/spans");
  if (exists < 0) return exists;
  if (!exists) return obc_fail(OBC_EFORMAT, "%s: group /spans is missing", r->path);
  hid_t group = H5Gopen2(r->file, "/spans", H5P_DEFAULT);
  if (group < 0) return trace_h5_fail_damaged(r->path, "/spans");
  char names[OBC_TRACE_MAX_SPANS][sizeof m->spans[0].name];
  size_t count = 0;
  int rc = trace_h5_attr_read_names(r->path, group, "names", &names[0][0], sizeof names[0],
                                    OBC_TRACE_MAX_SPANS, &count);
  H5Gclose(group);
  for (size_t i = 0; !rc && i < count; i++) {
    TraceSpan *span = &m->spans[i];
    memcpy(span->name, names[i], sizeof span->name);
    char escaped[OBC_ESCAPED_SIZE(sizeof span->name)];
    obc_text_escape(escaped, sizeof escaped, span->name, false);
    if (!span->name[0] || strchr(span->name, '/') || span->name[0] == '.')
      rc = obc_fail(OBC_EFORMAT, "%s: /spans names entry %zu '%s' is not a span name", r->path, i,
                    escaped);
    for (size_t j = 0; !rc && j < i; j++)
      if (!strcmp(m->spans[j].name, span->name))
        rc = obc_fail(OBC_EFORMAT, "%s: /spans names '%s' twice", r->path, escaped);
    if (!rc) rc = read_span(r, span);
    if (!rc) m->n_spans = i + 1;
  }
  return rc;
}

/* Schema 1: the links of /spans in creation order. Walking links by index is
 * what HDF5 1.10 crashes on in damaged files, hence schema 2's names list. */
static int read_linked_spans(TraceReader *r) {
  TraceMeta *m = &r->meta;
  if (H5Lexists(r->file, "/spans", H5P_DEFAULT) <= 0)
    return obc_fail(OBC_EFORMAT, "%s: group /spans is missing", r->path);
  hid_t group = H5Gopen2(r->file, "/spans", H5P_DEFAULT);
  if (group < 0) return obc_fail(OBC_EFORMAT, "%s: /spans is not a group", r->path);
  H5G_info_t info;
  hid_t gcpl = H5Gget_create_plist(group);
  unsigned order_flags = 0;
  H5Pget_link_creation_order(gcpl, &order_flags);
  H5Pclose(gcpl);
  H5_index_t index = (order_flags & H5P_CRT_ORDER_TRACKED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  int rc =
      H5Gget_info(group, &info) < 0 ? obc_fail(OBC_EFORMAT, "%s: cannot list /spans", r->path) : 0;
  if (!rc && info.nlinks > OBC_TRACE_MAX_SPANS)
    rc = obc_fail(OBC_EFORMAT, "%s: /spans has %llu entries (at most %d)", r->path,
                  (unsigned long long)info.nlinks, OBC_TRACE_MAX_SPANS);
  for (hsize_t i = 0; !rc && i < info.nlinks; i++) {
    TraceSpan *span = &m->spans[m->n_spans];
    ssize_t n = H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, span->name, sizeof span->name,
                                   H5P_DEFAULT);
    if (n <= 0 || (size_t)n >= sizeof span->name) {
      rc = obc_fail(OBC_EFORMAT, "%s: /spans entry %llu has no usable name", r->path,
                    (unsigned long long)i);
      break;
    }
    rc = read_span(r, span);
    if (!rc) m->n_spans++;
  }
  H5Gclose(group);
  return rc;
}

static int check_layers(const TraceReader *r) {
  const TraceMeta *m = &r->meta;
  const TraceModel *c = &m->model;
  hsize_t kv[3] = {c->n_kv_heads, m->n_positions, c->head_dim};
  hsize_t rows[3] = {c->n_heads, m->n_rows, c->head_dim};
  hsize_t lse[2] = {c->n_heads, m->n_rows};
  hsize_t attn[3] = {c->n_heads, m->n_rows, m->n_positions};
  /* K V Q O A are stored in dtype; lse (and the logits) as float32 or wider. */
  size_t dtype_size = strcmp(m->dtype, "f16") ? 4 : 2;
  struct {
    const char *name;
    int rank;
    const hsize_t *dims;
    size_t float_size;
    const char *meaning;
  } sets[] = {
      {"K", 3, kv, dtype_size, "(n_kv_heads, n_positions, head_dim)"},
      {"V", 3, kv, dtype_size, "(n_kv_heads, n_positions, head_dim)"},
      {"Q", 3, rows, dtype_size, "(n_heads, n_rows, head_dim)"},
      {"O", 3, rows, dtype_size, "(n_heads, n_rows, head_dim)"},
      {"lse", 2, lse, 0, "(n_heads, n_rows)"},
      {"A", 3, attn, dtype_size, "(n_heads, n_rows, n_positions)"},
  };
  size_t n_sets = m->has_attn ? 6 : 5;
  for (size_t layer = 0; layer < c->n_layers; layer++) {
    for (size_t i = 0; i < n_sets; i++) {
      char name[64];
      trace_h5_layer_dataset(name, sizeof name, layer, sets[i].name);
      int rc = check_dataset(r, name, H5T_FLOAT, 0, sets[i].float_size, sets[i].rank, sets[i].dims,
                             sets[i].meaning);
      if (rc) return rc;
    }
  }
  if (m->has_column_sums) {
    hsize_t sums[3] = {TRACE_ROWS_VARIANTS, c->n_heads, m->n_prompt};
    for (size_t layer = 0; layer < c->n_layers; layer++)
      for (int k = 0; k < OBC_TRACE_SUMS_KINDS; k++) {
        char name[64];
        trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_sums_name(k));
        int rc = check_dataset(r, name, H5T_FLOAT, 0, 4, 3, sums, "(2, n_heads, n_prompt)");
        if (rc) return rc;
      }
    hsize_t counts[2] = {TRACE_ROWS_VARIANTS, m->n_prompt};
    int rc = check_dataset(r, "/column_counts", H5T_INTEGER, 8, 0, 2, counts, "(2, n_prompt)");
    if (rc) return rc;
  }
  if (m->has_query_stats) {
    size_t d = c->head_dim;
    hsize_t qsum[3] = {TRACE_ROWS_VARIANTS, c->n_heads, d};
    hsize_t outer[3] = {TRACE_ROWS_VARIANTS, c->n_heads, d * d};
    for (size_t layer = 0; layer < c->n_layers; layer++) {
      char name[64];
      trace_h5_layer_dataset(name, sizeof name, layer, "q_sum");
      int rc = check_dataset(r, name, H5T_FLOAT, 0, 8, 3, qsum, "(2, n_heads, head_dim)");
      trace_h5_layer_dataset(name, sizeof name, layer, "q_outer");
      if (!rc) rc = check_dataset(r, name, H5T_FLOAT, 0, 8, 3, outer, "(2, n_heads, head_dim^2)");
      if (rc) return rc;
    }
    hsize_t counts[1] = {TRACE_ROWS_VARIANTS}, freq[1] = {d / 2};
    int rc = check_dataset(r, "/query_counts", H5T_INTEGER, 8, 0, 1, counts, "(2)");
    if (!rc) rc = check_dataset(r, "/rope_inv_freq", H5T_FLOAT, 0, 8, 1, freq, "(head_dim / 2)");
    if (rc) return rc;
  }
  if (m->has_logits) {
    hsize_t logits[2] = {m->n_decode, c->vocab_size};
    return check_dataset(r, "/logits", H5T_FLOAT, 0, 0, 2, logits, "(n_decode, vocab_size)");
  }
  return OBC_OK;
}

/* Schema 2's content_hash: 16 lower-case hex digits. */
static int read_content_hash(TraceReader *r) {
  char hash[64];
  int rc = read_str_attr(r, "content_hash", hash, sizeof hash);
  if (rc) return rc;
  char escaped[OBC_ESCAPED_SIZE(sizeof hash)];
  if (!trace_content_hash_valid(hash))
    return obc_fail(OBC_EFORMAT, "%s: content_hash '%s' is not 16 lower-case hex digits", r->path,
                    obc_text_escape(escaped, sizeof escaped, hash, false));
  memcpy(r->meta.content_hash, hash, sizeof r->meta.content_hash);
  return OBC_OK;
}

/* Whether path is a readable file; the message says why not. */
static int check_readable(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  if (S_ISDIR(st.st_mode)) return obc_fail(OBC_EIO, "%s: is a folder, not a trace file", path);
  if (access(path, R_OK) != 0)
    return obc_fail(OBC_EIO, "%s: cannot read: %s", path, strerror(errno));
  return OBC_OK;
}

/* The derived data's attributes against the rest: a flag that says the
 * column sums or query statistics are absent while their datasets are
 * there (or, in schema 2, a has_column_sums attribute of 1), and agnostic
 * rows that are not the rows before the question span (all prompt rows
 * when there is none): rows that reach into the question are not
 * query-agnostic. */
static int check_derived_meta(TraceReader *r) {
  const TraceMeta *m = &r->meta;
  static const struct {
    const char *dataset, *flag;
  } derived[] = {{"/column_counts", "has_column_sums"}, {"/query_counts", "has_query_stats"}};
  for (size_t i = 0; i < sizeof derived / sizeof *derived; i++) {
    bool flag = i == 0 ? m->has_column_sums : m->has_query_stats;
    int exists = find_link(r, derived[i].dataset);
    if (exists < 0) return exists;
    if (exists && !flag)
      return obc_fail(OBC_EFORMAT, "%s: %s is 0 (or absent), but the trace holds %s", r->path,
                      derived[i].flag, derived[i].dataset);
  }
  if (m->schema_version < 3 && H5Aexists(r->file, "has_column_sums") > 0) {
    bool flag = false;
    int rc = read_flag_attr(r, "has_column_sums", &flag);
    if (rc) return rc;
    if (flag)
      return obc_fail(OBC_EFORMAT,
                      "%s: has_column_sums is 1 in a schema-%d trace (column sums are schema 3)",
                      r->path, m->schema_version);
  }
  if (!m->has_column_sums) return OBC_OK;
  const TraceSpan *question = trace_meta_find_span(m, "question");
  size_t before = question ? (size_t)question->begin : m->n_prompt;
  if (m->agnostic_rows != before)
    return obc_fail(OBC_EFORMAT,
                    "%s: agnostic_rows is %zu, but the rows before the question are %zu (%s)",
                    r->path, m->agnostic_rows, before,
                    question ? "the question span's begin" : "no question span: every prompt row");
  return OBC_OK;
}

static int open_checked(TraceReader *r) {
  r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (r->file < 0)
    return obc_fail(OBC_EFORMAT, "%s: cannot open as HDF5: %s", r->path, trace_h5_damage());
  int64_t version = 0;
  htri_t has_version = H5Aexists(r->file, "schema_version");
  if (has_version < 0) return trace_h5_fail_damaged(r->path, "schema_version");
  if (!has_version)
    return obc_fail(OBC_EFORMAT, "%s: not an obcache trace (no schema_version attribute)", r->path);
  int rc = trace_h5_attr_read_i64(r->path, r->file, "schema_version", &version);
  if (rc) return rc;
  if (version < 1 || version > OBC_TRACE_SCHEMA_VERSION)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: schema version %lld, this obcache reads versions 1 to %d", r->path,
                    (long long)version, OBC_TRACE_SCHEMA_VERSION);
  r->meta.schema_version = (int)version;
  if (version >= 2 && !r->format.checksummed)
    return obc_fail(OBC_EFORMAT,
                    "%s: says schema_version %lld but is not in the checksummed HDF5 1.10 format "
                    "that schema 2 is written in (superblock version %d, expected 3 with "
                    "version-2 object headers): forged or damaged",
                    r->path, (long long)version, r->format.superblock_version);
  if (version == 1 && !obc_child_active()) {
    r->legacy = true; /* variable-length strings: read in a child */
    return OBC_OK;
  }
  int64_t complete = 0;
  htri_t has_complete = H5Aexists(r->file, "complete");
  if (has_complete < 0) return trace_h5_fail_damaged(r->path, "complete");
  if (has_complete) rc = trace_h5_attr_read_i64(r->path, r->file, "complete", &complete);
  if (rc) return rc;
  if (complete != 1)
    return obc_fail(
        OBC_EFORMAT,
        "%s: incomplete trace (attribute 'complete' is not 1: the writer did not finish)", r->path);
  r->meta.complete = true;
  if (version >= 2) rc = read_content_hash(r);
  if (!rc) rc = read_attributes(r);
  if (!rc) rc = read_row_positions(r);
  if (!rc) rc = read_texts(r);
  if (!rc) rc = version >= 2 ? read_named_spans(r) : read_linked_spans(r);
  if (!rc) rc = check_derived_meta(r);
  if (!rc) rc = check_layers(r);
  return rc;
}

int trace_open(const char *path, TraceReader **out) {
  assert(path && out);
  *out = NULL;
  trace_h5_silence();
  if (strlen(path) >= sizeof((TraceReader *)0)->path)
    return obc_fail(OBC_EINVAL, "%s: path too long", path);
  TraceReader *r = obc_calloc(1, sizeof *r, "trace reader");
  if (!r) return OBC_ENOMEM;
  snprintf(r->path, sizeof r->path, "%s", path);
  r->file = -1;
  r->meta.needle_found = -1;
  r->raw_fd = -1;
  int rc = check_readable(path);
  if (!rc) rc = trace_format_probe(path, "an obcache trace", &r->format);
  if (!rc && r->format.checksummed) {
    r->raw_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->raw_fd < 0) rc = obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  bool legacy = !rc && !r->format.checksummed && !obc_child_active();
  if (!rc && !legacy) WITH_HDF5_LOCK(rc = open_checked(r));
  legacy |= !rc && r->legacy;
  if (rc || legacy) {
    trace_close(r);
    return legacy ? trace_legacy_open(path, out) : rc;
  }
  *out = r;
  return OBC_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

static int read_slab_locked(TraceReader *r, const char *dset_name, size_t head, bool whole,
                            bool as_float, void *out, size_t count, size_t *stored_size);

/* Reads slab [head, :, ...] of a layer dataset (or the whole dataset when
 * whole) into out (count elements). as_float: 4- and 8-byte floats arrive as
 * float, halves raw (2 bytes each, widened by the caller); otherwise every
 * element arrives exactly as stored. *stored_size is the stored element
 * size. Fletcher32 checks every chunk on the way. */
static int read_slab_stored(TraceReader *r, const char *dset_name, size_t head, bool whole,
                            bool as_float, void *out, size_t count, size_t *stored_size) {
  int rc = OBC_OK;
  WITH_HDF5_LOCK(
      rc = read_slab_locked(r, dset_name, head, whole, as_float, out, count, stored_size));
  return rc;
}

/* read_slab_stored, under the HDF5 lock. */
static int read_slab_locked(TraceReader *r, const char *dset_name, size_t head, bool whole,
                            bool as_float, void *out, size_t count, size_t *stored_size) {
  int rc = OBC_OK;
  {
    hid_t dset = H5Dopen2(r->file, dset_name, H5P_DEFAULT);
    hid_t file_space = dset >= 0 ? H5Dget_space(dset) : -1;
    hid_t type = dset >= 0 ? H5Dget_type(dset) : -1;
    if (dset < 0 || file_space < 0 || type < 0) {
      rc = trace_h5_fail_damaged(r->path, dset_name);
    } else {
      *stored_size = H5Tget_size(type);
      bool convert = as_float && *stored_size != 2;
      int rank = H5Sget_simple_extent_ndims(file_space);
      hsize_t dims[3], start[3] = {head, 0, 0}, block[3];
      H5Sget_simple_extent_dims(file_space, dims, NULL);
      for (int i = 0; i < rank; i++) block[i] = dims[i];
      if (!whole) {
        block[0] = 1;
        H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, block, NULL);
      }
      /* A memory space of the block's own shape lets HDF5 copy whole rows. */
      assert(count == (size_t)H5Sget_select_npoints(file_space));
      hid_t mem_space = H5Screate_simple(rank, block, NULL);
      herr_t status =
          H5Dread(dset, convert ? H5T_NATIVE_FLOAT : type, mem_space, file_space, H5P_DEFAULT, out);
      if (status < 0) rc = trace_h5_fail_damaged(r->path, dset_name);
      H5Sclose(mem_space);
    }
    if (type >= 0) H5Tclose(type);
    if (file_space >= 0) H5Sclose(file_space);
    if (dset >= 0) H5Dclose(dset);
  }
  return rc;
}

/* Reads a slab as floats. Halves are read raw into the front of out and
 * widened in place, back to front. */
static int read_slab(TraceReader *r, const char *dset_name, size_t head, bool whole, float *out,
                     size_t count) {
  size_t stored_size = 0;
  int rc = read_slab_stored(r, dset_name, head, whole, true, out, count, &stored_size);
  if (rc || stored_size != 2) return rc;
  const uint16_t *bits = (const uint16_t *)(void *)out;
  for (size_t i = count; i-- > 0;) out[i] = trace_h5_float_from_half(bits[i]);
  return OBC_OK;
}

/* OBC_EVALUE naming the dataset, layer, head and element if any value of
 * data (rows, cols) is NaN or infinite. */
static int check_finite(const TraceReader *r, const char *dset_name, size_t layer,
                        const char *head_kind, size_t head, const float *data, size_t rows,
                        size_t cols, const char *row_kind) {
  /* One vectorised pass (NaN fails the comparison too); the element is looked
   * for only when there is one. */
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (size_t i = 0; i < rows * cols; i++) bad |= !(fabsf(data[i]) <= FLT_MAX);
  if (!bad) return OBC_OK;
  for (size_t i = 0; i < rows * cols; i++) {
    if (isfinite(data[i])) continue;
    if (head_kind)
      return obc_fail(OBC_EVALUE, "%s: %s, layer %zu, %s %zu: %s at %s %zu, column %zu", r->path,
                      dset_name, layer, head_kind, head, isnan(data[i]) ? "NaN" : "Inf", row_kind,
                      i / cols, i % cols);
    return obc_fail(OBC_EVALUE, "%s: %s: %s at %s %zu, column %zu", r->path, dset_name,
                    isnan(data[i]) ? "NaN" : "Inf", row_kind, i / cols, i % cols);
  }
  return OBC_OK;
}

/* The slot of slab (layer, name, head) among the kept ones, or NULL when
 * slabs are not kept or name is not a kind that is. */
static float **kept_slot(const TraceReader *r, size_t layer, const char *name, size_t head) {
  if (!r->kept) return NULL;
  for (size_t kind = 0; kind < KEPT_KINDS; kind++)
    if (!strcmp(name, kept_names[kind]))
      return &r->kept[(layer * KEPT_KINDS + kind) * r->meta.model.n_heads + head];
  return NULL;
}

/* Copies the kept slab of slot into out (bytes); false when there is none. */
static bool copy_kept(float *const *slot, float *out, size_t bytes) {
  bool kept = false;
#pragma omp critical(obc_trace_kept)
  {
    if (*slot) {
      memcpy(out, *slot, bytes);
      kept = true;
    }
  }
  return kept;
}

/* Keeps a copy of data (bytes) in slot while the limit allows. */
static void keep_slab(TraceReader *r, float **slot, const float *data, size_t bytes) {
#pragma omp critical(obc_trace_kept)
  {
    if (!*slot && bytes <= r->kept_limit - r->kept_bytes) {
      float *copy = malloc(bytes);
      if (copy) {
        memcpy(copy, data, bytes);
        *slot = copy;
        r->kept_bytes += bytes;
      }
    }
  }
}

static int read_layer_head(TraceReader *r, size_t layer, const char *name, const char *head_kind,
                           size_t head, float *out, size_t rows, size_t cols,
                           const char *row_kind) {
  float **slot = kept_slot(r, layer, name, head);
  size_t bytes = rows * cols * sizeof *out;
  if (slot && copy_kept(slot, out, bytes)) return OBC_OK;
  char dset_name[64];
  trace_h5_layer_dataset(dset_name, sizeof dset_name, layer, name);
  int rc = read_slab(r, dset_name, head, false, out, rows * cols);
  if (!rc) rc = check_finite(r, dset_name, layer, head_kind, head, out, rows, cols, row_kind);
  if (!rc && slot) keep_slab(r, slot, out, bytes);
  return rc;
}

int trace_read_kv(TraceReader *r, size_t layer, size_t kv_head, float *K, float *V) {
  const TraceMeta *m = &r->meta;
  assert(layer < m->model.n_layers && kv_head < m->model.n_kv_heads);
  int rc = OBC_OK;
  if (K)
    rc = read_layer_head(r, layer, "K", "KV head", kv_head, K, m->n_positions, m->model.head_dim,
                         "position");
  if (!rc && V)
    rc = read_layer_head(r, layer, "V", "KV head", kv_head, V, m->n_positions, m->model.head_dim,
                         "position");
  return rc;
}

int trace_read_rows(TraceReader *r, size_t layer, size_t head, float *Q, float *O, float *lse) {
  const TraceMeta *m = &r->meta;
  assert(layer < m->model.n_layers && head < m->model.n_heads);
  int rc = OBC_OK;
  if (Q) rc = read_layer_head(r, layer, "Q", "head", head, Q, m->n_rows, m->model.head_dim, "row");
  if (!rc && O)
    rc = read_layer_head(r, layer, "O", "head", head, O, m->n_rows, m->model.head_dim, "row");
  if (!rc && lse) rc = read_layer_head(r, layer, "lse", "head", head, lse, m->n_rows, 1, "row");
  return rc;
}

int trace_read_attn(TraceReader *r, size_t layer, size_t head, float *A) {
  const TraceMeta *m = &r->meta;
  assert(layer < m->model.n_layers && head < m->model.n_heads && A);
  if (!m->has_attn)
    return obc_fail(OBC_ENOTFOUND, "%s: the trace has no attention rows A (re-create it with them)",
                    r->path);
  return read_layer_head(r, layer, "A", "head", head, A, m->n_rows, m->n_positions, "row");
}

int trace_read_logits(TraceReader *r, float *logits) {
  const TraceMeta *m = &r->meta;
  assert(logits);
  if (!m->has_logits) return obc_fail(OBC_ENOTFOUND, "%s: the trace has no logits", r->path);
  int rc = read_slab(r, "/logits", 0, true, logits, m->n_decode * m->model.vocab_size);
  if (!rc)
    rc = check_finite(r, "/logits", 0, NULL, 0, logits, m->n_decode, m->model.vocab_size,
                      "decode step");
  return rc;
}

/* ---- column sums ------------------------------------------------------------ */

static const char *const rows_names[TRACE_ROWS_VARIANTS] = {"agnostic", "all"};

/* How far a stored attention sum may stray from what its rows allow: each
 * of its terms is a softmax weight the runtime computed in float (relative
 * rounding ~1e-7 over a row of up to 10^5 keys, ~1e-5 accumulated), summed
 * in double and stored as f32 (2^-24); 1e-3 leaves a margin of 100 and still
 * catches a forged or misplaced sum (off by whole rows). */
#define SUMS_ROW_TOLERANCE 1e-3

/* What the rows of one variant allow the attention sums of a layer
 * (n_heads, n_prompt): a weight is at most 1, so the sum at p is at most
 * the number of rows that saw p (end - p); each row's weights over the
 * prompt add up to 1, so every head's sums add up to the rows, end. */
static int check_attn_sums(const TraceReader *r, const char *name, size_t v, const float *sums) {
  const TraceMeta *m = &r->meta;
  size_t n = m->n_prompt, end = v == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : n;
  for (size_t h = 0; h < m->model.n_heads; h++) {
    double total = 0.0;
    for (size_t p = 0; p < n; p++) {
      double x = sums[h * n + p], rows = p < end ? (double)(end - p) : 0.0;
      total += x;
      if (x > rows * (1.0 + SUMS_ROW_TOLERANCE))
        return obc_fail(OBC_EVALUE,
                        "%s: %s, rows %s, head %zu, position %zu: %.9g, more than the %.0f rows "
                        "that saw it allow (each weight is at most 1)",
                        r->path, name, rows_names[v], h, p, x, rows);
    }
    if (fabs(total - (double)end) > SUMS_ROW_TOLERANCE * (double)end)
      return obc_fail(OBC_EVALUE,
                      "%s: %s, rows %s, head %zu: the sums add up to %.9g, not to the %zu rows "
                      "(each row's weights add up to 1)",
                      r->path, name, rows_names[v], h, total, end);
  }
  return OBC_OK;
}

/* One variant of a column-sum dataset of layer into out (n_heads, n_prompt)
 * as doubles; OBC_EVALUE for a value that is not finite and >= 0. scratch
 * holds both variants as floats. */
static int read_sums_dataset(TraceReader *r, size_t layer, int kind, TraceSumRows rows,
                             float *scratch, double *out) {
  const TraceMeta *m = &r->meta;
  size_t plane = m->model.n_heads * m->n_prompt;
  char name[64];
  trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_sums_name(kind));
  int rc = read_slab(r, name, 0, true, scratch, TRACE_ROWS_VARIANTS * plane);
  for (size_t v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++)
    for (size_t i = 0; i < plane; i++) {
      float x = scratch[v * plane + i];
      if (isfinite(x) && x >= 0.0f) continue;
      return obc_fail(OBC_EVALUE,
                      "%s: %s, rows %s, head %zu, position %zu: %s (expected a finite "
                      "sum >= 0)",
                      r->path, name, rows_names[v], i / m->n_prompt, i % m->n_prompt,
                      isnan(x)   ? "NaN"
                      : isinf(x) ? "Inf"
                                 : "negative");
    }
  /* The agnostic rows are a part of all rows: a sum over fewer non-negative
   * terms (the capture keeps it as a snapshot of the running one), and 0
   * where none of them reached. */
  for (size_t i = 0; !rc && i < plane; i++) {
    size_t p = i % m->n_prompt;
    double agnostic = scratch[i], all = scratch[plane + i];
    if (p < m->agnostic_rows ? agnostic > all * (1.0 + SUMS_ROW_TOLERANCE) : agnostic != 0.0)
      rc = obc_fail(OBC_EVALUE, "%s: %s, head %zu, position %zu: the agnostic sum %.9g %s", r->path,
                    name, i / m->n_prompt, p, agnostic,
                    p < m->agnostic_rows ? "exceeds the sum over all prompt rows"
                                         : "is not 0 beyond the rows before the question");
  }
  for (size_t v = 0; !rc && kind == OBC_TRACE_SUMS_ATTN && v < TRACE_ROWS_VARIANTS; v++)
    rc = check_attn_sums(r, name, v, scratch + v * plane);
  for (size_t i = 0; !rc && i < plane; i++) out[i] = scratch[(size_t)rows * plane + i];
  return rc;
}

/* /column_counts: row v, position p must be the number of rows of variant v
 * at or after p, (end_v - p) for p < end_v and 0 beyond. */
static int read_column_counts(TraceReader *r, TraceSumRows rows, int64_t *out) {
  const TraceMeta *m = &r->meta;
  size_t n = m->n_prompt, size = 0;
  int64_t *all = trace_alloc(r, TRACE_ROWS_VARIANTS * n, sizeof *all, "/column_counts");
  if (!all) return OBC_ENOMEM;
  int rc =
      read_slab_stored(r, "/column_counts", 0, true, false, all, TRACE_ROWS_VARIANTS * n, &size);
  for (size_t v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++) {
    size_t end = v == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : n;
    for (size_t p = 0; !rc && p < n; p++) {
      int64_t expected = p < end ? (int64_t)(end - p) : 0;
      if (all[v * n + p] != expected)
        rc = obc_fail(
            OBC_EVALUE,
            "%s: /column_counts, rows %s, position %zu: %lld rows, expected %lld (rows of "
            "[0, %zu) at or after it)",
            r->path, rows_names[v], p, (long long)all[v * n + p], (long long)expected, end);
    }
  }
  if (!rc) memcpy(out, all + (size_t)rows * n, n * sizeof *out);
  free(all);
  return rc;
}

int trace_read_column_sums(TraceReader *r, size_t layer, TraceSumRows rows, double *attn,
                           double *obc, int64_t *counts) {
  const TraceMeta *m = &r->meta;
  assert(layer < m->model.n_layers && (rows == TRACE_ROWS_AGNOSTIC || rows == TRACE_ROWS_ALL));
  if (!m->has_column_sums)
    return obc_fail(OBC_ENOTFOUND,
                    "%s: the trace has no column sums (schema %d; capture it again with this "
                    "obcache to record them)",
                    r->path, m->schema_version);
  size_t plane = m->model.n_heads * m->n_prompt;
  float *scratch = trace_alloc(r, TRACE_ROWS_VARIANTS * plane, sizeof *scratch, "column sums");
  if (!scratch) return OBC_ENOMEM;
  int rc = attn ? read_sums_dataset(r, layer, OBC_TRACE_SUMS_ATTN, rows, scratch, attn) : OBC_OK;
  for (int t = 0; !rc && obc && t < TRACE_OBC_TERMS; t++)
    rc = read_sums_dataset(r, layer, OBC_TRACE_SUMS_OBC_V + t, rows, scratch, obc + t * plane);
  if (!rc && counts) rc = read_column_counts(r, rows, counts);
  free(scratch);
  return rc;
}

/* ---- query statistics ------------------------------------------------------- */

/* How far below zero a covariance diagonal may fall from rounding alone:
 * outer/count - mean^2 cancels about 1e-16 of outer/count per row added in
 * double; 1e-9 leaves a margin of 10^3 beyond 10^4 rows. */
#define QSTATS_NEGATIVE_TOLERANCE 1e-9

/* Every 2x2 principal minor of a positive semi-definite matrix is >= 0:
 * |c_ab| <= sqrt(c_aa c_bb) for the covariance c = outer/n - mean mean^T of
 * one head. This is the load-time check, O(d^2) per head; `obcache verify`
 * factors the whole matrix (trace_verify.c). Slack: each entry of c carries
 * the same cancellation error as a diagonal (QSTATS_NEGATIVE_TOLERANCE
 * times the second moments it is made of, sqrt(second_a second_b) by
 * Cauchy-Schwarz on the raw moments), so that is the margin. */
static int check_covariance(const TraceReader *r, const char *name, size_t v, size_t h,
                            const double *sum, const double *outer, double n) {
  size_t d = r->meta.model.head_dim;
  for (size_t a = 0; a < d; a++)
    for (size_t b = a + 1; b < d; b++) {
      double ma = sum[a] / n, mb = sum[b] / n;
      double sa = outer[a * d + a] / n, sb = outer[b * d + b] / n;
      double caa = fmax(sa - ma * ma, 0.0), cbb = fmax(sb - mb * mb, 0.0);
      double cab = outer[a * d + b] / n - ma * mb;
      double slack = QSTATS_NEGATIVE_TOLERANCE * sqrt(sa * sb);
      if (fabs(cab) > sqrt(caa * cbb) + slack)
        return obc_fail(OBC_EVALUE,
                        "%s: %s, rows %s, head %zu: covariance [%zu][%zu] = %.9g exceeds "
                        "sqrt(var[%zu] var[%zu]) = %.9g (not positive semi-definite)",
                        r->path, name, rows_names[v], h, a, b, cab, a, b, sqrt(caa * cbb));
    }
  return OBC_OK;
}

/* The RoPE frequencies against the trace's rope_theta, as
 * model_rope_inv_freq makes them: theta^(-2j/d), divided by rope_factor
 * under linear scaling, equal up to the last bits of pow (1e-9 relative);
 * under llama3 scaling divided by a factor between 1 and rope_factor (when
 * recorded). A trace without RoPE (rope_theta 0, layout "none") has
 * nothing to follow. */
static int check_inv_freq(const TraceReader *r, const double *freq) {
  const TraceModel *c = &r->meta.model;
  size_t d = c->head_dim;
  if (!(c->rope_theta > 0) || !strcmp(c->rope_layout, "none")) return OBC_OK;
  bool linear = !strcmp(c->rope_scaling, "linear"), llama3 = !strcmp(c->rope_scaling, "llama3");
  for (size_t j = 0; j < d / 2; j++) {
    double base = pow(c->rope_theta, -2.0 * (double)j / (double)d);
    if (linear && c->rope_factor > 0) base /= c->rope_factor;
    double low = llama3 ? (c->rope_factor >= 1 ? base / c->rope_factor : 0.0) : base;
    if (freq[j] > base * (1 + 1e-9) || freq[j] < low * (1 - 1e-9))
      return obc_fail(OBC_EVALUE,
                      "%s: /rope_inv_freq[%zu] is %.17g, but rope_theta %g (scaling %s) gives "
                      "%.17g%s",
                      r->path, j, freq[j], c->rope_theta,
                      linear   ? "linear"
                      : llama3 ? "llama3"
                               : "none",
                      base, llama3 ? " divided by 1..rope_factor" : "");
  }
  return OBC_OK;
}

int trace_read_query_stats(TraceReader *r, size_t layer, TraceSumRows rows, double *sum,
                           double *outer, int64_t *count, double *inv_freq) {
  const TraceMeta *m = &r->meta;
  assert(layer < m->model.n_layers && (rows == TRACE_ROWS_AGNOSTIC || rows == TRACE_ROWS_ALL));
  if (!m->has_query_stats)
    return obc_fail(OBC_ENOTFOUND,
                    "%s: the trace has no pre-RoPE query statistics (capture it again with this "
                    "obcache, without --no-column-sums, to record them)",
                    r->path);
  size_t H = m->model.n_heads, d = m->model.head_dim, size = 0;
  double *sums = trace_alloc(r, TRACE_ROWS_VARIANTS * H * d, sizeof *sums, "query sums");
  double *outers = trace_alloc(r, TRACE_ROWS_VARIANTS * H * d * d, sizeof *outers, "query outer");
  double *freq = trace_alloc(r, d / 2, sizeof *freq, "/rope_inv_freq");
  int64_t counts[TRACE_ROWS_VARIANTS];
  int rc = sums && outers && freq ? OBC_OK : OBC_ENOMEM;
  char sum_name[64], outer_name[64];
  trace_h5_layer_dataset(sum_name, sizeof sum_name, layer, "q_sum");
  trace_h5_layer_dataset(outer_name, sizeof outer_name, layer, "q_outer");
  if (!rc)
    rc = read_slab_stored(r, sum_name, 0, true, false, sums, TRACE_ROWS_VARIANTS * H * d, &size);
  if (!rc)
    rc = read_slab_stored(r, outer_name, 0, true, false, outers, TRACE_ROWS_VARIANTS * H * d * d,
                          &size);
  if (!rc)
    rc = read_slab_stored(r, "/query_counts", 0, true, false, counts, TRACE_ROWS_VARIANTS, &size);
  if (!rc) rc = read_slab_stored(r, "/rope_inv_freq", 0, true, false, freq, d / 2, &size);
  for (size_t j = 0; !rc && j < d / 2; j++)
    if (!(isfinite(freq[j]) && freq[j] > 0))
      rc = obc_fail(OBC_EVALUE, "%s: /rope_inv_freq[%zu] is %g (expected a finite frequency > 0)",
                    r->path, j, freq[j]);
  if (!rc) rc = check_inv_freq(r, freq);
  for (size_t v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++) {
    size_t end = v == TRACE_ROWS_AGNOSTIC ? m->agnostic_rows : m->n_prompt;
    int64_t expected = end > TRACE_QSTATS_FIRST_ROW ? (int64_t)(end - TRACE_QSTATS_FIRST_ROW) : 0;
    if (counts[v] != expected)
      rc = obc_fail(OBC_EVALUE,
                    "%s: /query_counts, rows %s: %lld rows, expected %lld (rows [%d, %zu))",
                    r->path, rows_names[v], (long long)counts[v], (long long)expected,
                    TRACE_QSTATS_FIRST_ROW, end);
  }
  for (size_t v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++)
    for (size_t h = 0; !rc && h < H; h++) {
      const double *s = sums + (v * H + h) * d, *o = outers + (v * H + h) * d * d;
      double n = counts[v] ? (double)counts[v] : 1.0;
      for (size_t a = 0; !rc && a < d; a++) {
        if (!isfinite(s[a]))
          rc = obc_fail(OBC_EVALUE, "%s: %s, rows %s, head %zu, [%zu]: %s (expected finite)",
                        r->path, sum_name, rows_names[v], h, a, isnan(s[a]) ? "NaN" : "Inf");
        for (size_t b = 0; !rc && b < d; b++) {
          double x = o[a * d + b];
          if (!isfinite(x))
            rc = obc_fail(OBC_EVALUE, "%s: %s, rows %s, head %zu, [%zu][%zu]: %s (expected finite)",
                          r->path, outer_name, rows_names[v], h, a, b, isnan(x) ? "NaN" : "Inf");
          else if (x != o[b * d + a])
            rc = obc_fail(OBC_EVALUE,
                          "%s: %s, rows %s, head %zu: [%zu][%zu] = %.17g but [%zu][%zu] = %.17g "
                          "(expected a symmetric sum of q q^T)",
                          r->path, outer_name, rows_names[v], h, a, b, x, b, a, o[b * d + a]);
        }
        double second = o[a * d + a] / n, mean = s[a] / n, var = second - mean * mean;
        if (!rc && (!counts[v] ? o[a * d + a] != 0.0 || s[a] != 0.0
                               : var < -QSTATS_NEGATIVE_TOLERANCE * second))
          rc = obc_fail(OBC_EVALUE,
                        "%s: %s, rows %s, head %zu: variance of [%zu] is %g (expected >= 0%s)",
                        r->path, outer_name, rows_names[v], h, a, var,
                        counts[v] ? "" : ": no rows, every sum 0");
      }
      if (!rc && counts[v]) rc = check_covariance(r, outer_name, v, h, s, o, n);
    }
  if (!rc && sum) memcpy(sum, sums + (size_t)rows * H * d, H * d * sizeof *sum);
  if (!rc && outer) memcpy(outer, outers + (size_t)rows * H * d * d, H * d * d * sizeof *outer);
  if (!rc && count) *count = counts[rows];
  if (!rc && inv_freq) memcpy(inv_freq, freq, d / 2 * sizeof *inv_freq);
  free(sums);
  free(outers);
  free(freq);
  return rc;
}

static int dataset_sizes_locked(TraceReader *r, const char *name, double *stored, double *logical,
                                size_t *element_size) {
  if (find_link(r, name) <= 0) {
    obc_error_clear();
    return OBC_ENOTFOUND;
  }
  hid_t dset = H5Dopen2(r->file, name, H5P_DEFAULT);
  if (dset < 0) return OBC_ENOTFOUND;
  hid_t type = H5Dget_type(dset), space = H5Dget_space(dset);
  *stored = (double)H5Dget_storage_size(dset);
  *element_size = type >= 0 ? H5Tget_size(type) : 0;
  *logical = space >= 0 ? (double)H5Sget_simple_extent_npoints(space) * (double)*element_size : 0;
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Dclose(dset);
  return OBC_OK;
}

int trace_dataset_sizes(TraceReader *r, const char *name, double *stored, double *logical,
                        size_t *element_size) {
  int rc = OBC_OK;
  WITH_HDF5_LOCK(rc = dataset_sizes_locked(r, name, stored, logical, element_size));
  size_t layer = 0;
  char kind[8] = "";
  if (!rc && r->original_stored && sscanf(name, "/layers/%zu/%7s", &layer, kind) == 2 &&
      layer < r->meta.model.n_layers)
    for (int k = 0; k < OBC_TRACE_SLAB_KINDS; k++)
      if (!strcmp(kind, trace_hash_slab_name(k)))
        *stored = r->original_stored[layer * OBC_TRACE_SLAB_KINDS + k];
  return rc;
}

/* ---- content hash ----------------------------------------------------------- */

/* Elements of one slab of kind: a head's (n_positions, d), (n_rows, d),
 * (n_rows) or (n_rows, n_positions). */
static size_t slab_elements(const TraceMeta *m, int kind) {
  switch (kind) {
    case OBC_TRACE_SLAB_K:
    case OBC_TRACE_SLAB_V: return m->n_positions * m->model.head_dim;
    case OBC_TRACE_SLAB_LSE: return m->n_rows;
    case OBC_TRACE_SLAB_A: return m->n_rows * m->n_positions;
    default: return m->n_rows * m->model.head_dim;
  }
}

/* Elements of the largest slab, or of the logits. */
static size_t largest_slab(const TraceMeta *m) {
  size_t n = 0;
  for (int k = 0; k < OBC_TRACE_SLAB_KINDS; k++)
    if ((k != OBC_TRACE_SLAB_A || m->has_attn) && slab_elements(m, k) > n) n = slab_elements(m, k);
  if (m->has_logits && m->n_decode * m->model.vocab_size > n) n = m->n_decode * m->model.vocab_size;
  if (m->has_column_sums && TRACE_ROWS_VARIANTS * m->model.n_heads * m->n_prompt > n)
    n = TRACE_ROWS_VARIANTS * m->model.n_heads * m->n_prompt;
  size_t d = m->model.head_dim;
  if (m->has_query_stats && TRACE_ROWS_VARIANTS * m->model.n_heads * d * d > n)
    n = TRACE_ROWS_VARIANTS * m->model.n_heads * d * d;
  return n;
}

int trace_compute_hash(TraceReader *r, char out[17]) {
  const TraceMeta *m = &r->meta;
  uint64_t *hashes = trace_alloc(r, trace_hash_slab_count(m), sizeof *hashes, "the slab hashes");
  /* 8 bytes an element: the widest float a trace may store. */
  unsigned char *buffer =
      hashes ? trace_alloc(r, largest_slab(m), 8, "the largest slab (one head, or the logits)")
             : NULL;
  int rc = hashes && buffer ? OBC_OK : OBC_ENOMEM;
  if (!rc) memset(hashes, 0, trace_hash_slab_count(m) * sizeof *hashes);
  int kinds = m->has_attn ? OBC_TRACE_SLAB_KINDS : OBC_TRACE_SLAB_A;
  for (size_t layer = 0; !rc && layer < m->model.n_layers; layer++) {
    for (int k = 0; !rc && k < kinds; k++) {
      char name[64];
      trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_slab_name(k));
      size_t count = slab_elements(m, k);
      for (size_t head = 0; !rc && head < trace_hash_slab_heads(m, k); head++) {
        size_t size = 0;
        rc = read_slab_stored(r, name, head, false, false, buffer, count, &size);
        if (!rc)
          hashes[trace_hash_slab_index(m, layer, k, head)] =
              obc_hash_bytes(OBC_HASH_SEED, buffer, count * size);
      }
    }
  }
  for (size_t layer = 0; !rc && m->has_column_sums && layer < m->model.n_layers; layer++)
    for (int k = 0; !rc && k < OBC_TRACE_SUMS_KINDS; k++) {
      char name[64];
      trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_sums_name(k));
      size_t count = TRACE_ROWS_VARIANTS * m->model.n_heads * m->n_prompt, size = 0;
      rc = read_slab_stored(r, name, 0, true, false, buffer, count, &size);
      if (!rc)
        hashes[trace_hash_sums_index(m, layer, k)] =
            obc_hash_bytes(OBC_HASH_SEED, buffer, count * size);
    }
  if (!rc && m->has_column_sums) {
    size_t count = TRACE_ROWS_VARIANTS * m->n_prompt, size = 0;
    rc = read_slab_stored(r, "/column_counts", 0, true, false, buffer, count, &size);
    if (!rc)
      hashes[trace_hash_counts_index(m)] = obc_hash_bytes(OBC_HASH_SEED, buffer, count * size);
  }
  for (size_t layer = 0; !rc && m->has_query_stats && layer <= m->model.n_layers; layer++)
    for (int k = 0; !rc && k < OBC_TRACE_QSTATS_KINDS; k++) {
      size_t H = m->model.n_heads, d = m->model.head_dim, size = 0;
      size_t count = layer == m->model.n_layers  ? (k ? d / 2 : TRACE_ROWS_VARIANTS)
                     : k == OBC_TRACE_QSTATS_SUM ? TRACE_ROWS_VARIANTS * H * d
                                                 : TRACE_ROWS_VARIANTS * H * d * d;
      char name[64];
      if (layer == m->model.n_layers)
        snprintf(name, sizeof name, "%s", k ? "/rope_inv_freq" : "/query_counts");
      else
        trace_h5_layer_dataset(name, sizeof name, layer, k ? "q_outer" : "q_sum");
      rc = read_slab_stored(r, name, 0, true, false, buffer, count, &size);
      if (!rc)
        hashes[trace_hash_qstats_index(m, layer, k)] =
            obc_hash_bytes(OBC_HASH_SEED, buffer, count * size);
    }
  uint64_t logits_hash = 0;
  if (!rc && m->has_logits) {
    size_t count = m->n_decode * m->model.vocab_size, size = 0;
    rc = read_slab_stored(r, "/logits", 0, true, false, buffer, count, &size);
    if (!rc) logits_hash = obc_hash_bytes(OBC_HASH_SEED, buffer, count * size);
  }
  if (!rc) trace_hash_manifest(m, logits_hash, hashes, out);
  free(hashes);
  free(buffer);
  return rc;
}
