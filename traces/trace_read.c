/* Trace reader: opens a trace, validates everything the attributes promise
 * (schema version, complete flag, every dataset's presence, type and shape)
 * before handing out any tensor, and then reads one (layer, head) slab at a
 * time, converting half to float and refusing NaN/Inf. See SCHEMA.md. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "traces/trace.h"
#include "traces/trace_h5.h"

struct TraceReader {
  char path[4096];
  hid_t file;
  TraceMeta meta;
};

const TraceMeta *trace_meta(const TraceReader *reader) { return &reader->meta; }
const char *trace_path(const TraceReader *reader) { return reader->path; }

void trace_close(TraceReader *reader) {
  if (!reader) return;
#pragma omp critical(obc_hdf5)
  if (reader->file >= 0) H5Fclose(reader->file);
  trace_meta_free(&reader->meta);
  free(reader);
}

/* ---- validation ------------------------------------------------------------ */

static void format_dims(char *out, size_t size, int rank, const hsize_t *dims) {
  size_t used = (size_t)snprintf(out, size, "(");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)dims[i]);
  if (rank == 1 && used < size) used += (size_t)snprintf(out + used, size - used, ",");
  if (used < size) snprintf(out + used, size - used, ")");
}

/* Checks that dataset `name` exists, has the type class (and, for floats, a
 * size of 2, 4 or 8 bytes; for integers `int_size`) and exactly the shape
 * expected; `meaning` names the dimensions in the message. */
static int check_dataset(const TraceReader *r, const char *name, H5T_class_t cls, size_t int_size,
                         int rank, const hsize_t *expected, const char *meaning) {
  if (H5Lexists(r->file, name, H5P_DEFAULT) <= 0)
    return obc_fail(OBC_EFORMAT, "%s: dataset %s is missing (expected shape %s)", r->path, name,
                    meaning);
  hid_t dset = H5Dopen2(r->file, name, H5P_DEFAULT);
  if (dset < 0) return obc_fail(OBC_EFORMAT, "%s: %s is not a dataset", r->path, name);
  hid_t type = H5Dget_type(dset);
  hid_t space = H5Dget_space(dset);
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
  H5Dclose(dset);
  if (found_cls != cls)
    return obc_fail(OBC_EFORMAT, "%s: %s has the wrong type (expected %s)", r->path, name,
                    cls == H5T_FLOAT ? "floats" : "integers");
  if (cls == H5T_FLOAT && type_size != 2 && type_size != 4 && type_size != 8)
    return obc_fail(OBC_EFORMAT, "%s: %s has %zu-byte floats (expected 2, 4 or 8)", r->path, name,
                    type_size);
  if (cls == H5T_FLOAT && type_size == 2 && !ieee_half)
    return obc_fail(OBC_EFORMAT,
                    "%s: %s has a 16-bit float type that is not little-endian IEEE half", r->path,
                    name);
  if (cls == H5T_INTEGER && type_size != int_size)
    return obc_fail(OBC_EFORMAT, "%s: %s has %zu-byte integers (expected %zu)", r->path, name,
                    type_size, int_size);
  bool same = found_rank == rank;
  for (int i = 0; same && i < rank; i++) same = dims[i] == expected[i];
  if (!same) {
    char want[128], got[128];
    format_dims(want, sizeof want, rank, expected);
    format_dims(got, sizeof got, found_rank > 0 && found_rank <= 8 ? found_rank : 0, dims);
    return obc_fail(OBC_EFORMAT, "%s: %s has shape %s, expected %s = %s", r->path, name, got, want,
                    meaning);
  }
  return OBC_OK;
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
  *out = v != 0;
  return rc;
}

