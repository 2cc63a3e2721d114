/* Capture: run a model on a prompt and record what the analyser needs into a
 * trace (traces/trace.h). One prefill with the runtime's capture seam
 * collecting the last R prompt rows (Q, O, lse, and A on request) and the
 * column sums of every prompt row's attention (capture/capture_sums.h), then T
 * greedy decode steps from the full cache, each fed token's row captured with
 * its next-token logits; K/V of every position come from the cache at the end.
 * The trace file appears under its final name only when complete. */
#ifndef OBC_CAPTURE_H
#define OBC_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>

#include "capture/capture_progress.h"
#include "prompts/niah.h"
#include "model/model.h"

/* Where the column sums and query statistics run: on the runtime's device
 * when its backend has device sums (runtime.h RuntimeSums: CUDA), else on
 * the host from every prompt row's Q/O; or always on the host. The
 * environment variable CAPTURE_SUMS_ENV=cpu makes the default the host
 * (to time one against the other, tests/gpu/kit_run.sh). */
typedef enum {
  CAPTURE_SUMS_DEVICE = 0, /* the backend's device when it can */
  CAPTURE_SUMS_HOST = 1    /* capture/capture_sums.c and capture_qstats.c */
} CaptureSumsPlace;
#define CAPTURE_SUMS_ENV "OBC_CAPTURE_SUMS"

typedef struct {
  size_t rows;     /* last R prompt rows captured (clipped to the prompt) */
  bool all_rows;   /* capture every prompt row (full-history windows) */
  size_t decode;   /* T >= 1 greedy decode steps, always all T of them */
  bool store_attn; /* per-layer A */
  bool store_f16;  /* half-precision storage */
  /* leave out the column sums of every prompt row (capture/capture_sums.h),
   * which make the trace schema 3 */
  bool skip_column_sums;
  CaptureSumsPlace sums_place;  /* CAPTURE_SUMS_DEVICE, or CAPTURE_SUMS_ENV's choice */
  int compression;              /* 0..9 */
  size_t threads;               /* 0 = OpenMP default */
  const char *device;           /* runtime backend: NULL/"cpu", "cuda", "cuda-bf16" */
  CaptureProgressMode progress; /* on stderr; CAPTURE_PROGRESS_OFF by default */
  const char *producer;         /* the command line, recorded in the trace */
} CaptureOptions;

typedef struct {
  size_t n_prompt;
  size_t n_decode;
  char generated_text[4096]; /* up to the first stop token */
  int needle_found;          /* RULER string match of the answer */
  double prefill_seconds;
  double decode_seconds;
  double write_seconds;
  bool sums_on_device; /* the column sums ran on the runtime's device */
} CaptureResult;

void capture_options_default(CaptureOptions *options);

/* Fails before any computation when the prompt plus T decode steps exceed the
 * model's context or the output folder is not writable. */
int capture_run(const Model *model, const NiahPrompt *prompt, const CaptureOptions *options,
                const char *out_path, CaptureResult *result);

#endif
