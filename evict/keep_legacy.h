/* Keep files not in HDF5 1.10's checksummed format (schema obcache-keep/1,
 * or any file whose superblock says otherwise) are read only in a child
 * process (common/obc_child.h, traces/trace_legacy.h): the child reads and
 * checks the file against the trace and sends the keep set back; a crash,
 * hang or memory exhaustion inside HDF5 becomes "<path>: damaged schema-1
 * file (the HDF5 library failed reading it)". */
#ifndef OBC_KEEP_LEGACY_H
#define OBC_KEEP_LEGACY_H

#include <stdbool.h>

#include "evict/policy.h"
#include "traces/trace_format.h"

/* evict_keep_read's checks, reading the file with HDF5 directly: in a
 * child, or on a file in the checksummed format (format given: the keep
 * dataset's object header is checked from its bytes first). *schema_1 is
 * set, with nothing read, when a checksummed file's strings are
 * variable-length (schema 1): read it in a child. */
int evict_keep_read_direct(const char *path, const TraceMeta *meta, const TraceFileFormat *format,
                           EvictKeepSet *out, bool *schema_1);
/* evict_keep_read_direct in a child; the keep set comes back whole. */
int evict_keep_read_legacy(const char *path, const TraceMeta *meta, EvictKeepSet *out);
/* In a child: rewrites the keep file at path as schema obcache-keep/2 at
 * out_path (every attribute and dataset, strings fixed-length, datasets
 * checksummed), after checking it as evict_keep_read does against the shape
 * its own keep dataset gives. OBC_ENOTFOUND, with no message, when the file
 * has no schema attribute (not a keep file). */
int evict_keep_convert(const char *path, const char *out_path);

#endif
