/* HDF5 writer of the --scores-out file; see scores_file.h. Datasets are
 * contiguous float64 arrays; each write is a (1, 1, n_prompt) hyperslab. */
#include "scores/scores_file.h"

#include <errno.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"

struct ScoresFile {
  ObcPendingFile pending;
  hid_t file;
  hid_t datasets[OBC_SCORES_MAX_DATASETS];
  size_t n_datasets;
  size_t n_layers, n_kv_heads, n_prompt;
};

static int attr_write_str(ScoresFile *sf, const char *name, const char *value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(sf->file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t status = attr < 0 ? -1 : H5Awrite(attr, type, &value);
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  if (status < 0)
    return obc_fail(OBC_EIO, "%s: cannot write attribute %s", sf->pending.final_path, name);
  return OBC_OK;
}

static int attr_write_i64(ScoresFile *sf, const char *name, long long value) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(sf->file, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t status = attr < 0 ? -1 : H5Awrite(attr, H5T_NATIVE_LLONG, &value);
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  if (status < 0)
    return obc_fail(OBC_EIO, "%s: cannot write attribute %s", sf->pending.final_path, name);
  return OBC_OK;
}

static void close_handles(ScoresFile *sf) {
  for (size_t i = 0; i < sf->n_datasets; i++)
    if (sf->datasets[i] >= 0) H5Dclose(sf->datasets[i]);
  sf->n_datasets = 0;
  if (sf->file >= 0) H5Fclose(sf->file);
  sf->file = -1;
}

void scores_file_abort(ScoresFile *sf) {
  if (!sf) return;
  close_handles(sf);
  obc_pending_abort(&sf->pending);
  free(sf);
}

int scores_file_create(const char *path, const ScoresFileLayout *layout, ScoresFile **out) {
  *out = NULL;
  if (layout->n_datasets > OBC_SCORES_MAX_DATASETS)
    return obc_fail(OBC_EINVAL, "%s: too many datasets (%zu)", path, layout->n_datasets);
  ScoresFile *sf = obc_calloc(1, sizeof *sf, "scores file");
  if (!sf) return OBC_ENOMEM;
  sf->file = -1;
  sf->n_layers = layout->n_layers;
  sf->n_kv_heads = layout->n_kv_heads;
  sf->n_prompt = layout->n_prompt;
  int rc = obc_pending_init(&sf->pending, path);
  if (rc) {
    free(sf);
    return obc_fail_context(rc, "--scores-out");
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  obc_pending_register(&sf->pending);
  errno = 0;
  sf->file = H5Fcreate(sf->pending.temp_path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (sf->file < 0) {
    rc = obc_fail(OBC_EIO, "--scores-out: %s: cannot create HDF5 file: %s", path,
                  obc_write_error_text(sf->pending.temp_path, errno));
    scores_file_abort(sf); /* H5Fcreate may fail after creating the file */
    return rc;
  }
  hsize_t dims[3] = {layout->n_layers, layout->n_kv_heads, layout->n_prompt};
  hid_t space = H5Screate_simple(3, dims, NULL);
  for (size_t i = 0; i < layout->n_datasets; i++) {
    sf->datasets[i] = H5Dcreate2(sf->file, layout->names[i], H5T_IEEE_F64LE, space, H5P_DEFAULT,
                                 H5P_DEFAULT, H5P_DEFAULT);
    sf->n_datasets = i + 1;
    if (sf->datasets[i] < 0) {
      H5Sclose(space);
      rc = obc_fail(OBC_EIO, "%s: cannot create dataset %s", path, layout->names[i]);
      scores_file_abort(sf);
      return rc;
    }
  }
  H5Sclose(space);
  if ((rc = attr_write_str(sf, "schema", OBC_SCORES_SCHEMA)) ||
      (rc = attr_write_str(sf, "tool_version", OBC_VERSION)) ||
      (rc = attr_write_str(sf, "trace", layout->trace_path)) ||
      (rc = attr_write_str(sf, "trace_hash", layout->trace_hash ? layout->trace_hash : "")) ||
      (rc = attr_write_str(sf, "gqa", layout->gqa)) ||
      (rc = attr_write_str(sf, "precision", layout->precision)) ||
      (rc = attr_write_i64(sf, "window", (long long)layout->window)) ||
      (rc = attr_write_i64(sf, "oracle_steps", (long long)layout->oracle_steps))) {
    scores_file_abort(sf);
    return rc;
  }
  *out = sf;
  return OBC_OK;
}

int scores_file_write_head(ScoresFile *sf, size_t dataset, size_t layer, size_t kv_head,
                           const double *values) {
  if (dataset >= sf->n_datasets || layer >= sf->n_layers || kv_head >= sf->n_kv_heads)
    return obc_fail(OBC_EINVAL, "%s: hyperslab out of range", sf->pending.final_path);
  hsize_t start[3] = {layer, kv_head, 0};
  hsize_t count[3] = {1, 1, sf->n_prompt};
  hid_t file_space = H5Dget_space(sf->datasets[dataset]);
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL);
  hsize_t mem_dims[1] = {sf->n_prompt};
  hid_t mem_space = H5Screate_simple(1, mem_dims, NULL);
  errno = 0; /* HDF5 keeps the errno of a failed write */
  herr_t status = H5Dwrite(sf->datasets[dataset], H5T_NATIVE_DOUBLE, mem_space, file_space,
                           H5P_DEFAULT, values);
  int err = errno;
  H5Sclose(mem_space);
  H5Sclose(file_space);
  if (status < 0)
    return obc_fail(OBC_EIO, "%s: write failed (layer %zu, KV head %zu): %s",
                    sf->pending.final_path, layer, kv_head,
                    obc_write_error_text(sf->pending.temp_path, err));
  return OBC_OK;
}

int scores_file_commit(ScoresFile *sf) {
  for (size_t i = 0; i < sf->n_datasets; i++) H5Dclose(sf->datasets[i]);
  sf->n_datasets = 0;
  errno = 0; /* buffered data is written here: HDF5 keeps the errno of a failed write */
  herr_t status = H5Fclose(sf->file);
  int err = errno;
  sf->file = -1;
  int rc = status < 0 ? obc_fail(OBC_EIO, "%s: cannot close HDF5 file: %s", sf->pending.final_path,
                                 obc_write_error_text(sf->pending.temp_path, err))
                      : obc_pending_commit(&sf->pending);
  if (rc) obc_pending_abort(&sf->pending);
  free(sf);
  return rc;
}
