/* The options `obcache capture` and `obcache sweep` share: the model, the
 * NIAH prompt (capture/niah.h) and what to record (capture/capture.h). Each
 * command loops over argv and offers every argument to capture_args_parse
 * first, handling what it does not consume itself. */
#ifndef OBC_CAPTURE_ARGS_H
#define OBC_CAPTURE_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "capture/capture.h"
#include "capture/niah.h"

typedef struct {
  const char *model_path; /* NULL = the default model */
  const char *out_path;   /* -o */
  bool length_given;
  bool depth_given;
  NiahOptions niah;
  CaptureOptions capture;
} CaptureArgs;

void capture_args_default(CaptureArgs *args);
/* Consumes argv[*i] (and its value, advancing *i) when it is one of the
 * shared options: returns 1 when consumed, 0 when not one of them, or a
 * negative OBC_E* code for a bad value. */
int capture_args_parse(int argc, char **argv, int *i, CaptureArgs *args);
/* The shared options' help lines. */
void capture_args_print_help(FILE *out);
/* The command line, space-joined, for the trace's producer field. */
void capture_args_command_line(int argc, char **argv, char *out, size_t size);

#endif
