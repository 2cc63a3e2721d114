/* The option table shared by capture and sweep (common/obc_options.h); a bad
 * value fails with a message naming the option and what was expected. */
#include "capture/capture_args.h"

#include <string.h>

#include "common/obc_error.h"
#include "runtime/runtime.h"
#include "traces/trace.h"

void capture_args_default(CaptureArgs *args) {
  memset(args, 0, sizeof *args);
  niah_options_default(&args->niah);
  capture_options_default(&args->capture);
}

static int parse_uuid(void *target, const char *option, const char *value) {
  (void)option, (void)value;
  *(NiahValueKind *)target = NIAH_VALUE_UUID;
  return OBC_OK;
}

void capture_args_options(CaptureArgs *a, ObcOption options[CAPTURE_ARGS_N_OPTIONS]) {
  NiahOptions *n = &a->niah;
  CaptureOptions *c = &a->capture;
  const ObcOption table[] = {
      OBC_OPTION_HEADING("model and prompt:"),
      {"--model", NULL, "M", "GGUF file or Hugging Face folder", "SmolLM2-135M-Instruct",
       OBC_OPTION_TEXT, &a->model_path, NULL, NULL},
      MODEL_WEIGHTS_OPTION(&a->weights),
      {"--haystack", NULL, "H",
       "kjv (default; King James Bible via the `bible` program of bible-kjv), noise (RULER's "
       "repeated sentences) or a text FILE",
       NULL, OBC_OPTION_TEXT, &n->haystack, NULL, NULL},
      {"--seed", NULL, "S", "needle keys and values", "1", OBC_OPTION_UINT64, &n->seed, NULL, NULL},
      {"--needles", NULL, "K",
       "insert K needles: distinct keys, the question asks the first; with --multi-value they "
       "share one key and the answer must list every value",
       "1", OBC_OPTION_SIZE, &n->n_needles, NULL, NULL},
      {"--multi-value", NULL, NULL, "see --needles", NULL, OBC_OPTION_FLAG, &n->multi_value, NULL,
       NULL},
      {"--uuid", NULL, NULL, "UUID values instead of 7-digit numbers", NULL, OBC_OPTION_CUSTOM,
       &n->value_kind, parse_uuid, NULL},
      {"--needle", NULL, "TEXT", "a custom needle (the answer must occur in it)", NULL,
       OBC_OPTION_TEXT, &n->needle_text, NULL, NULL},
      {"--question", NULL, "TEXT", "the custom needle's question", NULL, OBC_OPTION_TEXT,
       &n->question_text, NULL, NULL},
      {"--answer", NULL, "TEXT", "the custom needle's answer", NULL, OBC_OPTION_TEXT,
       &n->answer_text, NULL, NULL},
      {"--answer-prefix", NULL, "TEXT",
       "start of the assistant's answer (default RULER's for RULER needles, none for a custom "
       "needle)",
       NULL, OBC_OPTION_TEXT, &n->answer_prefix, NULL, NULL},
      {"--no-chat-template", NULL, NULL, "plain text even when the model has a chat template", NULL,
       OBC_OPTION_FLAG, &n->no_chat_template, NULL, NULL},
      OBC_OPTION_HEADING("what to record:"),
      {"--rows", NULL, "R", "last R prompt rows of Q/O/lse", "128", OBC_OPTION_SIZE, &c->rows, NULL,
       NULL},
      {"--all-rows", NULL, NULL, "every prompt row (full-history windows)", NULL, OBC_OPTION_FLAG,
       &c->all_rows, NULL, NULL},
      {"--decode", NULL, "T", "greedy decode steps, every one captured", "16", OBC_OPTION_SIZE,
       &c->decode, NULL, NULL},
      {"--store-attn", NULL, NULL, "also store the attention rows A", NULL, OBC_OPTION_FLAG,
       &c->store_attn, NULL, NULL},
      {"--no-column-sums", NULL, NULL,
       "leave out the column sums of every prompt row (H2O's scores; the trace is then schema 2)",
       NULL, OBC_OPTION_FLAG, &c->skip_column_sums, NULL, NULL},
      {"--dtype", NULL, "f32|f16", "storage of float tensors", "f32", OBC_OPTION_CUSTOM,
       &c->store_f16, trace_parse_dtype, NULL},
      {"--compress", NULL, "0-9", "deflate level", "0", OBC_OPTION_CUSTOM, &c->compression,
       trace_parse_compression, NULL},
      {"--threads", NULL, "N", "OpenMP threads", "all cores", OBC_OPTION_SIZE, &c->threads, NULL,
       NULL},
      RUNTIME_DEVICE_OPTION(&c->device),
  };
  _Static_assert(sizeof table / sizeof *table == CAPTURE_ARGS_N_OPTIONS, "table size");
  memcpy(options, table, sizeof table);
}
