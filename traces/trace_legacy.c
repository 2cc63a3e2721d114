/* Reading traces in the unchecksummed HDF5 formats in a child process
 * (traces/trace_legacy.h). The child converts; the parent opens only the
 * converted file, which is in the checksummed format. */
#include "traces/trace_legacy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "traces/trace_h5.h"
#include "traces/trace_hash.h"

ObcChildLimits trace_legacy_limits(uint64_t file_size) {
  ObcChildLimits limits = {
      .seconds = OBC_LEGACY_SECONDS + (double)file_size / OBC_LEGACY_BYTES_PER_SECOND,
      .memory_bytes = OBC_LEGACY_MEMORY + 8 * (size_t)file_size,
  };
  const char *timeout = getenv(OBC_LEGACY_TIMEOUT_ENV);
  char *end = NULL;
  double seconds = timeout ? strtod(timeout, &end) : 0.0;
  if (timeout && end != timeout && !*end && seconds > 0 && seconds < 1e9) limits.seconds = seconds;
  return limits;
}

int trace_legacy_fail_damaged(const char *path) {
  return obc_fail(OBC_EFORMAT, "%s: damaged schema-1 file (the HDF5 library failed reading it)",
                  path);
}

void trace_legacy_remove_child_temp(const char *written_path, const ObcChildReply *reply) {
  if (reply->pid <= 0) return;
  char child_temp[4200];
  snprintf(child_temp, sizeof child_temp, "%s.tmp.%ld", written_path, (long)reply->pid);
  unlink(child_temp);
}

int trace_legacy_child_rc(const char *path, int rc, const ObcChildReply *reply,
                          const ObcChildLimits *limits) {
  if (!rc) return OBC_OK;
  if (reply->timed_out) /* a hang, or a valid file larger than its limit allows */
    return obc_fail(OBC_EFORMAT,
                    "%s: damaged schema-1 file (the HDF5 library failed reading it): still "
                    "reading after %.3g s (%s=SECONDS sets a longer limit)",
                    path, limits->seconds, OBC_LEGACY_TIMEOUT_ENV);
  if (rc == OBC_EEXTERNAL && !reply->finished) return trace_legacy_fail_damaged(path);
  if (rc == OBC_ENOMEM && reply->finished) return trace_legacy_fail_damaged(path);
  if (!reply->finished) return obc_fail_context(rc, "%s", path);
  return rc; /* the child's own message, which names the file */
}

/* ---- the child: read directly, write schema 2 -------------------------------- */

/* Whether the file has a schema_version attribute (read in the child). */
static int has_schema_version(const char *path) {
  trace_h5_silence();
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return 1; /* trace_open says why */
  htri_t exists = H5Aexists(file, "schema_version");
  H5Fclose(file);
  return exists != 0;
}

/* Every tensor of reader into writer, one (layer, head) at a time. */
static int copy_tensors(TraceReader *reader, TraceWriter *writer) {
  const TraceMeta *m = trace_meta(reader);
  const TraceModel *c = &m->model;
  size_t kv = m->n_positions * c->head_dim, rows = m->n_rows * c->head_dim;
  size_t attn = m->has_attn ? m->n_rows * m->n_positions : 0;
  size_t logits = m->has_logits ? m->n_decode * c->vocab_size : 0;
  float *K = obc_malloc(kv * sizeof *K, "K"), *V = obc_malloc(kv * sizeof *V, "V");
  float *Q = obc_malloc(rows * sizeof *Q, "Q"), *O = obc_malloc(rows * sizeof *O, "O");
  float *lse = obc_malloc((m->n_rows ? m->n_rows : 1) * sizeof *lse, "lse");
  float *A = attn ? obc_malloc(attn * sizeof *A, "A") : NULL;
  float *L = logits ? obc_malloc(logits * sizeof *L, "logits") : NULL;
  int rc = K && V && Q && O && lse && (A || !attn) && (L || !logits) ? OBC_OK : OBC_ENOMEM;
  for (size_t layer = 0; !rc && layer < c->n_layers; layer++) {
    for (size_t h = 0; !rc && h < c->n_kv_heads; h++) {
      rc = trace_read_kv(reader, layer, h, K, V);
      if (!rc) rc = trace_write_kv(writer, layer, h, K, V);
    }
    for (size_t h = 0; !rc && h < c->n_heads; h++) {
      rc = trace_read_rows(reader, layer, h, Q, O, lse);
      if (!rc) rc = trace_write_rows(writer, layer, h, Q, O, lse);
      if (!rc && attn) rc = trace_read_attn(reader, layer, h, A);
      if (!rc && attn) rc = trace_write_attn(writer, layer, h, A);
    }
  }
  if (!rc && logits) rc = trace_read_logits(reader, L);
  if (!rc && logits) rc = trace_write_logits(writer, L);
  free(K), free(V), free(Q), free(O), free(lse), free(A), free(L);
  return rc;
}

/* The original's strings and per-dataset stored bytes into labels. */
static int record_labels(TraceReader *reader, TraceLegacyLabels *labels) {
  const TraceMeta *m = trace_meta(reader);
  TraceMeta *l = &labels->labels;
  memcpy(l->tool_version, m->tool_version, sizeof l->tool_version);
  memcpy(l->created, m->created, sizeof l->created);
  memcpy(l->model.rope_layout, m->model.rope_layout, sizeof l->model.rope_layout);
  labels->n_stored = m->model.n_layers * OBC_TRACE_SLAB_KINDS;
  labels->stored = obc_calloc(labels->n_stored, sizeof *labels->stored, "dataset sizes");
  if (!labels->stored) return OBC_ENOMEM;
  for (size_t layer = 0; layer < m->model.n_layers; layer++)
    for (int k = 0; k < OBC_TRACE_SLAB_KINDS; k++) {
      char name[64];
      double logical = 0;
      size_t element = 0;
      trace_h5_layer_dataset(name, sizeof name, layer, trace_hash_slab_name(k));
      if (trace_dataset_sizes(reader, name, &labels->stored[layer * OBC_TRACE_SLAB_KINDS + k],
                              &logical, &element))
        obc_error_clear();
    }
  return OBC_OK;
}

