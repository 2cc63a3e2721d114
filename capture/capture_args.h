/* The options `obcache capture` and `obcache sweep` share: the model, the
 * NIAH prompt (prompts/niah.h) and what to record (capture/capture.h), as an
 * option table (common/obc_options.h) that each command parses beside its own. */
#ifndef OBC_CAPTURE_ARGS_H
#define OBC_CAPTURE_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "capture/capture.h"
#include "prompts/niah.h"
#include "common/obc_options.h"
#include "model/model.h"

typedef struct {
  const char *model_path;   /* NULL = the default model */
  ModelWeightsMode weights; /* --weights */
  const char *out_path;     /* -o, each command's own option */
  NiahOptions niah;
  CaptureOptions capture;
} CaptureArgs;

void capture_args_default(CaptureArgs *args);
enum { CAPTURE_ARGS_N_OPTIONS = 23 };
/* Fills options with the shared options (two headings and 20 options),
 * parsed into args. */
void capture_args_options(CaptureArgs *args, ObcOption options[CAPTURE_ARGS_N_OPTIONS]);
#endif
