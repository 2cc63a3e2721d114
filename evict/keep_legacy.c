/* Keep files in the unchecksummed formats, read in a child process
 * (evict/keep_legacy.h). The child sends the checked keep set as its
 * fields, then the mask (n_layers, n_kv_heads, n_prompt) bytes, then the
 * counts (n_layers, n_kv_heads) as size_t. */
#include "evict/keep_legacy.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/obc_child.h"
#include "common/obc_error.h"
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
  if ((rc == OBC_EEXTERNAL && !reply.finished) || rc == OBC_ENOMEM)
    rc = trace_legacy_fail_damaged(path);
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
