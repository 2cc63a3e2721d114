/* `obcache generate`: greedy generation from a prompt (optionally wrapped in
 * the model's chat template). Prints the answer as it is produced on stdout
 * and the prompt size and prefill/decode speeds on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "tokenizer/text_input.h"
#include "runtime/generate.h"
#include "model/model.h"
#include "runtime/runtime.h"

static const char *usage =
    "usage: obcache generate [--model PATH] (--prompt TEXT | --prompt-file FILE)\n"
    "                        [--chat] [--system TEXT] [--max-new N] [--context N]\n"
    "                        [--threads N] [--device cpu|cuda|cuda-bf16]\n"
    "                        [--weights native|f32]\n"
    "\n"
    "Greedy generation (argmax, no sampling) until a stop token or --max-new tokens\n"
    "(answer tokens: the prefill's token is the first, then N - 1 decode steps).\n"
    "--chat wraps the prompt in the model's chat template (with --system as the\n"
    "system message). --model takes a GGUF file or a Hugging Face folder. --context\n"
    "is the KV cache size in tokens; a prompt that does not fit is an error. Prints\n"
    "the answer on stdout; prompt tokens, prefill and decode tokens/s on stderr.\n"
    "--device picks the runtime backend (cuda-bf16: bf16 weights on the GPU).\n";

typedef struct {
  const char *model;
  ModelWeightsMode weights;
  const char *prompt;
  const char *prompt_file;
  const char *system;
  bool chat;
  size_t max_new;
  size_t context;
  size_t threads;
  const char *device;
  size_t max_text_bytes;
} GenerateArgs;

static int parse_args(int argc, char **argv, GenerateArgs *a, bool *help) {
  a->max_new = 128;
  a->max_text_bytes = OBC_TEXT_MAX_BYTES;
  const ObcOption options[] = {
      OBC_OPT_TEXT("--model", "PATH", &a->model, "GGUF file or Hugging Face folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_TEXT("--prompt", "TEXT", &a->prompt, "the prompt"),
      OBC_OPT_TEXT("--prompt-file", "FILE", &a->prompt_file, "read the prompt from FILE"),
      OBC_OPT_FLAG("--chat", &a->chat, "wrap the prompt in the model's chat template"),
      OBC_OPT_TEXT("--system", "TEXT", &a->system, "the system message (needs --chat)"),
      OBC_OPT_SIZE("--max-new-tokens", "N", &a->max_new,
                   "most answer tokens to generate, the prefill's token included (transformers' "
                   "max_new_tokens): N - 1 decode steps"),
      OBC_OPT_SIZE("--max-new", "N", &a->max_new, NULL, .renamed = "--max-new-tokens"),
      OBC_OPT_SIZE(
          "--context", "N", &a->context, "KV cache size in tokens",
          .default_text = "min(model context, " OBC_OPTION_SPELLED(RUNTIME_DEFAULT_CONTEXT) ")"),
      OBC_OPT_SIZE("--threads", "N", &a->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&a->device),
      text_max_bytes_option(&a->max_text_bytes),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("generate", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (see obcache generate --help)",
                    args.positional[0]);
  if (a->max_new == 0) return obc_fail(OBC_EINVAL, "--max-new: expected at least 1 token");
  if (!a->prompt == !a->prompt_file)
    return obc_fail(OBC_EINVAL,
                    "give exactly one of --prompt and --prompt-file (see obcache generate --help)");
  if (a->system && !a->chat)
    return obc_fail(OBC_EINVAL,
                    "--system needs --chat (the system message is part of the template)");
  return OBC_OK;
}

static int encode_prompt(const Tokenizer *tok, const GenerateArgs *a, const char *text,
                         int32_t **ids, size_t *n) {
  if (a->chat) return tokenizer_encode_chat(tok, a->system, text, ids, n);
  return text_encode(tok, text, strlen(text), ids, n);
}

static int print_token(void *user, int32_t token) {
  const Tokenizer *tok = user;
  char *text = NULL;
  int rc = tokenizer_decode(tok, &token, 1, &text);
  if (rc) return rc;
  fputs(text, stdout);
  fflush(stdout);
  free(text);
  return 0;
}

int cmd_generate(int argc, char **argv) {
  GenerateArgs args = {0};
  bool help = false;
  int rc = parse_args(argc, argv, &args, &help);
  if (rc || help) return rc;
  char *file_text = NULL;
  size_t file_length = 0;
  if (args.prompt_file &&
      (rc = text_read_file(args.prompt_file, args.max_text_bytes, &file_text, &file_length)))
    return rc;
  Model *model = NULL;
  Runtime *rt = NULL;
  int32_t *prompt = NULL, *answer = NULL;
  size_t n_prompt = 0, n_answer = 0;
  if ((rc = model_load_with(args.model, &(ModelLoadOptions){.weights = args.weights}, &model)))
    goto done;
  if (!model->tokenizer) {
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer to encode the prompt", model->path);
    goto done;
  }
  rc = encode_prompt(model->tokenizer, &args, args.prompt ? args.prompt : file_text, &prompt,
                     &n_prompt);
  if (rc) goto done;
  if (n_prompt == 0) {
    rc = obc_fail(OBC_EINVAL, "the prompt encodes to no tokens");
    goto done;
  }
  RuntimeOptions options = {
      .max_context = args.context, .threads = args.threads, .backend = args.device};
  if ((rc = runtime_create(model, &options, &rt))) goto done;
  answer = obc_malloc((args.max_new ? args.max_new : 1) * sizeof(int32_t), "answer tokens");
  if (!answer) {
    rc = OBC_ENOMEM;
    goto done;
  }
  GenerateOptions gen = {.max_new = args.max_new,
                         .stop_tokens = model->tokenizer,
                         .on_token = print_token,
                         .user = model->tokenizer};
  GenerateStats stats;
  rc = generate_greedy(rt, prompt, n_prompt, &gen, answer, &n_answer, &stats);
  if (rc) goto done;
  fputc('\n', stdout);
  fflush(stdout);
  size_t decode_steps = stats.new_tokens > 0 ? stats.new_tokens - 1 : 0;
  char held[256];
  model_weights_describe(model, held, sizeof held);
  fprintf(stderr, "weights: %s\n", held);
  fprintf(
      stderr,
      "prompt: %zu tokens, prefill %.1f tokens/s (%.2f s); generated %zu tokens%s, "
      "decode %.1f tokens/s\n",
      stats.prompt_tokens, (double)stats.prompt_tokens / stats.prefill_seconds,
      stats.prefill_seconds, stats.new_tokens, stats.stopped ? " (stop token)" : "",
      decode_steps && stats.decode_seconds > 0 ? (double)decode_steps / stats.decode_seconds : 0.0);
done:
  free(answer);
  free(prompt);
  free(file_text);
  runtime_free(rt);
  model_free(model);
  return rc;
}
