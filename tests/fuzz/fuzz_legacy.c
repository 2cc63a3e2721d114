/* libFuzzer harness: files in the unchecksummed HDF5 formats (schema-1
 * traces and keep files), which trace_open and evict_keep_read read only
 * through a child process (traces/trace_legacy.h, evict/keep_legacy.h). The
 * input is the whole file. It is opened as a trace; when accepted, its
 * content hash is recomputed (every slab read) from the converted copy; when
 * refused, it is read as a keep file for tests/data/trace_v1.h5. A crash or
 * hang inside HDF5 must stay inside the child: what the harness sees is the
 * parent, which must only ever return a message. Seeds: tests/data/trace_v1.h5
 * and a schema-1 keep file for it (tests/fuzz/make_seeds.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "evict/policy.h"
#include "tests/fuzz/fuzz_common.h"
#include "traces/trace.h"

static TraceReader *fuzz_v1;

static void close_v1(void) { trace_close(fuzz_v1); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *path = OBC_SOURCE_DIR "/tests/data/trace_v1.h5";
  fuzz_scratch(); /* the converted copy goes to $TMPDIR */
  if (trace_open(path, &fuzz_v1)) {
    fprintf(stderr, "fuzz_legacy: %s\n", obc_error_message());
    abort();
  }
  atexit(close_v1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[8192];
  fuzz_write("legacy.h5", data, size, path, sizeof path);
  TraceReader *reader;
  if (!trace_open(path, &reader)) {
    char hash[17];
    trace_compute_hash(reader, hash);
    trace_close(reader);
  } else {
    EvictKeepSet keep;
    if (!evict_keep_read(path, trace_meta(fuzz_v1), &keep)) evict_keep_set_free(&keep);
  }
  unlink(path);
  return 0;
}
