/* Keep files in the unchecksummed formats, read in a child process
 * (evict/keep_legacy.h). The child sends the checked keep set as its
 * fields, then the mask (n_layers, n_kv_heads, n_prompt) bytes, then the
 * counts (n_layers, n_kv_heads) as size_t. */
#include "evict/keep_legacy.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_child.h"
#include "common/obc_error.h"
#include "traces/trace_h5.h"
#include "traces/trace_legacy.h"

typedef struct {
  const char *path;
  const TraceMeta *meta;
} KeepJob;

static int read_work(void *arg, int reply_fd) {
  const KeepJob *job = arg;
  EvictKeepSet k;
  bool schema_1 = false;
  int rc = evict_keep_read_direct(job->path, job->meta, NULL, &k, &schema_1);
  if (rc) return rc;
  EvictKeepSet fields = k;
  fields.keep = NULL;
  fields.n_kept = NULL;
  size_t heads = k.n_layers * k.n_kv_heads;
  rc = obc_child_send(reply_fd, &fields, sizeof fields);
  if (!rc) rc = obc_child_send(reply_fd, k.keep, heads * k.n_prompt);
  if (!rc) rc = obc_child_send(reply_fd, k.n_kept, heads * sizeof *k.n_kept);
  evict_keep_set_free(&k);
  return rc;
}

int evict_keep_read_legacy(const char *path, const TraceMeta *meta, EvictKeepSet *out) {
  memset(out, 0, sizeof *out);
  struct stat st;
  if (stat(path, &st) != 0) return obc_fail(OBC_EIO, "%s: cannot open", path);
  KeepJob job = {.path = path, .meta = meta};
  ObcChildLimits limits = trace_legacy_limits((uint64_t)st.st_size);
  ObcChildReply reply;
  int rc = obc_child_run(read_work, &job, &limits, &reply);
  rc = trace_legacy_child_rc(path, rc, &reply, &limits);
  EvictKeepSet fields;
  size_t heads = meta->model.n_layers * meta->model.n_kv_heads;
  if (!rc) { /* the child checked the shape against meta; so does the size */
    if (reply.size != sizeof fields + heads * meta->n_prompt + heads * sizeof(size_t))
      rc = trace_legacy_fail_damaged(path);
  }
  if (!rc) {
    memcpy(&fields, reply.data, sizeof fields);
    if (fields.n_layers != meta->model.n_layers || fields.n_kv_heads != meta->model.n_kv_heads ||
        fields.n_prompt != meta->n_prompt)
      rc = trace_legacy_fail_damaged(path);
  }
  if (!rc) {
    *out = fields;
    out->keep = obc_malloc(heads * meta->n_prompt, "kept positions");
    out->n_kept = obc_malloc(heads * sizeof *out->n_kept, "kept counts");
    if (!out->keep || !out->n_kept) {
      evict_keep_set_free(out);
      rc = OBC_ENOMEM;
    }
  }
  if (!rc) {
    memcpy(out->keep, reply.data + sizeof fields, heads * meta->n_prompt);
    memcpy(out->n_kept, reply.data + sizeof fields + heads * meta->n_prompt,
           heads * sizeof *out->n_kept);
  }
  obc_child_reply_free(&reply);
  return rc;
}

/* ---- upgrade ------------------------------------------------------------------ */

/* H5Aiterate2 callback: copies one root attribute of the original (the file
 * id in *target) as schema 2 stores it: strings fixed-length, numbers as
 * float64 or int64; schema and complete are the writer's. */
static herr_t copy_attribute(hid_t original, const char *name, const H5A_info_t *info,
                             void *target) {
  (void)info;
  hid_t out = *(hid_t *)target;
  if (!strcmp(name, "schema") || !strcmp(name, "complete")) return 0;
  hid_t attr = H5Aopen(original, name, H5P_DEFAULT);
  hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
  H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  if (type >= 0) H5Tclose(type);
  if (attr >= 0) H5Aclose(attr);
  int rc = OBC_OK;
  if (cls == H5T_STRING) {
    char text[4096];
    rc = trace_h5_attr_read_str("", original, name, true, text, sizeof text);
    if (!rc) rc = trace_h5_attr_write_str("", out, name, text);
  } else if (cls == H5T_FLOAT) {
    double v = 0;
    rc = trace_h5_attr_read_f64("", original, name, &v);
    if (!rc) rc = trace_h5_attr_write_f64("", out, name, v);
  } else if (cls == H5T_INTEGER) {
    int64_t v = 0;
    rc = trace_h5_attr_read_i64("", original, name, &v);
    if (!rc) rc = trace_h5_attr_write_i64("", out, name, v);
  }
  return rc ? -1 : 0;
}

/* The keep dataset's shape as the meta to check the file against: the
 * file's own, with no trace hash and any window allowed. */
static int keep_shape(hid_t file, const char *path, TraceMeta *meta) {
  memset(meta, 0, sizeof *meta);
  hid_t set = H5Dopen2(file, "keep", H5P_DEFAULT);
  hid_t space = set >= 0 ? H5Dget_space(set) : -1;
  hsize_t dims[3] = {0, 0, 0};
  bool ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 3 &&
            H5Sget_simple_extent_dims(space, dims, NULL) >= 0;
  if (space >= 0) H5Sclose(space);
  if (set >= 0) H5Dclose(set);
  if (!ok || !dims[0] || !dims[1] || !dims[2] || dims[2] > ((hsize_t)1 << 32) ||
      dims[0] * dims[1] > ((hsize_t)1 << 20))
    return obc_fail(OBC_EFORMAT, "%s: dataset keep missing, not 3-D or of an impossible shape",
                    path);
  meta->model.n_layers = (size_t)dims[0];
  meta->model.n_kv_heads = (size_t)dims[1];
  meta->n_prompt = (size_t)dims[2];
  meta->n_rows = (size_t)1 << 40;
  return OBC_OK;
}

int evict_keep_convert(const char *path, const char *out_path) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0 || H5Aexists(file, "schema") <= 0) {
    if (file >= 0) H5Fclose(file);
    return OBC_ENOTFOUND;
  }
  TraceMeta meta;
  int rc = keep_shape(file, path, &meta);
  char trace[4096] = "", command_line[4096] = "";
  if (!rc && H5Aexists(file, "trace") > 0)
    rc = trace_h5_attr_read_str(path, file, "trace", true, trace, sizeof trace);
  if (!rc && H5Aexists(file, "command_line") > 0)
    rc =
        trace_h5_attr_read_str(path, file, "command_line", true, command_line, sizeof command_line);
  EvictKeepSet k;
  memset(&k, 0, sizeof k);
  bool schema_1 = false;
  if (!rc) rc = evict_keep_read_direct(path, &meta, NULL, &k, &schema_1);
  if (!rc) rc = evict_keep_write(out_path, &k, trace, command_line);
  /* Every attribute of the original over what the writer derived (seed,
   * score kind, tool version, ...), then complete again, last. */
  hid_t out = rc ? -1 : H5Fopen(out_path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (!rc && out < 0) rc = obc_fail(OBC_EIO, "%s: cannot reopen to copy attributes", out_path);
  if (!rc && H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_attribute, &out) < 0)
    rc = obc_fail(OBC_EFORMAT, "%s: cannot copy its attributes", path);
  if (!rc) rc = trace_h5_attr_write_str(out_path, out, "complete", "1");
  if (out >= 0 && H5Fclose(out) < 0 && !rc)
    rc = obc_fail(OBC_EIO, "%s: cannot write the keep file", out_path);
  if (rc) unlink(out_path);
  evict_keep_set_free(&k);
  H5Fclose(file);
  return rc;
}