static int read_attributes(TraceReader *r) {
  TraceMeta *m = &r->meta;
  TraceModel *c = &m->model;
  const char *p = r->path;
  hid_t f = r->file;
  int64_t needle = 0;
  bool has_tokens = false;
  int rc = 0;
  rc = rc ? rc
          : trace_h5_attr_read_str(p, f, "tool_version", m->tool_version, sizeof m->tool_version);
  rc = rc ? rc : trace_h5_attr_read_str(p, f, "producer", m->producer, sizeof m->producer);
  rc = rc ? rc : trace_h5_attr_read_str(p, f, "created", m->created, sizeof m->created);
  rc = rc ? rc : trace_h5_attr_read_str(p, f, "dtype", m->dtype, sizeof m->dtype);
  rc = rc ? rc : trace_h5_attr_read_str(p, f, "model_name", c->name, sizeof c->name);
  rc = rc ? rc
          : trace_h5_attr_read_str(p, f, "architecture", c->architecture, sizeof c->architecture);
  rc = rc ? rc : read_size_attr(r, "n_layers", &c->n_layers);
  rc = rc ? rc : read_size_attr(r, "n_heads", &c->n_heads);
  rc = rc ? rc : read_size_attr(r, "n_kv_heads", &c->n_kv_heads);
  rc = rc ? rc : read_size_attr(r, "head_dim", &c->head_dim);
  rc = rc ? rc : read_size_attr(r, "vocab_size", &c->vocab_size);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_theta", &c->rope_theta);
  rc = rc ? rc
          : trace_h5_attr_read_str(p, f, "rope_scaling", c->rope_scaling, sizeof c->rope_scaling);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_factor", &c->rope_factor);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_low_freq_factor", &c->rope_low_freq_factor);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "rope_high_freq_factor", &c->rope_high_freq_factor);
  rc = rc ? rc : read_size_attr(r, "rope_original_context", &c->rope_original_context);
  rc = rc ? rc : trace_h5_attr_read_f64(p, f, "attn_scale", &c->attn_scale);
  c->rope_layout[0] = '\0'; /* optional: absent in traces written before it was added */
  if (!rc && H5Aexists(r->file, "rope_layout") > 0)
    rc = trace_h5_attr_read_str(p, f, "rope_layout", c->rope_layout, sizeof c->rope_layout);
  rc = rc ? rc : read_size_attr(r, "n_prompt", &m->n_prompt);
  rc = rc ? rc : read_size_attr(r, "n_decode", &m->n_decode);
  rc = rc ? rc : read_size_attr(r, "n_positions", &m->n_positions);
  rc = rc ? rc : read_size_attr(r, "n_rows", &m->n_rows);
  rc = rc ? rc : trace_h5_attr_read_i64(p, f, "needle_found", &needle);
  rc = rc ? rc : read_flag_attr(r, "has_tokens", &has_tokens);
  rc = rc ? rc : read_flag_attr(r, "has_attn", &m->has_attn);
  rc = rc ? rc : read_flag_attr(r, "has_logits", &m->has_logits);
  if (rc) return rc;
  m->needle_found = (int)needle;
  if (strcmp(m->dtype, "f32") && strcmp(m->dtype, "f16"))
    return obc_fail(OBC_EFORMAT, "%s: dtype '%s' (expected f32 or f16)", p, m->dtype);
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
  /* has_tokens is implied by meta->tokens being non-NULL after the read. */
  if (has_tokens) {
    hsize_t dims[1] = {m->n_positions};
    rc = check_dataset(r, "/tokens", H5T_INTEGER, 4, 1, dims, "(n_positions)");
    if (rc) return rc;
    m->tokens = obc_malloc(m->n_positions * sizeof *m->tokens, "tokens");
    if (!m->tokens) return OBC_ENOMEM;
    hid_t dset = H5Dopen2(f, "/tokens", H5P_DEFAULT);
    herr_t status = H5Dread(dset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->tokens);
    H5Dclose(dset);
    if (status < 0) return obc_fail(OBC_EIO, "%s: cannot read /tokens", p);
  }
  return OBC_OK;
}

