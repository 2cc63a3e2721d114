/* `obcache logits`: a debugging aid that runs token ids (or a text) through the
 * C runtime and writes the raw float32 logits, so that tests can compare the
 * runtime with an independent reference (tests/reference_model.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_file.h"
#include "tokenizer/text_input.h"
#include "model/model.h"
#include "runtime/runtime.h"

static const char *usage =
    "usage: obcache logits [--model PATH] (--ids 1,2,3 | --text TEXT) -o FILE.f32\n"
    "                      [--all] [--ids-out FILE] [--context N] [--threads N]\n"
    "                      [--device cpu|cuda|cuda-bf16] [--weights native|f32]\n"
    "\n"
    "Debugging aid: runs the tokens through the model from position 0 and writes\n"
    "the logits as raw little-endian float32, shape (n, vocab) with --all, else\n"
    "(1, vocab) for the last token. --text is encoded without a chat template\n"
    "(BOS added when the tokenizer asks for it); --ids-out writes the ids used.\n"
    "--device picks the runtime backend.\n";

typedef struct {
  const char *model;
  ModelWeightsMode weights;
  const char *ids;
  const char *text;
  const char *output;
  const char *ids_out;
  bool all;
  size_t context;
  size_t threads;
  const char *device;
} LogitsArgs;

static int parse_args(int argc, char **argv, LogitsArgs *a, bool *help) {
  const ObcOption options[] = {
      OBC_OPT_TEXT("--model", "PATH", &a->model, "GGUF file or Hugging Face folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_TEXT("--ids", "1,2,3", &a->ids, "comma-separated token ids"),
      OBC_OPT_TEXT("--text", "TEXT", &a->text, "a text to encode instead of --ids"),
      OBC_OPT_TEXT("--output", "FILE.f32", &a->output, "the logits (required)", .alias = "-o"),
      OBC_OPT_FLAG("--all", &a->all, "the logits of every token, not only the last"),
      OBC_OPT_TEXT("--ids-out", "FILE", &a->ids_out, "write the ids used"),
      OBC_OPT_SIZE(
          "--context", "N", &a->context, "KV cache size in tokens",
          .default_text = "min(model context, " OBC_OPTION_SPELLED(RUNTIME_DEFAULT_CONTEXT) ")"),
      OBC_OPT_SIZE("--threads", "N", &a->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&a->device),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("logits", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache logits --help)",
                    args.positional[0]);
  if (!a->output) return obc_fail(OBC_EINVAL, "missing -o FILE.f32 (see obcache logits --help)");
  if (!a->ids == !a->text)
    return obc_fail(OBC_EINVAL, "give exactly one of --ids and --text (see obcache logits --help)");
  return OBC_OK;
}

static int encode_text(const Model *model, const char *text, int32_t **ids, size_t *n) {
  if (!model->tokenizer)
    return obc_fail(OBC_EINVAL, "%s: the model has no tokenizer (hint: use --ids)", model->path);
  int rc = text_encode(model->tokenizer, text, strlen(text), ids, n);
  if (rc) return rc;
  return *n ? 0 : obc_fail(OBC_EINVAL, "--text: the text encodes to no tokens");
}

static int write_ids(const char *path, const int32_t *ids, size_t n) {
  ObcPendingFile pending;
  FILE *f = NULL;
  int rc = obc_text_open(&pending, path, &f);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) fprintf(f, "%d%c", (int)ids[i], i + 1 < n ? ',' : '\n');
  return obc_text_close(&pending, f, 1);
}

static int write_logits(const char *path, const float *logits, size_t count) {
  ObcPendingFile pending;
  FILE *f = NULL;
  int rc = obc_text_open(&pending, path, &f);
  if (rc) return rc;
  int ok = fwrite(logits, sizeof(float), count, f) == count;
  return obc_text_close(&pending, f, ok);
}

int cmd_logits(int argc, char **argv) {
  LogitsArgs args = {0};
  bool help = false;
  int rc = parse_args(argc, argv, &args, &help);
  if (rc || help) return rc;
  Model *model = NULL;
  Runtime *rt = NULL;
  int32_t *ids = NULL;
  float *logits = NULL;
  size_t n = 0;
  /* Ids need no tokenizer: it is not read, so a folder whose tokenizer files
   * are missing or not understood still runs. */
  ModelLoadOptions load = {.weights = args.weights,
                           .tokenizer = args.ids ? MODEL_TOKENIZER_SKIP : MODEL_TOKENIZER_LOAD};
  if ((rc = model_load_with(args.model, &load, &model))) return rc;
  rc = args.ids ? text_parse_ids("--ids", args.ids, &ids, &n)
                : encode_text(model, args.text, &ids, &n);
  if (rc) goto done;
  RuntimeOptions options = {.max_context = args.context ? args.context : n,
                            .threads = args.threads,
                            .backend = args.device};
  if ((rc = runtime_create(model, &options, &rt))) goto done;
  size_t vocab = model->config.vocab_size, rows = args.all ? n : 1;
  logits = obc_malloc(rows * vocab * sizeof(float), "logits");
  if (!logits) {
    rc = OBC_ENOMEM;
    goto done;
  }
  rc = runtime_forward(rt, ids, n, args.all ? RUNTIME_LOGITS_ALL : RUNTIME_LOGITS_LAST, logits,
                       NULL);
  if (rc) goto done;
  if ((rc = write_logits(args.output, logits, rows * vocab))) goto done;
  if (args.ids_out && (rc = write_ids(args.ids_out, ids, n))) goto done;
  char held[256];
  model_weights_describe(model, held, sizeof held);
  fprintf(stderr, "weights: %s\n", held);
  fprintf(stderr, "logits: %zu tokens, wrote (%zu, %zu) float32 to %s\n", n, rows, vocab,
          args.output);
done:
  free(logits);
  free(ids);
  runtime_free(rt);
  model_free(model);
  return rc;
}
