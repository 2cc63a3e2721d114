/* Greedy generation on top of the runtime: prefill a prompt, then decode one
 * token at a time (argmax, lowest id on ties) until a stop token of the
 * tokenizer or the max-new limit, with timings for the tokens/s report; the
 * text of a generated answer; and the NLL of a token under its logits. */
#ifndef OBC_GENERATE_H
#define OBC_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

typedef struct {
  size_t max_new;               /* most tokens to generate */
  const Tokenizer *stop_tokens; /* tokenizer_is_stop() ends generation; NULL = never */
  /* Called with each generated token as it is produced (may be NULL); a
   * negative return stops with that code. */
  int (*on_token)(void *user, int32_t token);
  void *user;
} GenerateOptions;

typedef struct {
  size_t prompt_tokens;
  size_t new_tokens; /* generated, the stop token included when hit */
  int stopped;       /* 1 when a stop token ended generation */
  double prefill_seconds;
  double decode_seconds; /* over new_tokens - 1 decode steps */
} GenerateStats;

/* Index of the largest value (the first one on ties). */
size_t generate_argmax(const float *logits /* (count) */, size_t count);

/* -log softmax(logits)[target]: the negative log-likelihood of token target
 * under logits (vocab), computed stably in double. */
double generate_token_nll(const float *logits /* (vocab) */, size_t vocab, int32_t target);

/* Runs prompt (n_prompt tokens) from the runtime's current position and
 * generates up to options->max_new tokens into out (max_new), *n_out of them. */
int generate_greedy(Runtime *runtime, const int32_t *prompt /* (n_prompt) */, size_t n_prompt,
                    const GenerateOptions *options, int32_t *out /* (max_new) */, size_t *n_out,
                    GenerateStats *stats);

/* The generated answer as text: tokens (n) up to the first stop token, decoded
 * into out (size bytes, truncated to fit). "" when tokenizer is NULL. */
int generate_answer_text(const Tokenizer *tokenizer, const int32_t *tokens /* (n) */, size_t n,
                         char *out, size_t size);

#endif