static int read_row_positions(TraceReader *r) {
  TraceMeta *m = &r->meta;
  hsize_t dims[1] = {m->n_rows};
  int rc = check_dataset(r, "/row_positions", H5T_INTEGER, 8, 1, dims, "(n_rows)");
  if (rc) return rc;
  m->row_positions = obc_malloc(m->n_rows * sizeof *m->row_positions, "row positions");
  if (!m->row_positions) return OBC_ENOMEM;
  hid_t dset = H5Dopen2(r->file, "/row_positions", H5P_DEFAULT);
  herr_t status =
      m->n_rows ? H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->row_positions)
                : 0;
  H5Dclose(dset);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot read /row_positions", r->path);
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
  int rc = OBC_OK;
  if (H5Lexists(r->file, "/prompt_text", H5P_DEFAULT) > 0)
    rc = trace_h5_text_read(r->path, r->file, "/prompt_text", &m->prompt_text);
  if (!rc && H5Lexists(r->file, "/generated_text", H5P_DEFAULT) > 0)
    rc = trace_h5_text_read(r->path, r->file, "/generated_text", &m->generated_text);
  return rc;
}

static int read_spans(TraceReader *r) {
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
    char name[128];
    snprintf(name, sizeof name, "/spans/%s", span->name);
    hsize_t dims[1] = {2};
    rc = check_dataset(r, name, H5T_INTEGER, 8, 1, dims, "(2) = [begin, end)");
    if (rc) break;
    int64_t range[2];
    hid_t dset = H5Dopen2(r->file, name, H5P_DEFAULT);
    herr_t status = H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, range);
    H5Dclose(dset);
    if (status < 0) {
      rc = obc_fail(OBC_EIO, "%s: cannot read %s", r->path, name);
      break;
    }
    if (range[0] < 0 || range[1] < range[0] || range[1] > (int64_t)m->n_positions) {
      rc = obc_fail(OBC_EFORMAT, "%s: span %s = [%lld, %lld) is outside [0, %zu]", r->path, name,
                    (long long)range[0], (long long)range[1], m->n_positions);
      break;
    }
    span->begin = range[0];
    span->end = range[1];
    m->n_spans++;
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
  struct {
    const char *name;
    int rank;
    const hsize_t *dims;
    const char *meaning;
  } sets[] = {
      {"K", 3, kv, "(n_kv_heads, n_positions, head_dim)"},
      {"V", 3, kv, "(n_kv_heads, n_positions, head_dim)"},
      {"Q", 3, rows, "(n_heads, n_rows, head_dim)"},
      {"O", 3, rows, "(n_heads, n_rows, head_dim)"},
      {"lse", 2, lse, "(n_heads, n_rows)"},
      {"A", 3, attn, "(n_heads, n_rows, n_positions)"},
  };
  size_t n_sets = m->has_attn ? 6 : 5;
  for (size_t layer = 0; layer < c->n_layers; layer++) {
    for (size_t i = 0; i < n_sets; i++) {
      char name[64];
      trace_h5_layer_dataset(name, sizeof name, layer, sets[i].name);
      int rc = check_dataset(r, name, H5T_FLOAT, 0, sets[i].rank, sets[i].dims, sets[i].meaning);
      if (rc) return rc;
    }
  }
  if (m->has_logits) {
    hsize_t logits[2] = {m->n_decode, c->vocab_size};
    return check_dataset(r, "/logits", H5T_FLOAT, 0, 2, logits, "(n_decode, vocab_size)");
  }
  return OBC_OK;
}

