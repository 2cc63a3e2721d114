/* Greedy decoding: one prefill call for the prompt (LAST logits), then one
 * forward call per generated token; stops at a stop token or max_new. */
#include "runtime/generate.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_time.h"

size_t generate_argmax(const float *logits, size_t count) {
  size_t best = 0;
  for (size_t i = 1; i < count; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double generate_token_nll(const float *logits, size_t vocab, int32_t target) {
  float max = logits[0];
  for (size_t i = 1; i < vocab; i++) max = logits[i] > max ? logits[i] : max;
  double sum = 0.0;
  for (size_t i = 0; i < vocab; i++) sum += exp((double)logits[i] - max);
  return log(sum) + max - logits[target];
}

int generate_greedy(Runtime *rt, const int32_t *prompt, size_t n_prompt,
                    const GenerateOptions *options, int32_t *out, size_t *n_out,
                    GenerateStats *stats) {
  assert(rt && prompt && options && out && n_out && stats);
  memset(stats, 0, sizeof(*stats));
  *n_out = 0;
  size_t vocab = runtime_model(rt)->config.vocab_size;
  stats->prompt_tokens = n_prompt;
  if (options->max_new == 0) return OBC_OK;
  size_t room = runtime_max_context(rt) - runtime_position(rt);
  if (n_prompt > room)
    return obc_fail(OBC_EINVAL,
                    "generate: the prompt has %zu tokens but the context holds %zu (hint: "
                    "raise --context or shorten the prompt)",
                    n_prompt, room);
  float *logits = obc_malloc(vocab * sizeof(float), "logits");
  if (!logits) return OBC_ENOMEM;

  double start = obc_now_seconds();
  int rc = runtime_forward(rt, prompt, n_prompt, RUNTIME_LOGITS_LAST, logits, NULL);
  stats->prefill_seconds = obc_now_seconds() - start;
  start = obc_now_seconds();
  while (!rc) {
    int32_t token = (int32_t)generate_argmax(logits, vocab);
    out[(*n_out)++] = token;
    if (options->stop_tokens && tokenizer_is_stop(options->stop_tokens, token)) {
      stats->stopped = 1;
      break;
    }
    if (options->on_token && (rc = options->on_token(options->user, token)) < 0) break;
    if (*n_out == options->max_new || runtime_position(rt) == runtime_max_context(rt)) break;
    rc = runtime_forward(rt, &token, 1, RUNTIME_LOGITS_LAST, logits, NULL);
  }
  stats->decode_seconds = obc_now_seconds() - start;
  stats->new_tokens = *n_out;
  free(logits);
  return rc;
}

int generate_answer_text(const Tokenizer *tokenizer, const int32_t *tokens, size_t n, char *out,
                         size_t size) {
  out[0] = '\0';
  if (!tokenizer) return OBC_OK;
  size_t keep = 0;
  while (keep < n && !tokenizer_is_stop(tokenizer, tokens[keep])) keep++;
  char *text = NULL;
  int rc = tokenizer_decode(tokenizer, tokens, keep, &text);
  if (rc) return rc;
  snprintf(out, size, "%s", text);
  free(text);
  return OBC_OK;
}
