/* Reader of score files (scores/scores_read.h): the trace hash first, then
 * the dataset (named, or the file's only one), its type and shape, one
 * hyperslab of the first n_positions, and every value checked finite. */
#include "scores/scores_read.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_child.h"
#include "common/obc_error.h"
#include "common/obc_text.h"
#include "traces/trace_h5.h"

#define MAX_LISTED 32 /* dataset names a message lists */

/* The names of the root group's datasets, comma-separated. */
typedef struct {
  char names[1024];
  size_t count;
  char first[256];
} DatasetList;

/* Whether the link name of group is a dataset. */
static bool is_dataset(hid_t group, const char *name) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0) return false;
  hid_t object = H5Oopen(group, name, H5P_DEFAULT);
  bool yes = object >= 0 && H5Iget_type(object) == H5I_DATASET;
  if (object >= 0) H5Oclose(object);
  return yes;
}

static void list_datasets(hid_t file, DatasetList *list) {
  H5G_info_t info;
  if (H5Gget_info(file, &info) < 0) return;
  for (hsize_t i = 0; i < info.nlinks; i++) {
    char name[256];
    ssize_t n = H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name,
                                   H5P_DEFAULT);
    if (n < 0 || (size_t)n >= sizeof name || !is_dataset(file, name)) continue;
    if (list->count == 0) snprintf(list->first, sizeof list->first, "%s", name);
    if (list->count < MAX_LISTED) {
      size_t used = strlen(list->names);
      snprintf(list->names + used, sizeof list->names - used, "%s%s", list->count ? ", " : "",
               name);
    }
    list->count++;
  }
}

/* The trace_hash attribute, checked against the trace's. */
static int check_hash(const ScoresReadRequest *r, hid_t file) {
  if (H5Aexists(file, "trace_hash") <= 0)
    return obc_fail(OBC_EFORMAT,
                    "%s: no trace_hash attribute (a score file names the trace it scores by "
                    "its content hash: obcache info TRACE shows it)",
                    r->path);
  char hash[64] = "";
  int rc = trace_h5_attr_read_str(r->path, file, "trace_hash", true, hash, sizeof hash);
  if (rc) return rc;
  if (!*hash)
    return obc_fail(OBC_EFORMAT, "%s: empty trace_hash (the scores' trace is unknown)", r->path);
  if (!r->trace_hash || !*r->trace_hash)
    return obc_fail(OBC_EFORMAT,
                    "%s: the trace has no content hash to check the scores against (hint: "
                    "capture it again)",
                    r->path);
  if (strcmp(hash, r->trace_hash))
    return obc_fail(OBC_EINVAL, "%s: scores of another trace (trace_hash %s, the trace's is %s)",
                    r->path, hash, r->trace_hash);
  return OBC_OK;
}

/* Opens the dataset to read: the one named, or the file's only one. */
static int open_dataset(const ScoresReadRequest *r, hid_t file, hid_t *out, const char **name) {
  DatasetList list;
  memset(&list, 0, sizeof list);
  list_datasets(file, &list);
  if (list.count == 0) return obc_fail(OBC_EFORMAT, "%s: no datasets", r->path);
  bool named = r->dataset && *r->dataset;
  if (!named && list.count > 1)
    return obc_fail(OBC_EINVAL, "%s: %zu datasets (%s%s): name one as NAME=file:%s:DATASET",
                    r->path, list.count, list.names, list.count > MAX_LISTED ? ", ..." : "",
                    r->path);
  *name = named ? r->dataset : NULL;
  const char *wanted = named ? r->dataset : list.first;
  if (!is_dataset(file, wanted))
    return obc_fail(OBC_EINVAL, "%s: no dataset %s (it has: %s%s)", r->path, wanted, list.names,
                    list.count > MAX_LISTED ? ", ..." : "");
  *out = H5Dopen2(file, wanted, H5P_DEFAULT);
  if (*out < 0) return obc_fail(OBC_EFORMAT, "%s: %s: cannot open the dataset", r->path, wanted);
  return OBC_OK;
}

/* Type float32/float64 and shape (n_layers, n_kv_heads, >= n_positions). */
static int check_layout(const ScoresReadRequest *r, hid_t set, const char *name) {
  hid_t type = H5Dget_type(set);
  H5T_class_t type_class = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  bool is_float = type_class == H5T_FLOAT;
  const char *class_name = is_float                    ? "floats"
                           : type_class == H5T_INTEGER ? "integers"
                           : type_class == H5T_STRING  ? "strings"
                                                       : "non-numbers";
  size_t bytes = type >= 0 ? H5Tget_size(type) : 0;
  if (type >= 0) H5Tclose(type);
  if (!is_float || (bytes != 4 && bytes != 8))
    return obc_fail(OBC_EFORMAT, "%s: %s: expected float32 or float64 values, got %s of %zu bytes",
                    r->path, name, class_name, bytes);
  hid_t space = H5Dget_space(set);
  int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  hsize_t dims[3] = {0, 0, 0};
  if (rank == 3) H5Sget_simple_extent_dims(space, dims, NULL);
  if (space >= 0) H5Sclose(space);
  if (rank != 3)
    return obc_fail(OBC_EFORMAT,
                    "%s: %s: expected shape (%zu, %zu, >= %zu) (layers, KV heads, positions), "
                    "got rank %d",
                    r->path, name, r->n_layers, r->n_kv_heads, r->n_positions, rank);
  if (dims[0] != r->n_layers || dims[1] != r->n_kv_heads || dims[2] < r->n_positions)
    return obc_fail(OBC_EFORMAT,
                    "%s: %s: expected shape (%zu, %zu, >= %zu) (layers, KV heads, positions), "
                    "got (%llu, %llu, %llu)",
                    r->path, name, r->n_layers, r->n_kv_heads, r->n_positions,
                    (unsigned long long)dims[0], (unsigned long long)dims[1],
                    (unsigned long long)dims[2]);
  return OBC_OK;
}

