/* The progress of a capture on stderr. On a terminal (CAPTURE_PROGRESS_LIVE)
 * a one-line bar redrawn in place at most ten times a second: work done in
 * layer-tokens (one token through one layer), the stage, the rate in tokens
 * per second and the estimated time left. Elsewhere (CAPTURE_PROGRESS_LINES:
 * a log, a pipe) one line per phase with the seconds since the start:
 * "capture: prefill done, 4096 tokens, 61.2 s", "capture: decode step 3 of
 * 16, 70.4 s", "capture: writing the trace, 75.0 s". */
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
  size_t total; /* layer-tokens of the whole capture */
  size_t done;
  double start_seconds;
  double last_draw_seconds;
  bool drawn;
} CaptureProgress;

void capture_progress_begin(CaptureProgress *progress, CaptureProgressMode mode, size_t n_layers,
                            size_t total_tokens);
/* Adds n_tokens that went through one layer; stage is "prefill" or "decode". */
void capture_progress_add(CaptureProgress *progress, const char *stage, size_t layer,
                          size_t n_tokens);
/* The end of a phase: in LINES mode the line "capture: WHAT, S s" (what:
 * "prefill done, 4096 tokens", "decode step 3 of 16"); nothing otherwise,
 * where the bar already shows it. */
void capture_progress_phase(CaptureProgress *progress, const char *what);
/* A final stage ("writing", ...) now: the bar with that stage, or in LINES
 * mode the line "capture: LINE_TEXT, S s". */
void capture_progress_stage(CaptureProgress *progress, const char *stage, const char *line_text);
/* Ends the bar's line (newline) if anything was drawn. */
void capture_progress_end(CaptureProgress *progress);

#endif
