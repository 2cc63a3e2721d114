/* libFuzzer harness: a keep file as `obcache evict --keep` / `replay --keep`
 * read it, bound to one small synthetic trace made once at start (the default
 * shape of synth_options_default, seed 1). The input is the whole HDF5 keep
 * file. It is read with evict_keep_read against the trace and, when accepted,
 * replayed offline on it (replay_offline_run), which uses every kept mask and
 * count. With OBC_FUZZ_KEEP_TRACE=PATH set, the harness writes its trace to
 * PATH and exits, so that tests/fuzz/make_seeds.py can make seed keep files of
 * `obcache evict` from exactly this trace. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "replay/offline.h"
#include "evict/policy.h"
#include "tests/fuzz/fuzz_common.h"
#include "traces/synth.h"
#include "traces/trace.h"

static TraceReader *fuzz_reader;
static char fuzz_trace_path[8192];

static void close_trace(void) {
  trace_close(fuzz_reader);
  unlink(fuzz_trace_path);
}

static int make_trace(const char *path) {
  SynthOptions options;
  synth_options_default(&options);
  options.seed = 1;
  if (synth_generate(&options, path)) {
    fprintf(stderr, "fuzz_keep_file: %s\n", obc_error_message());
    return 1;
  }
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *out = getenv("OBC_FUZZ_KEEP_TRACE");
  if (out && *out) exit(make_trace(out));
  snprintf(fuzz_trace_path, sizeof fuzz_trace_path, "%s/trace.h5", fuzz_scratch());
  if (make_trace(fuzz_trace_path) || trace_open(fuzz_trace_path, &fuzz_reader)) {
    fprintf(stderr, "fuzz_keep_file: %s\n", obc_error_message());
    abort();
  }
  /* Registered after fuzz_scratch's removal of the folder, so it runs first. */
  atexit(close_trace);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[8192];
  fuzz_write("keep.h5", data, size, path, sizeof path);
  EvictKeepSet keep;
  if (!evict_keep_read(path, trace_meta(fuzz_reader), &keep)) {
    ReplayOfflineResult result;
    if (!replay_offline_run(fuzz_reader, &keep, &result)) replay_offline_result_free(&result);
    evict_keep_set_free(&keep);
  }
  unlink(path);
  return 0;
}