int trace_legacy_convert(const char *path, const char *out_path, int compression_level,
                         TraceLegacyLabels *labels) {
  if (!has_schema_version(path)) return OBC_ENOTFOUND;
  TraceReader *reader = NULL;
  int rc = trace_open(path, &reader);
  if (rc) return rc;
  const TraceMeta *m = trace_meta(reader);
  if (labels) rc = record_labels(reader, labels);
  if (rc) {
    trace_close(reader);
    return rc;
  }
  TraceWriteOptions options = {
      .store_f16 = !strcmp(m->dtype, "f16"),
      .compression_level = compression_level,
      .store_attn = m->has_attn,
      .store_logits = m->has_logits,
  };
  TraceWriter *writer = NULL;
  rc = trace_create(out_path, m, &options, &writer);
  if (!rc) rc = copy_tensors(reader, writer);
  if (!rc) rc = trace_set_result(writer, m->generated_text, m->needle_found);
  if (!rc)
    rc = trace_commit(writer);
  else if (writer)
    trace_abort(writer);
  trace_close(reader);
  return rc;
}

/* ---- the parent -------------------------------------------------------------- */

typedef struct {
  const char *path;
  const char *temp_path;
} ConvertJob;

/* The child's work: convert, then send the original's labels. */
static int convert_work(void *arg, int reply_fd) {
  const ConvertJob *job = arg;
  TraceLegacyLabels labels;
  memset(&labels, 0, sizeof labels);
  int rc = trace_legacy_convert(job->path, job->temp_path, 0, &labels);
  if (rc == OBC_ENOTFOUND)
    return obc_fail(OBC_EFORMAT, "%s: not an obcache trace (no schema_version attribute)",
                    job->path);
  if (!rc) rc = obc_child_send(reply_fd, &labels.labels, sizeof labels.labels);
  if (!rc) rc = obc_child_send(reply_fd, labels.stored, labels.n_stored * sizeof *labels.stored);
  free(labels.stored);
  return rc;
}

/* A new empty file in $TMPDIR (or /tmp) for the converted copy. */
static int make_temp(const char *path, char *out, size_t size) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !dir[0]) dir = "/tmp";
  if ((size_t)snprintf(out, size, "%s/obcache-legacy-XXXXXX", dir) >= size)
    return obc_fail(OBC_EINVAL, "%s: TMPDIR path too long", path);
  int fd = mkstemp(out);
  if (fd < 0)
    return obc_fail(OBC_EIO, "%s: cannot create a temporary file in %s to read it: %s", path, dir,
                    strerror(errno));
  close(fd);
  return OBC_OK;
}

int trace_legacy_open(const char *path, TraceReader **out) {
  *out = NULL;
  struct stat st;
  if (stat(path, &st) != 0) return obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  ObcPendingFile temp; /* removed by a signal while the child runs */
  memset(&temp, 0, sizeof temp);
  int rc = make_temp(path, temp.temp_path, sizeof temp.temp_path);
  if (rc) return rc;
  snprintf(temp.final_path, sizeof temp.final_path, "%s", temp.temp_path);
  obc_pending_register(&temp);
  ConvertJob job = {.path = path, .temp_path = temp.temp_path};
  ObcChildLimits limits = trace_legacy_limits((uint64_t)st.st_size);
  ObcChildReply reply;
  /* Forked while no other thread is inside HDF5: the child runs on alone,
   * skipping the lock (obc_child_active). */
#pragma omp critical(obc_hdf5)
  rc = obc_child_run(convert_work, &job, &limits, &reply);
  trace_legacy_remove_child_temp(temp.temp_path, &reply);
  rc = trace_legacy_child_rc(path, rc, &reply, &limits);
  if (!rc) {
    rc = trace_open(temp.temp_path, out);
    if (rc) obc_fail_context(rc, "%s: its schema-2 copy", path);
  }
  obc_pending_unregister(&temp);
  unlink(temp.temp_path); /* an open HDF5 file reads on from its descriptor */
  TraceLegacyLabels labels = {.n_stored = 0};
  if (!rc) { /* what the child sent: the labels, then the stored bytes of every layer dataset */
    labels.n_stored = trace_meta(*out)->model.n_layers * OBC_TRACE_SLAB_KINDS;
    if (reply.size != sizeof labels.labels + labels.n_stored * sizeof(double))
      rc = trace_legacy_fail_damaged(path);
  }
  if (!rc) {
    labels.stored = obc_malloc(labels.n_stored * sizeof *labels.stored, "dataset sizes");
    rc = labels.stored ? OBC_OK : OBC_ENOMEM;
  }
  if (!rc) {
    memcpy(&labels.labels, reply.data, sizeof labels.labels);
    memcpy(labels.stored, reply.data + sizeof labels.labels,
           labels.n_stored * sizeof *labels.stored);
    trace_reader_relabel(*out, path, &labels);
  } else if (*out) {
    trace_close(*out);
    *out = NULL;
  }
  obc_child_reply_free(&reply);
  return rc;
}
