/* `obcache generate`: greedy generation from a prompt (optionally wrapped in
 * the model's chat template). Prints the answer as it is produced on stdout
 * and the prompt size and prefill/decode speeds on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "tokenizer/text_input.h"
#include "runtime/generate.h"
#include "model/model.h"
#include "runtime/runtime.h"

static const char *usage =
    "usage: obcache generate [--model PATH] (--prompt TEXT | --prompt-file FILE)\n"
    "                        [--chat] [--system TEXT] [--max-new N] [--context N]\n"
    "                        [--threads N] [--device cpu|cuda|cuda-bf16]\n"
    "\n"
    "Greedy generation (argmax, no sampling) until a stop token or --max-new tokens\n"
    "(default 128). --chat wraps the prompt in the model's chat template (with\n"
    "--system as the system message). --model takes a GGUF file or a Hugging Face\n"
    "folder (default: the embedded SmolLM2-135M-Instruct). --context is the KV\n"
    "cache size in tokens (default min(model context, 4096)); a prompt that does\n"
    "not fit is an error. Prints the answer on stdout; prompt tokens, prefill and\n"
    "decode tokens/s on stderr. --device picks the runtime backend (default cpu;\n"
    "cuda-bf16: bf16 weights on the GPU).\n";

typedef struct {
  const char *model;
  const char *prompt;
  const char *prompt_file;
  const char *system;
  int chat;
  size_t max_new;
  size_t context;
  size_t threads;
  const char *device;
} GenerateArgs;

static int parse_args(int argc, char **argv, GenerateArgs *a) {
  a->max_new = 128;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = 0;
    if (!strcmp(arg, "--chat")) {
      a->chat = 1;
      continue;
    }
    if (strncmp(arg, "--", 2))
      return obc_fail(OBC_EINVAL, "unexpected argument '%s' (see obcache generate --help)", arg);
    if (!next)
      return obc_fail(OBC_EINVAL, "option '%s' needs a value (see obcache generate --help)", arg);
    if (!strcmp(arg, "--model"))
      a->model = next;
    else if (!strcmp(arg, "--prompt"))
      a->prompt = next;
    else if (!strcmp(arg, "--prompt-file"))
      a->prompt_file = next;
    else if (!strcmp(arg, "--system"))
      a->system = next;
    else if (!strcmp(arg, "--max-new"))
      rc = obc_parse_size(arg, next, &a->max_new);
    else if (!strcmp(arg, "--context"))
      rc = obc_parse_size(arg, next, &a->context);
    else if (!strcmp(arg, "--threads"))
      rc = obc_parse_size(arg, next, &a->threads);
    else if (!strcmp(arg, "--device"))
      a->device = next;
    else
      return obc_fail(OBC_EINVAL, "unknown option '%s' (see obcache generate --help)", arg);
    if (rc < 0) return rc;
    i++;
  }
  if (a->max_new == 0) return obc_fail(OBC_EINVAL, "--max-new: expected at least 1 token");
  if (!a->prompt == !a->prompt_file)
    return obc_fail(OBC_EINVAL,
                    "give exactly one of --prompt and --prompt-file (see obcache generate --help)");
  if (a->system && !a->chat)
    return obc_fail(OBC_EINVAL,
                    "--system needs --chat (the system message is part of the template)");
  return 0;
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
  if (rc < 0) return rc;
  fputs(text, stdout);
  fflush(stdout);
  free(text);
  return 0;
}

int cmd_generate(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return 0;
    }
  GenerateArgs args = {0};
  int rc = parse_args(argc, argv, &args);
  if (rc < 0) return rc;
  char *file_text = NULL;
  size_t file_length = 0;
  if (args.prompt_file && (rc = text_read_file(args.prompt_file, &file_text, &file_length)) < 0)
    return rc;
  Model *model = NULL;
  Runtime *rt = NULL;
  int32_t *prompt = NULL, *answer = NULL;
  size_t n_prompt = 0, n_answer = 0;
  if ((rc = model_load(args.model, &model)) < 0) goto done;
  if (!model->tokenizer) {
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer to encode the prompt", model->path);
    goto done;
  }
  rc = encode_prompt(model->tokenizer, &args, args.prompt ? args.prompt : file_text, &prompt,
                     &n_prompt);
  if (rc < 0) goto done;
  if (n_prompt == 0) {
    rc = obc_fail(OBC_EINVAL, "the prompt encodes to no tokens");
    goto done;
  }
  RuntimeOptions options = {
      .max_context = args.context, .threads = args.threads, .backend = args.device};
  if ((rc = runtime_create(model, &options, &rt)) < 0) goto done;
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
  if (rc < 0) goto done;
  fputc('\n', stdout);
  fflush(stdout);
  size_t decode_steps = stats.new_tokens > 0 ? stats.new_tokens - 1 : 0;
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
