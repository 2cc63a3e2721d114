/* `obcache capture`: builds a Needle-in-a-Haystack prompt for the model and
 * records a trace of it (capture/capture.h). Everything that can be checked
 * before the model runs is checked first (options, context length, output
 * folder), so a bad run fails fast and leaves no file behind. */
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "capture/capture_args.h"
#include "prompts/niah.h"
#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"
#include "model/model.h"

static const char *usage =
    "usage: obcache capture --length N --depth D [options] -o TRACE.h5\n"
    "\n"
    "Runs the model on a Needle-in-a-Haystack prompt of N tokens (the model's own\n"
    "tokens, chat template included) with the needle at D percent of the context:\n"
    "one prefill capturing the last R prompt rows, then T greedy decode steps from\n"
    "the full cache, each captured with its logits. The trace holds K/V of every\n"
    "position, Q/O/lse (and A) of the captured rows, the tokens, the prompt, the\n"
    "spans of needle, value and question, the answer and whether it contains the\n"
    "needle's value. It appears under its final name only when complete.\n";

static int parse_depth(void *target, const char *option, const char *value) {
  int rc = obc_parse_double(option, value, target);
  double depth = *(double *)target;
  if (!rc && !(depth >= 0 && depth <= 100))
    rc = obc_fail(OBC_EINVAL, "--depth: %s is outside 0..100 (percent of the context)", value);
  return rc;
}

/* Checks the target length against the model before building the prompt. */
static int check_length(const Model *model, const CaptureArgs *a) {
  size_t context = model->config.context_length;
  if (context && a->niah.length + a->capture.decode > context)
    return obc_fail(OBC_EINVAL, "--length %zu + --decode %zu is beyond %s's context of %zu tokens",
                    a->niah.length, a->capture.decode, model->config.name, context);
  return OBC_OK;
}

/* Tokens of the values the answer must hold (prompt->answers, each encoded
 * alone): an answer of fewer tokens cannot hold them all. */
static size_t value_tokens(const Tokenizer *tokenizer, const NiahPrompt *prompt) {
  size_t n = 0;
  for (size_t j = 0; j < prompt->n_answers; j++) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!tokenizer_encode(tokenizer, prompt->answers[j], strlen(prompt->answers[j]), &ids, &n_ids))
      n += n_ids;
    free(ids);
  }
  return n;
}

static void print_result(const char *path, const Tokenizer *tokenizer, const NiahPrompt *prompt,
                         const CaptureResult *r) {
  const TraceSpan *needle = NULL;
  for (size_t i = 0; i < prompt->n_spans; i++)
    if (!strcmp(prompt->spans[i].name, "needle")) needle = &prompt->spans[i];
  printf("wrote %s: %zu prompt tokens + %zu decoded, needle at tokens [%lld, %lld)\n", path,
         r->n_prompt, r->n_decode, needle ? (long long)needle->begin : -1LL,
         needle ? (long long)needle->end : -1LL);
  printf("answer: \"%s\"\n", r->generated_text);
  size_t value = value_tokens(tokenizer, prompt);
  if (!r->needle_found && r->n_decode < value)
    printf(
        "needle not found (expected %s): the answer (%zu tokens) is too short to hold the "
        "needle's value (%zu tokens; hint: --decode %zu or more)\n",
        prompt->answers[0], r->n_decode, value, value);
  else
    printf("needle %s (expected %s)\n", r->needle_found ? "found" : "not found",
           prompt->answers[0]);
  printf("time: prefill %.2f s, decode %.2f s, write %.2f s\n", r->prefill_seconds,
         r->decode_seconds, r->write_seconds);
  if (r->sums_on_device) printf("column sums: on the device\n");
}

int cmd_capture(int argc, char **argv) {
  CaptureArgs a;
  capture_args_default(&a);
  a.niah.length = 0; /* required: the help shows no default */
  bool length_given = false;
  const ObcOption own[] = {
      OBC_OPT_SIZE("--length", "N", &a.niah.length, "prompt length in tokens (required)",
                   .seen = &length_given),
      OBC_OPT_CUSTOM("--depth", "D", &a.niah.depth, parse_depth,
                     "needle depth, 0 (start) .. 100 (end) percent",
                     .show = obc_option_show_double),
      OBC_OPT_TEXT("--output", "TRACE.h5", &a.out_path, "the trace (required)", .alias = "-o"),
      OBC_OPTION_HEADING(""),
  };
  ObcOption shared[CAPTURE_ARGS_N_OPTIONS];
  capture_args_options(&a, shared);
  const ObcOptionList lists[] = {OBC_OPTION_LIST(own), OBC_OPTION_LIST(shared)};
  ObcArguments args;
  int rc = obc_options_parse("capture", lists, 2, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, lists, 2);
    return 0;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache capture --help)",
                    args.positional[0]);
  if (!a.out_path) return obc_fail(OBC_EINVAL, "missing -o TRACE.h5 (see obcache capture --help)");
  if (!length_given) return obc_fail(OBC_EINVAL, "missing --length N (see obcache capture --help)");
  ObcPendingFile probe;
  rc = obc_pending_init(&probe, a.out_path);
  if (rc) return rc;
  char producer[1024];
  obc_text_command_line(argc, argv, producer, sizeof producer);
  a.capture.producer = producer;
  a.capture.progress = capture_progress_mode_for_stderr();

  Model *model = NULL;
  rc = model_load_with(a.model_path, &(ModelLoadOptions){.weights = a.weights}, &model);
  if (!rc) rc = check_length(model, &a);
  NiahPrompt prompt;
  memset(&prompt, 0, sizeof prompt);
  if (!rc && !model->tokenizer)
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer", model->path);
  if (!rc) rc = niah_build(model->tokenizer, &a.niah, &prompt);
  CaptureResult result;
  if (!rc) rc = capture_run(model, &prompt, &a.capture, a.out_path, &result);
  if (!rc) {
    print_result(a.out_path, model->tokenizer, &prompt, &result);
    char held[256]; /* stdout: stderr stays empty off a terminal */
    model_weights_describe(model, held, sizeof held);
    printf("weights: %s\n", held);
  }
  niah_prompt_free(&prompt);
  model_free(model);
  return rc;
}
