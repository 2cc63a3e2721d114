/* The keep file of `obcache evict` (evict/policy.h): which prompt positions
 * every (layer, KV head) keeps, as a mask, counts and a padded position list,
 * with every policy parameter as an attribute so the file says how it was
 * made. Written under a temporary name and renamed when complete. */
#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "evict/policy.h"

#define EVICT_KEEP_SCHEMA "obcache-keep/1"

static herr_t attr_str(hid_t file, const char *name, const char *value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t status = attr < 0 ? -1 : H5Awrite(attr, type, &value);
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  return status;
}

static herr_t attr_f64(hid_t file, const char *name, double value) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(file, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t status = attr < 0 ? -1 : H5Awrite(attr, H5T_NATIVE_DOUBLE, &value);
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  return status;
}

static herr_t write_dataset(hid_t file, const char *name, hid_t file_type, hid_t mem_type, int rank,
                            const hsize_t *dims, const void *data) {
  hid_t space = H5Screate_simple(rank, dims, NULL);
  hid_t set = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  herr_t status = set < 0 ? -1 : H5Dwrite(set, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  if (set >= 0) H5Dclose(set);
  H5Sclose(space);
  return status;
}

static const char *kind_name(EvictScoreKind kind) {
  switch (kind) {
    case EVICT_SCORE_RANDOM: return "random";
    case EVICT_SCORE_STREAMING: return "streaming";
    case EVICT_SCORE_ORACLE: return "oracle";
    case EVICT_SCORE_DECODE_ATTN: return "decode_attn";
    default: return "quantity";
  }
}

int evict_keep_write(const char *path, const EvictKeepSet *k, const char *trace_path,
                     const char *command_line) {
  size_t heads = k->n_layers * k->n_kv_heads, max_kept = 1;
  for (size_t i = 0; i < heads; i++) {
    size_t all = k->n_kept[i] + (k->n_prompt - k->n_candidates);
    if (all > max_kept) max_kept = all;
  }
  int64_t *counts = obc_malloc(heads * sizeof *counts, "kept counts");
  int64_t *positions = obc_malloc(heads * max_kept * sizeof *positions, "kept positions");
  if (!counts || !positions) {
    free(counts);
    free(positions);
    return OBC_ENOMEM;
  }
  for (size_t i = 0; i < heads; i++) {
    size_t j = 0;
    for (size_t p = 0; p < k->n_prompt; p++)
      if (k->keep[i * k->n_prompt + p]) positions[i * max_kept + j++] = (int64_t)p;
    counts[i] = (int64_t)k->n_kept[i];
    for (; j < max_kept; j++) positions[i * max_kept + j] = -1;
  }
  ObcPendingFile pending;
  int rc = obc_pending_init(&pending, path);
  if (rc) {
    free(counts);
    free(positions);
    return rc;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = H5Fcreate(pending.temp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    free(counts);
    free(positions);
    return obc_fail(OBC_EIO, "%s: cannot create HDF5 file (hint: is the folder writable?)", path);
  }
  obc_pending_register(&pending);
  const EvictPolicy *p = &k->policy;
  hsize_t mask_dims[3] = {k->n_layers, k->n_kv_heads, k->n_prompt};
  hsize_t count_dims[2] = {k->n_layers, k->n_kv_heads};
  hsize_t list_dims[3] = {k->n_layers, k->n_kv_heads, max_kept};
  bool ok =
      write_dataset(file, "keep", H5T_STD_U8LE, H5T_NATIVE_UCHAR, 3, mask_dims, k->keep) >= 0 &&
      write_dataset(file, "n_kept", H5T_STD_I64LE, H5T_NATIVE_INT64, 2, count_dims, counts) >= 0 &&
      write_dataset(file, "positions", H5T_STD_I64LE, H5T_NATIVE_INT64, 3, list_dims, positions) >=
          0 &&
      attr_str(file, "schema", EVICT_KEEP_SCHEMA) >= 0 &&
      attr_str(file, "tool_version", OBC_VERSION) >= 0 &&
      attr_str(file, "trace", trace_path) >= 0 &&
      attr_str(file, "command_line", command_line ? command_line : "") >= 0 &&
      attr_str(file, "score", p->score) >= 0 &&
      attr_str(file, "score_kind", kind_name(p->kind)) >= 0 &&
      attr_str(file, "budget_given", p->budget_text) >= 0 &&
      attr_f64(file, "budget", (double)k->budget) >= 0 &&
      attr_f64(file, "window", (double)k->window) >= 0 &&
      attr_f64(file, "recent", (double)p->recent) >= 0 &&
      attr_f64(file, "sinks", (double)p->sinks) >= 0 &&
      attr_str(file, "allocation", evict_allocation_name(p->allocation)) >= 0 &&
      attr_f64(file, "adakv_floor", p->adakv_floor) >= 0 &&
      attr_str(file, "mode", evict_mode_name(p->mode)) >= 0 &&
      attr_f64(file, "seed", (double)p->seed) >= 0 &&
      attr_f64(file, "n_prompt", (double)k->n_prompt) >= 0 &&
      attr_f64(file, "n_candidates", (double)k->n_candidates) >= 0 &&
      attr_str(file, "complete", "1") >= 0;
  ok = H5Fclose(file) >= 0 && ok;
  free(counts);
  free(positions);
  if (!ok) {
    obc_pending_unregister(&pending);
    obc_pending_abort(&pending);
    return obc_fail(OBC_EIO, "%s: cannot write the keep file (disk full?)", path);
  }
  rc = obc_pending_commit(&pending);
  obc_pending_unregister(&pending);
  return rc;
}

static int read_f64_attr(hid_t file, const char *name, double *value) {
  hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
  herr_t status = attr < 0 ? -1 : H5Aread(attr, H5T_NATIVE_DOUBLE, value);
  if (attr >= 0) H5Aclose(attr);
  return status < 0 ? -1 : 0;
}

static int read_str_attr(hid_t file, const char *name, char *out, size_t size) {
  hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
  if (attr < 0) return -1;
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  char *value = NULL;
  herr_t status = H5Aread(attr, type, &value);
  if (status >= 0 && value) snprintf(out, size, "%s", value);
  if (value) H5free_memory(value);
  H5Tclose(type);
  H5Aclose(attr);
  return status < 0 ? -1 : 0;
}

int evict_keep_read(const char *path, const TraceMeta *meta, EvictKeepSet *out) {
  memset(out, 0, sizeof *out);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    return obc_fail(OBC_EIO,
                    "%s: cannot open as HDF5 (expected a keep file of "
                    "obcache evict)",
                    path);
  char schema[64] = "";
  double budget = 0, n_candidates = 0, window = 0, recent = 0, sinks = 0;
  int rc = OBC_OK;
  if (read_str_attr(file, "schema", schema, sizeof schema) || strcmp(schema, EVICT_KEEP_SCHEMA) ||
      read_f64_attr(file, "budget", &budget) || read_f64_attr(file, "n_candidates", &n_candidates))
    rc = obc_fail(OBC_EFORMAT, "%s: not a keep file (expected schema %s, found '%s')", path,
                  EVICT_KEEP_SCHEMA, schema);
  hid_t set = rc ? -1 : H5Dopen2(file, "keep", H5P_DEFAULT);
  hsize_t dims[3] = {0, 0, 0};
  if (!rc) {
    hid_t space = set < 0 ? -1 : H5Dget_space(set);
    if (space < 0 || H5Sget_simple_extent_ndims(space) != 3 ||
        H5Sget_simple_extent_dims(space, dims, NULL) < 0)
      rc = obc_fail(OBC_EFORMAT, "%s: dataset keep missing or not 3-D", path);
    if (space >= 0) H5Sclose(space);
  }
  if (!rc && (dims[0] != meta->model.n_layers || dims[1] != meta->model.n_kv_heads ||
              dims[2] != meta->n_prompt))
    rc = obc_fail(OBC_EFORMAT,
                  "%s: keep is (%llu, %llu, %llu) (expected (%zu, %zu, %zu) for the "
                  "trace's layers, KV heads and prompt; hint: made from another trace?)",
                  path, (unsigned long long)dims[0], (unsigned long long)dims[1],
                  (unsigned long long)dims[2], meta->model.n_layers, meta->model.n_kv_heads,
                  meta->n_prompt);
  if (!rc) {
    out->n_layers = dims[0];
    out->n_kv_heads = dims[1];
    out->n_prompt = dims[2];
    out->n_candidates = (size_t)n_candidates;
    out->budget = (size_t)budget;
    out->keep = obc_malloc(dims[0] * dims[1] * dims[2], "kept positions");
    out->n_kept = obc_calloc(dims[0] * dims[1], sizeof(size_t), "kept counts");
    if (!out->keep || !out->n_kept) rc = OBC_ENOMEM;
  }
  if (!rc && H5Dread(set, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->keep) < 0)
    rc = obc_fail(OBC_EIO, "%s: cannot read dataset keep", path);
  if (!rc && out->n_candidates > out->n_prompt)
    rc = obc_fail(OBC_EFORMAT, "%s: n_candidates %zu beyond the prompt (%zu)", path,
                  out->n_candidates, out->n_prompt);
  if (!rc) {
    EvictPolicy *p = &out->policy;
    evict_policy_default(p);
    read_str_attr(file, "score", p->score, sizeof p->score);
    read_str_attr(file, "budget_given", p->budget_text, sizeof p->budget_text);
    char text[32] = "";
    if (!read_str_attr(file, "allocation", text, sizeof text))
      p->allocation = strcmp(text, "adakv") ? EVICT_ALLOC_UNIFORM : EVICT_ALLOC_ADAKV;
    if (!read_str_attr(file, "mode", text, sizeof text))
      p->mode = strcmp(text, "agnostic") ? EVICT_MODE_AWARE : EVICT_MODE_AGNOSTIC;
    read_f64_attr(file, "window", &window);
    read_f64_attr(file, "recent", &recent);
    read_f64_attr(file, "sinks", &sinks);
    out->window = (size_t)window;
    p->recent = (size_t)recent;
    p->sinks = (size_t)sinks;
    size_t heads = out->n_layers * out->n_kv_heads;
    for (size_t i = 0; i < heads; i++)
      for (size_t q = 0; q < out->n_candidates; q++)
        out->n_kept[i] += out->keep[i * out->n_prompt + q] != 0;
  }
  if (set >= 0) H5Dclose(set);
  H5Fclose(file);
  if (rc) evict_keep_set_free(out);
  return rc;
}