static int read_values(const ScoresReadRequest *r, hid_t set, const char *name, double *out) {
  hid_t space = H5Dget_space(set);
  hsize_t start[3] = {0, 0, 0}, count[3] = {r->n_layers, r->n_kv_heads, r->n_positions};
  hid_t memory = H5Screate_simple(3, count, NULL);
  herr_t status = space < 0 || memory < 0
                      ? -1
                      : H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
  if (status >= 0) status = H5Dread(set, H5T_NATIVE_DOUBLE, memory, space, H5P_DEFAULT, out);
  if (memory >= 0) H5Sclose(memory);
  if (space >= 0) H5Sclose(space);
  if (status < 0) return trace_h5_fail_damaged(r->path, name);
  size_t n = r->n_positions, G = r->n_kv_heads;
  for (size_t i = 0; i < r->n_layers * G * n; i++)
    if (!isfinite(out[i]))
      return obc_fail(OBC_EVALUE, "%s: %s: %s at layer %zu, KV head %zu, position %zu", r->path,
                      name, isnan(out[i]) ? "NaN" : "infinity", i / n / G, i / n % G, i % n);
  return OBC_OK;
}

bool scores_file_spelled(const char *text) {
  const char *eq = strchr(text, '=');
  return eq && !strncmp(eq + 1, SCORES_FILE_PREFIX, strlen(SCORES_FILE_PREFIX));
}

bool scores_file_name_valid(const char *name, size_t len) {
  if (len == 0 || len > SCORES_FILE_NAME_MAX) return false;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return false;
  }
  return true;
}

int scores_file_spec_parse(const char *option, const char *text, ScoresFileSpec *out) {
  char shown[96];
  obc_text_escape(shown, sizeof shown, text, false);
  memset(out, 0, sizeof *out);
  size_t len = strcspn(text, "=");
  if (!scores_file_spelled(text))
    return obc_fail(OBC_EINVAL, "%s %s: expected NAME=file:PATH[:DATASET]", option, shown);
  if (len == 0 || len > SCORES_FILE_NAME_MAX)
    return obc_fail(OBC_EINVAL, "%s %s: NAME of NAME=file:PATH must have 1..%d characters", option,
                    shown, SCORES_FILE_NAME_MAX);
  if (!scores_file_name_valid(text, len))
    return obc_fail(OBC_EINVAL, "%s %s: NAME of NAME=file:PATH may hold only A-Z a-z 0-9 _ . -",
                    option, shown);
  memcpy(out->name, text, len);
  const char *rest = text + len + 1 + strlen(SCORES_FILE_PREFIX);
  const char *colon = strrchr(rest, ':');
  size_t path_len = strlen(rest);
  if (colon && !strchr(colon + 1, '/')) {
    path_len = (size_t)(colon - rest);
    if (strlen(colon + 1) >= sizeof out->dataset)
      return obc_fail(OBC_EINVAL, "%s %s: DATASET longer than %zu characters", option, shown,
                      sizeof out->dataset - 1);
    snprintf(out->dataset, sizeof out->dataset, "%s", colon + 1);
  }
  if (path_len == 0 || path_len >= sizeof out->path)
    return obc_fail(OBC_EINVAL,
                    "%s %s: expected NAME=file:PATH[:DATASET] with a PATH of 1..%zu characters",
                    option, shown, sizeof out->path - 1);
  memcpy(out->path, rest, path_len);
  return OBC_OK;
}

static int read_unlocked(const ScoresReadRequest *r, double *out) {
  trace_h5_silence();
  FILE *probe = fopen(r->path, "rb");
  if (!probe) return obc_fail(OBC_EIO, "%s: cannot open: %s", r->path, strerror(errno));
  fclose(probe);
#if H5_VERSION_GE(1, 12, 0)
  htri_t hdf5 = H5Fis_accessible(r->path, H5P_DEFAULT);
#else
  htri_t hdf5 = H5Fis_hdf5(r->path);
#endif
  if (hdf5 <= 0) return obc_fail(OBC_EFORMAT, "%s: not an HDF5 file", r->path);
  hid_t file = H5Fopen(r->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return obc_fail(OBC_EFORMAT, "%s: cannot open as HDF5", r->path);
  hid_t set = -1;
  const char *named = NULL;
  int rc = check_hash(r, file);
  if (!rc) rc = open_dataset(r, file, &set, &named);
  char name[256] = "";
  if (!rc) {
    if (named)
      snprintf(name, sizeof name, "%s", named);
    else
      H5Iget_name(set, name, sizeof name);
    rc = check_layout(r, set, *name == '/' ? name + 1 : name);
  }
  if (!rc) rc = read_values(r, set, *name == '/' ? name + 1 : name, out);
  if (set >= 0) H5Dclose(set);
  H5Fclose(file);
  return rc;
}

/* HDF5 calls are serialised by the critical section obc_hdf5 the trace
 * reader takes (traces/trace_read.c): scores may be read while another
 * thread reads a trace. A child of obc_child_run has one thread. */
int scores_read(const ScoresReadRequest *r, double *out) {
  int rc = OBC_OK;
  if (obc_child_active()) return read_unlocked(r, out);
#pragma omp critical(obc_hdf5)
  rc = read_unlocked(r, out);
  return rc;
}
