/* Parsing of the options shared by capture and sweep. Values are given as
 * "--opt VALUE" or "--opt=VALUE"; a bad value fails with a message naming the
 * option and what was expected. */
#include "capture/capture_args.h"

#include <stdlib.h>
#include <string.h>

#include "common/obc_cli.h"
#include "common/obc_error.h"

void capture_args_default(CaptureArgs *args) {
  memset(args, 0, sizeof *args);
  niah_options_default(&args->niah);
  capture_options_default(&args->capture);
}

void capture_args_print_help(FILE *out) {
  fprintf(
      out,
      "model and prompt:\n"
      "  --model M            GGUF file or Hugging Face folder (default: SmolLM2-135M-Instruct)\n"
      "  --haystack H         kjv (default; King James Bible via the `bible` program of\n"
      "                       bible-kjv), noise (RULER's repeated sentences) or a text FILE\n"
      "  --seed S             needle keys and values (default 1)\n"
      "  --needles K          insert K needles (default 1): distinct keys, the question\n"
      "                       asks the first; with --multi-value they share one key and\n"
      "                       the answer must list every value\n"
      "  --multi-value        see --needles\n"
      "  --uuid               UUID values instead of 7-digit numbers\n"
      "  --needle TEXT --question TEXT --answer TEXT\n"
      "                       a custom needle (the answer must occur in it)\n"
      "  --answer-prefix TEXT start of the assistant's answer (default RULER's for\n"
      "                       RULER needles, none for a custom needle)\n"
      "  --no-chat-template   plain text even when the model has a chat template\n"
      "what to record:\n"
      "  --rows R             last R prompt rows of Q/O/lse (default 128)\n"
      "  --all-rows           every prompt row (full-history windows)\n"
      "  --decode T           greedy decode steps, every one captured (default 16)\n"
      "  --store-attn         also store the attention rows A\n"
      "  --dtype f32|f16      storage of float tensors (default f32)\n"
      "  --compress 0-9       deflate level (default 0)\n"
      "  --threads N          OpenMP threads (default: all cores)\n"
      "  --device D           cpu (default), cuda or cuda-bf16 (GPU runtime)\n");
}

void capture_args_command_line(int argc, char **argv, char *out, size_t size) {
  size_t n = (size_t)snprintf(out, size, "obcache");
  for (int i = 0; i < argc && n < size; i++)
    n += (size_t)snprintf(out + n, size - n, " %s", argv[i]);
}

static int parse_flag(const char *arg, CaptureArgs *a) {
  if (!strcmp(arg, "--multi-value"))
    a->niah.multi_value = true;
  else if (!strcmp(arg, "--uuid"))
    a->niah.value_kind = NIAH_VALUE_UUID;
  else if (!strcmp(arg, "--no-chat-template"))
    a->niah.no_chat_template = true;
  else if (!strcmp(arg, "--all-rows"))
    a->capture.all_rows = true;
  else if (!strcmp(arg, "--store-attn"))
    a->capture.store_attn = true;
  else
    return 0;
  return 1;
}

int capture_args_parse(int argc, char **argv, int *i, CaptureArgs *a) {
  const char *arg = argv[*i];
  if (parse_flag(arg, a)) return 1;
  static const char *const options[] = {
      "--model",   "-o",       "--length",   "--depth",   "--haystack",      "--seed",
      "--needles", "--needle", "--question", "--answer",  "--answer-prefix", "--rows",
      "--decode",  "--dtype",  "--compress", "--threads", "--device"};
  const char *name = NULL;
  for (size_t k = 0; !name && k < sizeof options / sizeof *options; k++)
    if (obc_option_matches(arg, options[k])) name = options[k];
  if (!name) return 0;
  const char *v = obc_option_value(argc, argv, i, name);
  if (!v || !v[0]) return obc_fail(OBC_EINVAL, "%s: missing value", name);
  int rc = OBC_OK;
  size_t size = 0;
  long number = 0;
  if (!strcmp(name, "--model"))
    a->model_path = v;
  else if (!strcmp(name, "-o"))
    a->out_path = v;
  else if (!strcmp(name, "--length")) {
    rc = obc_parse_size(name, v, &a->niah.length);
    a->length_given = true;
  } else if (!strcmp(name, "--depth")) {
    rc = obc_parse_double(name, v, &a->niah.depth);
    if (!rc && !(a->niah.depth >= 0 && a->niah.depth <= 100))
      rc = obc_fail(OBC_EINVAL, "--depth: %s is outside 0..100 (percent of the context)", v);
    a->depth_given = true;
  } else if (!strcmp(name, "--haystack"))
    a->niah.haystack = v;
  else if (!strcmp(name, "--seed")) {
    rc = obc_parse_size(name, v, &size);
    a->niah.seed = (uint64_t)size;
  } else if (!strcmp(name, "--needles"))
    rc = obc_parse_size(name, v, &a->niah.n_needles);
  else if (!strcmp(name, "--needle"))
    a->niah.needle_text = v;
  else if (!strcmp(name, "--question"))
    a->niah.question_text = v;
  else if (!strcmp(name, "--answer"))
    a->niah.answer_text = v;
  else if (!strcmp(name, "--answer-prefix"))
    a->niah.answer_prefix = v;
  else if (!strcmp(name, "--rows"))
    rc = obc_parse_size(name, v, &a->capture.rows);
  else if (!strcmp(name, "--decode"))
    rc = obc_parse_size(name, v, &a->capture.decode);
  else if (!strcmp(name, "--threads"))
    rc = obc_parse_size(name, v, &a->capture.threads);
  else if (!strcmp(name, "--device"))
    a->capture.device = v;
  else if (!strcmp(name, "--dtype")) {
    if (!strcmp(v, "f32"))
      a->capture.store_f16 = false;
    else if (!strcmp(v, "f16"))
      a->capture.store_f16 = true;
    else
      rc = obc_fail(OBC_EINVAL, "--dtype: expected f32 or f16, got '%s'", v);
  } else if (!strcmp(name, "--compress")) {
    rc = obc_parse_int(name, v, &number);
    if (!rc && (number < 0 || number > 9))
      rc = obc_fail(OBC_EINVAL, "--compress: %ld is outside 0..9", number);
    a->capture.compression = (int)number;
  }
  return rc ? rc : 1;
}
