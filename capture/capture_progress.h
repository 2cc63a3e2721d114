/* The progress of a capture on stderr. On a terminal (CAPTURE_PROGRESS_LIVE)
 * a one-line bar redrawn in place at most ten times a second: work done in
 * layer-tokens (one token through one layer), the stage, the rate in tokens
 * per second and the estimated time left. Elsewhere (CAPTURE_PROGRESS_LINES:
 * a log, a pipe) a line at each quarter of the prefill and of the decode
 * steps and one per phase, with the seconds since the start:
 *   capture: prefill 25%, 19.4 s          (also 50%, 75%: of the layer-tokens)
 *   capture: prefill done, 4096 tokens, 77.9 s
 *   capture: decode step 4 of 16, 78.2 s  (steps 4, 8, 12, 16)
 *   capture: writing the trace, 79.0 s
 * Which lines appear depends on the counts alone, never on the clock. */
#ifndef OBC_CAPTURE_PROGRESS_H
#define OBC_CAPTURE_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  CAPTURE_PROGRESS_OFF,   /* nothing (the default of CaptureOptions) */
  CAPTURE_PROGRESS_LIVE,  /* the bar, redrawn in place: stderr is a terminal */
  CAPTURE_PROGRESS_LINES, /* a line per phase: stderr is a file or a pipe */
} CaptureProgressMode;

/* LIVE on a terminal, else LINES: what `obcache capture` shows. */
CaptureProgressMode capture_progress_mode_for_stderr(void);

typedef struct {
  CaptureProgressMode mode;
  size_t n_layers;
  size_t n_prompt, n_decode;
  size_t total; /* layer-tokens of the whole capture */
  size_t done;
  size_t prefill_quarter; /* LINES: the last quarter of the prefill printed */
  double start_seconds;
  double last_draw_seconds;
  bool drawn;
} CaptureProgress;

/* A capture of n_prompt prompt tokens and n_decode decode steps. */
void capture_progress_begin(CaptureProgress *progress, CaptureProgressMode mode, size_t n_layers,
                            size_t n_prompt, size_t n_decode);
/* Adds n_tokens that went through one layer; stage is "prefill" or "decode". */
void capture_progress_add(CaptureProgress *progress, const char *stage, size_t layer,
                          size_t n_tokens);
/* A final stage ("writing", ...) now: the bar with that stage, or in LINES
 * mode the line "capture: LINE_TEXT, S s". */
void capture_progress_stage(CaptureProgress *progress, const char *stage, const char *line_text);
/* Ends the bar's line (newline) if anything was drawn. */
void capture_progress_end(CaptureProgress *progress);

#endif
