/* `obcache upgrade OLD NEW`: rewrites a schema-1 trace or keep file (or any
 * trace or keep file) as schema 2, in HDF5 1.10's checksummed format. The
 * old file is read only in a child process (traces/trace_legacy.h), so a
 * damaged one fails with a message instead of crashing; NEW appears only
 * when complete. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_options.h"
#include "evict/keep_legacy.h"
#include "traces/trace.h"
#include "traces/trace_format.h"
#include "traces/trace_legacy.h"

enum { UPGRADED_TRACE = 1, UPGRADED_KEEP = 2 };

typedef struct {
  const char *old_path;
  const char *temp_path;
  int compression_level;
} UpgradeJob;

/* The child's work: a trace, else a keep file; replies which it was. */
static int upgrade_work(void *arg, int reply_fd) {
  const UpgradeJob *job = arg;
  unsigned char kind = UPGRADED_TRACE;
  int rc = trace_legacy_convert(job->old_path, job->temp_path, job->compression_level, NULL);
  if (rc == OBC_ENOTFOUND) {
    kind = UPGRADED_KEEP;
    rc = evict_keep_convert(job->old_path, job->temp_path);
  }
  if (rc == OBC_ENOTFOUND)
    rc = obc_fail(OBC_EFORMAT,
                  "%s: neither an obcache trace nor a keep file (no schema_version or schema "
                  "attribute)",
                  job->old_path);
  if (!rc) rc = obc_child_send(reply_fd, &kind, 1);
  return rc;
}

/* A trace written by the child, opened with the checked reader: its
 * content hash recomputed from every chunk must be the recorded one. */
static int check_trace(const char *temp_path, const char *new_path, char hash[17]) {
  TraceReader *reader = NULL;
  int rc = trace_open(temp_path, &reader);
  char computed[17] = "";
  if (!rc) rc = trace_compute_hash(reader, computed);
  if (!rc && strcmp(computed, trace_meta(reader)->content_hash))
    rc = obc_fail(OBC_EFORMAT, "%s: the upgraded trace's content hash does not check", new_path);
  if (!rc) memcpy(hash, computed, 17);
  trace_close(reader);
  return rc;
}

int cmd_upgrade(int argc, char **argv) {
  int compression_level = 0;
  const ObcOption options[] = {
      OBC_OPT_CUSTOM("--compress", "0-9", &compression_level, trace_parse_compression,
                     "deflate level with byte shuffle of the upgraded trace's tensors",
                     .show = obc_option_show_int),
  };
  const ObcOptionList lists[] = {OBC_OPTION_LIST(options)};
  ObcArguments args;
  int rc = obc_options_parse("upgrade", lists, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(
        stdout,
        "usage: obcache upgrade OLD NEW [--compress N]\n"
        "\n"
        "Rewrites a schema-1 trace or keep file OLD as schema 2 (traces/SCHEMA.md): HDF5\n"
        "1.10's checksummed format, fixed-length strings, a Fletcher32 checksum on every\n"
        "chunk and, for a trace, its content hash. Every value is kept; a trace keeps its\n"
        "dtype. OLD is read in a child process with a time and memory limit, so a damaged\n"
        "file fails with a message. NEW appears only when complete. Other commands read\n"
        "schema-1 files the same way, converting them on every run: upgrade once.\n",
        lists, 1);
    return 0;
  }
  if (args.n_positional != 2)
    return obc_fail(OBC_EINVAL, "expected OLD and NEW (see obcache upgrade --help)");
  const char *old_path = args.positional[0], *new_path = args.positional[1];
  TraceFileFormat format;
  rc = trace_format_probe(old_path, "an obcache trace or keep file", &format);
  if (rc) return rc;
  ObcPendingFile pending;
  rc = obc_pending_init(&pending, new_path);
  if (rc) return rc;
  obc_pending_register(&pending);
  UpgradeJob job = {
      .old_path = old_path, .temp_path = pending.temp_path, .compression_level = compression_level};
  ObcChildLimits limits = trace_legacy_limits(format.file_size);
  ObcChildReply reply;
  rc = obc_child_run(upgrade_work, &job, &limits, &reply);
  trace_legacy_remove_child_temp(pending.temp_path, &reply);
  rc = trace_legacy_child_rc(old_path, rc, &reply, &limits);
  if (!rc && reply.size != 1) rc = trace_legacy_fail_damaged(old_path);
  int kind = rc ? 0 : reply.data[0];
  obc_child_reply_free(&reply);
  char hash[17] = "";
  if (!rc && kind == UPGRADED_TRACE) rc = check_trace(pending.temp_path, new_path, hash);
  if (!rc) {
    TraceFileFormat written;
    rc = trace_format_probe(pending.temp_path, "an obcache trace or keep file", &written);
    if (!rc && !written.checksummed)
      rc =
          obc_fail(OBC_EFORMAT, "%s: the upgraded file is not in the checksummed format", new_path);
  }
  if (!rc) rc = obc_pending_commit(&pending);
  if (rc) obc_pending_abort(&pending);
  obc_pending_unregister(&pending);
  if (rc) return rc;
  if (kind == UPGRADED_TRACE)
    printf("upgrade: trace %s -> %s (schema %d, content hash %s)\n", old_path, new_path,
           OBC_TRACE_SCHEMA_VERSION_PLAIN, hash);
  else
    printf("upgrade: keep file %s -> %s (schema obcache-keep/2)\n", old_path, new_path);
  return OBC_OK;
}
