/* `obcache perplexity`: teacher-forced perplexity of a model on a text file,
 * with sliding windows of --context tokens advanced by --stride, each token
 * scored once with as much preceding context as its window gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_time.h"
#include "tokenizer/text_input.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/runtime.h"

static const char *usage =
    "usage: obcache perplexity [--model PATH] FILE [--context N] [--stride N]\n"
    "                          [--threads N] [--device cpu|cuda|cuda-bf16]\n"
    "                          [--weights native|f32]\n"
    "\n"
    "Teacher-forced perplexity exp(mean negative log-likelihood) of FILE's tokens.\n"
    "The text is encoded without a chat template (BOS first when the tokenizer adds\n"
    "one). Windows of --context tokens start every --stride tokens; each window is\n"
    "run from an empty cache, and scores only the tokens that no earlier window\n"
    "scored, so every token after the first is predicted once, from at least\n"
    "context - stride tokens of history (fewer at the start). Prints the\n"
    "perplexity, the tokens scored and the time. --device picks the runtime backend.\n";

enum { PIECE = 256 }; /* tokens per forward call: bounds the logits buffer */

typedef struct {
  const char *model;
  ModelWeightsMode weights;
  const char *file;
  size_t context;
  size_t stride;
  size_t threads;
  const char *device;
  size_t max_text_bytes;
} PerplexityArgs;

static int parse_args(int argc, char **argv, PerplexityArgs *a, bool *help) {
  a->context = 1024;
  a->max_text_bytes = OBC_TEXT_MAX_BYTES;
  const ObcOption options[] = {
      OBC_OPT_TEXT("--model", "PATH", &a->model, "GGUF file or Hugging Face folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_SIZE("--context", "N", &a->context, "tokens per window"),
      OBC_OPT_SIZE("--stride", "N", &a->stride, "tokens between window starts",
                   .default_text = "context/2"),
      OBC_OPT_SIZE("--threads", "N", &a->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&a->device),
      text_max_bytes_option(&a->max_text_bytes),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("perplexity", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (one FILE only)", args.positional[1]);
  if (args.n_positional) a->file = args.positional[0];
  if (!a->file) return obc_fail(OBC_EINVAL, "missing FILE (see obcache perplexity --help)");
  if (a->context < 2) return obc_fail(OBC_EINVAL, "--context: expected at least 2 tokens");
  if (a->stride == 0) a->stride = a->context / 2;
  if (a->stride > a->context)
    return obc_fail(OBC_EINVAL, "--stride %zu: expected at most --context (%zu)", a->stride,
                    a->context);
  return OBC_OK;
}

/* Runs tokens [begin, end) from an empty cache and adds the NLL of every
 * token in [first_scored, end) (predicted from the position before it). */
static int score_window(Runtime *rt, const int32_t *ids, size_t begin, size_t end,
                        size_t first_scored, float *logits, double *nll, size_t *scored) {
  size_t vocab = runtime_model(rt)->config.vocab_size;
  runtime_reset(rt);
  for (size_t at = begin; at < end; at += PIECE) {
    size_t n = end - at < PIECE ? end - at : PIECE;
    int rc = runtime_forward(rt, ids + at, n, RUNTIME_LOGITS_ALL, logits, NULL);
    if (rc) return rc;
    for (size_t t = 0; t < n; t++) {
      size_t target = at + t + 1; /* logits of position at+t predict token at+t+1 */
      if (target < first_scored || target >= end) continue;
      *nll += generate_token_nll(logits + t * vocab, vocab, ids[target]);
      (*scored)++;
    }
  }
  return 0;
}

int cmd_perplexity(int argc, char **argv) {
  PerplexityArgs args = {0};
  bool help = false;
  int rc = parse_args(argc, argv, &args, &help);
  if (rc || help) return rc;
  char *text = NULL;
  size_t length = 0;
  if ((rc = text_read_file(args.file, args.max_text_bytes, &text, &length))) return rc;
  Model *model = NULL;
  Runtime *rt = NULL;
  int32_t *ids = NULL;
  float *logits = NULL;
  size_t n = 0;
  if ((rc = model_load_with(args.model, &(ModelLoadOptions){.weights = args.weights}, &model)))
    goto done;
  if (!model->tokenizer) {
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer to encode the text", model->path);
    goto done;
  }
  if ((rc = text_encode(model->tokenizer, text, length, &ids, &n))) goto done;
  if (n < 2) {
    rc = obc_fail(OBC_EINVAL, "%s: the text has %zu tokens (expected at least 2)", args.file, n);
    goto done;
  }
  RuntimeOptions options = {
      .max_context = args.context, .threads = args.threads, .backend = args.device};
  if ((rc = runtime_create(model, &options, &rt))) goto done;
  logits = obc_malloc(PIECE * model->config.vocab_size * sizeof(float), "logits");
  if (!logits) {
    rc = OBC_ENOMEM;
    goto done;
  }
  double start = obc_now_seconds(), nll = 0.0;
  size_t scored = 0, scored_until = 1, windows = 0;
  for (size_t begin = 0;; begin += args.stride) {
    size_t end = begin + args.context < n ? begin + args.context : n;
    rc = score_window(rt, ids, begin, end, scored_until, logits, &nll, &scored);
    if (rc) goto done;
    windows++;
    scored_until = end;
    if (end == n) break;
  }
  double seconds = obc_now_seconds() - start;
  printf(
      "perplexity %.4f over %zu scored tokens (%zu tokens in %s; %zu windows of %zu, "
      "stride %zu)\n",
      exp(nll / (double)scored), scored, n, args.file, windows, args.context, args.stride);
  char held[256];
  model_weights_describe(model, held, sizeof held);
  fprintf(stderr, "weights: %s\n", held);
  fprintf(stderr, "time %.2f s (%.1f tokens/s run)\n", seconds,
          (double)(windows ? (double)scored : 0.0) / seconds);
done:
  free(logits);
  free(ids);
  free(text);
  runtime_free(rt);
  model_free(model);
  return rc;
}