static int open_checked(TraceReader *r) {
  struct stat st;
  if (stat(r->path, &st) != 0)
    return obc_fail(OBC_EIO, "%s: cannot open: %s", r->path, strerror(errno));
  if (S_ISDIR(st.st_mode)) return obc_fail(OBC_EIO, "%s: is a folder, not a trace file", r->path);
  if (access(r->path, R_OK) != 0)
    return obc_fail(OBC_EIO, "%s: cannot read: %s", r->path, strerror(errno));
  if (H5Fis_hdf5(r->path) <= 0)
    return obc_fail(OBC_EFORMAT, "%s: not an HDF5 file (expected an obcache trace)", r->path);
  r->file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (r->file < 0)
    return obc_fail(OBC_EIO, "%s: cannot open as HDF5 (damaged or truncated?)", r->path);
  int64_t version = 0;
  if (H5Aexists(r->file, "schema_version") <= 0)
    return obc_fail(OBC_EFORMAT, "%s: not an obcache trace (no schema_version attribute)", r->path);
  int rc = trace_h5_attr_read_i64(r->path, r->file, "schema_version", &version);
  if (rc) return rc;
  if (version != OBC_TRACE_SCHEMA_VERSION)
    return obc_fail(OBC_EUNSUPPORTED, "%s: schema version %lld, this obcache reads version %d",
                    r->path, (long long)version, OBC_TRACE_SCHEMA_VERSION);
  r->meta.schema_version = (int)version;
  int64_t complete = 0;
  if (H5Aexists(r->file, "complete") <= 0 ||
      trace_h5_attr_read_i64(r->path, r->file, "complete", &complete) || complete != 1)
    return obc_fail(
        OBC_EFORMAT,
        "%s: incomplete trace (attribute 'complete' is not 1: the writer did not finish)", r->path);
  r->meta.complete = true;
  rc = read_attributes(r);
  if (!rc) rc = read_row_positions(r);
  if (!rc) rc = read_texts(r);
  if (!rc) rc = read_spans(r);
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
  int rc;
#pragma omp critical(obc_hdf5)
  rc = open_checked(r);
  if (rc) {
    trace_close(r);
    return rc;
  }
  *out = r;
  return OBC_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

/* Reads slab [head, :, ...] of a layer dataset (or the whole dataset when
 * layer_name is an absolute name) into out (count floats). Halves are read
 * raw into the front of out and widened in place, back to front. */
static int read_slab(TraceReader *r, const char *dset_name, size_t head, bool whole, float *out,
                     size_t count) {
  int rc = OBC_OK;
  bool half = false;
#pragma omp critical(obc_hdf5)
  {
    hid_t dset = H5Dopen2(r->file, dset_name, H5P_DEFAULT);
    hid_t file_space = dset >= 0 ? H5Dget_space(dset) : -1;
    hid_t type = dset >= 0 ? H5Dget_type(dset) : -1;
    if (dset < 0 || file_space < 0 || type < 0) {
      rc = obc_fail(OBC_EIO, "%s: cannot open %s", r->path, dset_name);
    } else {
      half = H5Tget_size(type) == 2;
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
          H5Dread(dset, half ? type : H5T_NATIVE_FLOAT, mem_space, file_space, H5P_DEFAULT, out);
      H5Sclose(mem_space);
      if (status < 0)
        rc = obc_fail(OBC_EIO, "%s: cannot read %s (damaged file?)", r->path, dset_name);
    }
    if (type >= 0) H5Tclose(type);
    if (file_space >= 0) H5Sclose(file_space);
    if (dset >= 0) H5Dclose(dset);
  }
  if (rc || !half) return rc;
  const uint16_t *bits = (const uint16_t *)(void *)out;
  for (size_t i = count; i-- > 0;) out[i] = trace_h5_float_from_half(bits[i]);
  return OBC_OK;
}

/* OBC_EVALUE naming the dataset, layer, head and element if any value of
 * data (rows, cols) is NaN or infinite. */
static int check_finite(const TraceReader *r, const char *dset_name, size_t layer,
                        const char *head_kind, size_t head, const float *data, size_t rows,
                        size_t cols, const char *row_kind) {
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

static int read_layer_head(TraceReader *r, size_t layer, const char *name, const char *head_kind,
                           size_t head, float *out, size_t rows, size_t cols,
                           const char *row_kind) {
  char dset_name[64];
  trace_h5_layer_dataset(dset_name, sizeof dset_name, layer, name);
  int rc = read_slab(r, dset_name, head, false, out, rows * cols);
  if (!rc) rc = check_finite(r, dset_name, layer, head_kind, head, out, rows, cols, row_kind);
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
