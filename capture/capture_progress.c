/* Draws the capture progress bar with a carriage return, so the line is
 * rewritten in place; the rate counts whole tokens (layer-tokens divided by
 * the number of layers). Off a terminal, it prints a line at each quarter of the
 * prefill and of the decode steps instead. */
#include "capture/capture_progress.h"

#include <stdio.h>
#include <unistd.h>

#include "common/obc_time.h"

enum { BAR_WIDTH = 24 };

static void draw(CaptureProgress *p, const char *stage, size_t layer) {
  double now = obc_now_seconds();
  double elapsed = now - p->start_seconds;
  double fraction = p->total ? (double)p->done / (double)p->total : 1.0;
  if (fraction > 1.0) fraction = 1.0;
  double tokens = (double)p->done / (double)(p->n_layers ? p->n_layers : 1);
  double rate = elapsed > 0 ? tokens / elapsed : 0.0;
  double eta = fraction > 0 ? elapsed * (1.0 - fraction) / fraction : 0.0;
  char bar[BAR_WIDTH + 1];
  size_t filled = (size_t)(fraction * BAR_WIDTH);
  for (size_t i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
  bar[BAR_WIDTH] = '\0';
  fprintf(stderr, "\r[%s] %3.0f%% %-8s layer %2zu/%zu  %6.0f tok/s  ETA %4.0fs ", bar,
          fraction * 100.0, stage, layer + 1, p->n_layers, rate, eta);
  fflush(stderr);
  p->last_draw_seconds = now;
  p->drawn = true;
}

CaptureProgressMode capture_progress_mode_for_stderr(void) {
  return isatty(STDERR_FILENO) ? CAPTURE_PROGRESS_LIVE : CAPTURE_PROGRESS_LINES;
}

/* LINES: "capture: WHAT, S s". */
static void print_line(const CaptureProgress *p, const char *what) {
  fprintf(stderr, "capture: %s, %.1f s\n", what, obc_now_seconds() - p->start_seconds);
  fflush(stderr);
}

/* LINES: the line due after the layer-tokens done so far, if any. A decode
 * step is complete when its tokens went through every layer. */
static void print_due_line(CaptureProgress *p) {
  char what[64];
  size_t prefill = p->n_prompt * p->n_layers;
  if (p->done <= prefill) {
    size_t quarter = prefill ? 4 * p->done / prefill : 4;
    if (p->done == prefill) {
      snprintf(what, sizeof what, "prefill done, %zu tokens", p->n_prompt);
      print_line(p, what);
    } else if (quarter > p->prefill_quarter) {
      p->prefill_quarter = quarter;
      snprintf(what, sizeof what, "prefill %zu%%", 100 * p->done / prefill);
      print_line(p, what);
    }
    return;
  }
  size_t decoded = p->done - prefill, step = decoded / p->n_layers, T = p->n_decode;
  if (decoded % p->n_layers || step == 0 || step > T) return;
  if (step == T || 4 * step / T > 4 * (step - 1) / T) { /* a quarter of the steps, or the last */
    snprintf(what, sizeof what, "decode step %zu of %zu", step, T);
    print_line(p, what);
  }
}

void capture_progress_begin(CaptureProgress *p, CaptureProgressMode mode, size_t n_layers,
                            size_t n_prompt, size_t n_decode) {
  p->mode = mode;
  p->n_layers = n_layers ? n_layers : 1;
  p->n_prompt = n_prompt;
  p->n_decode = n_decode;
  p->total = (n_prompt + n_decode) * p->n_layers;
  p->done = 0;
  p->prefill_quarter = 0;
  p->start_seconds = obc_now_seconds();
  p->last_draw_seconds = 0;
  p->drawn = false;
}

void capture_progress_add(CaptureProgress *p, const char *stage, size_t layer, size_t n_tokens) {
  p->done += n_tokens;
  if (p->mode == CAPTURE_PROGRESS_LINES) print_due_line(p);
  if (p->mode != CAPTURE_PROGRESS_LIVE) return;
  if (obc_now_seconds() - p->last_draw_seconds < 0.1 && p->done < p->total) return;
  draw(p, stage, layer);
}

void capture_progress_stage(CaptureProgress *p, const char *stage, const char *line_text) {
  if (p->mode == CAPTURE_PROGRESS_LIVE) draw(p, stage, p->n_layers - 1);
  if (p->mode == CAPTURE_PROGRESS_LINES) print_line(p, line_text);
}

void capture_progress_end(CaptureProgress *p) {
  if (p->mode == CAPTURE_PROGRESS_LIVE && p->drawn) fputc('\n', stderr);
  p->drawn = false;
}
