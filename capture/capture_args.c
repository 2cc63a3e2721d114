/* The option table shared by capture and sweep (common/obc_options.h); a bad
 * value fails with a message naming the option and what was expected. */
#include "capture/capture_args.h"

#include <stdio.h>
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
      OBC_OPT_TEXT("--model", "M", &a->model_path, "GGUF file or Hugging Face folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_TEXT("--haystack", "H", &n->haystack,
                   "kjv (King James Bible via the `bible` program of bible-kjv), noise (RULER's "
                   "repeated sentences) or a text FILE"),
      OBC_OPT_UINT64("--seed", "S", &n->seed, "needle keys and values"),
      OBC_OPT_SIZE(
          "--needles", "K", &n->n_needles,
          "insert K needles: distinct keys, the question asks the first; with --multi-value they "
          "share one key and the answer must list every value"),
      OBC_OPT_FLAG("--multi-value", &n->multi_value, "see --needles"),
      OBC_OPT_CUSTOM("--uuid", NULL, &n->value_kind, parse_uuid,
                     "UUID values instead of 7-digit numbers"),
      OBC_OPT_TEXT("--needle", "TEXT", &n->needle_text,
                   "a custom needle (the answer must occur in it)"),
      OBC_OPT_TEXT("--question", "TEXT", &n->question_text, "the custom needle's question"),
      OBC_OPT_TEXT("--answer", "TEXT", &n->answer_text, "the custom needle's answer"),
      OBC_OPT_TEXT(
          "--answer-prefix", "TEXT", &n->answer_prefix,
          "start of the assistant's answer (default RULER's for RULER needles, none for a custom "
          "needle)"),
      OBC_OPT_FLAG("--no-chat-template", &n->no_chat_template,
                   "plain text even when the model has a chat template"),
      OBC_OPTION_HEADING("what to record:"),
      OBC_OPT_SIZE("--rows", "R", &c->rows, "last R prompt rows of Q/O/lse"),
      OBC_OPT_FLAG("--all-rows", &c->all_rows, "every prompt row (full-history windows)"),
      OBC_OPT_SIZE("--decode", "T", &c->decode,
                   "greedy decode steps after the prefill's answer token, every one captured "
                   "(decode steps, oracle@T's T; not answer tokens)"),
      OBC_OPT_FLAG("--store-attn", &c->store_attn, "also store the attention rows A"),
      OBC_OPT_FLAG("--no-column-sums", &c->skip_column_sums,
                   "leave out the column sums of every prompt row (H2O's scores; the trace is then "
                   "schema 2)"),
      OBC_OPT_CUSTOM("--dtype", "f32|f16", &c->store_f16, trace_parse_dtype,
                     "storage of float tensors", .show = trace_show_dtype),
      OBC_OPT_CUSTOM("--compress", "0-9", &c->compression, trace_parse_compression, "deflate level",
                     .show = obc_option_show_int),
      OBC_OPT_SIZE("--threads", "N", &c->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&c->device),
  };
  _Static_assert(sizeof table / sizeof *table == CAPTURE_ARGS_N_OPTIONS, "table size");
  memcpy(options, table, sizeof table);
}
