/* A one-line progress bar on stderr for long captures: work done in
 * layer-tokens (one token through one layer), the stage, the rate in tokens
 * per second and the estimated time left. Drawn only when enabled (the
 * caller passes isatty(stderr)), at most ten times a second. */
#ifndef OBC_CAPTURE_PROGRESS_H
#define OBC_CAPTURE_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
  bool enabled;
  size_t n_layers;
  size_t total; /* layer-tokens of the whole capture */
  size_t done;
  double start_seconds;
  double last_draw_seconds;
  bool drawn;
} CaptureProgress;

void capture_progress_begin(CaptureProgress *progress, bool enabled, size_t n_layers,
                            size_t total_tokens);
/* Adds n_tokens that went through one layer; stage is "prefill" or "decode". */
void capture_progress_add(CaptureProgress *progress, const char *stage, size_t layer,
                          size_t n_tokens);
/* Draws a final line with the given stage ("writing", ...) now. */
void capture_progress_stage(CaptureProgress *progress, const char *stage);
/* Ends the line (newline) if anything was drawn. */
void capture_progress_end(CaptureProgress *progress);

#endif
