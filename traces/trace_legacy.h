/* Traces not in HDF5 1.10's checksummed format (schema 1, written before
 * the format was pinned) are read only in a child process
 * (common/obc_child.h): the child reads the file with HDF5 and writes it as
 * a schema-2 trace, which the parent then opens with the checked reader. A
 * crash, hang or memory exhaustion inside HDF5 kills only the child and
 * becomes "<path>: damaged schema-1 file (the HDF5 library failed reading
 * it)". Used by trace_open and by `obcache upgrade`. */
#ifndef OBC_TRACE_LEGACY_H
#define OBC_TRACE_LEGACY_H

#include <stdint.h>

#include "common/obc_child.h"
#include "traces/trace.h"

/* The limits of a child reading a file of file_size bytes: a time limit of
 * OBC_LEGACY_SECONDS plus one second per OBC_LEGACY_BYTES_PER_SECOND bytes,
 * and an address space of OBC_LEGACY_MEMORY plus 8 times the file size.
 * `obcache info tests/data/trace_v1.h5`, conversion included, took 0.15 s
 * (0.3 to 0.5 s under ASan) on 2 cores at load 7: the limits stop a hang,
 * never a valid file on a busy machine. The time limit grows with the file
 * on disk, not with what a compressed file holds: OBC_LEGACY_TIMEOUT=SECONDS
 * replaces it, and the message of a child that ran out of time says so. */
#define OBC_LEGACY_TIMEOUT_ENV "OBC_LEGACY_TIMEOUT"
#define OBC_LEGACY_SECONDS 10.0
#define OBC_LEGACY_BYTES_PER_SECOND ((double)(4 << 20))
#define OBC_LEGACY_MEMORY ((size_t)4 << 30)
ObcChildLimits trace_legacy_limits(uint64_t file_size);

/* OBC_EFORMAT "<path>: damaged schema-1 file (the HDF5 library failed reading
 * it)": what a child that did not finish means. */
int trace_legacy_fail_damaged(const char *path);
/* Removes the temporary file a child's writer of written_path left when it
 * was killed (written_path.tmp.<child pid>, common/obc_file.h). */
void trace_legacy_remove_child_temp(const char *written_path, const ObcChildReply *reply);
/* What obc_child_run's rc means for a reader of path: a child that did not
 * finish, or whose HDF5 work ran out of its memory (inside a limit a valid
 * file never reaches), read a damaged file; a failure of this process
 * (no pipe, no fork, no memory for the reply) is named after path. */
int trace_legacy_child_rc(const char *path, int rc, const ObcChildReply *reply,
                          const ObcChildLimits *limits);

/* trace_open of a file not in the checksummed format (or of a schema-1
 * trace in it): converts it in a child into a temporary schema-2 file (in
 * $TMPDIR, default /tmp; removed once open), opens that and labels the
 * reader as the original: its path, schema version 1, no content hash, its
 * tool version, creation time and rope layout. */
int trace_legacy_open(const char *path, TraceReader **out);

/* What a converted copy does not carry of its original: the strings the
 * writer sets itself, and the bytes each layer dataset takes in the
 * original (stored (n_layers, OBC_TRACE_SLAB_KINDS), malloc'd). */
typedef struct {
  TraceMeta labels; /* tool_version, created, model.rope_layout; no pointers */
  double *stored;
  size_t n_stored;
} TraceLegacyLabels;

/* In a child: reads the trace at path (trace_open, which reads it directly
 * there) and writes it as a schema-2 trace at out_path, deflated at
 * compression_level (0 = none), f16 when the original is. OBC_ENOTFOUND,
 * with no message, when the file has no schema_version attribute (not a
 * trace: `obcache upgrade` then tries a keep file). labels, when not NULL,
 * receives what the copy does not carry (free labels->stored). */
int trace_legacy_convert(const char *path, const char *out_path, int compression_level,
                         TraceLegacyLabels *labels);

/* trace_read.c: relabels a reader opened on a converted copy as its
 * original (see trace_legacy_open); takes over labels->stored. */
void trace_reader_relabel(TraceReader *reader, const char *path, TraceLegacyLabels *labels);

#endif
