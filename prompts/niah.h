/* Needle-in-a-Haystack prompts, measured in the model's own tokens (RULER's
 * "niah" task). A prompt is the model's chat template around one user turn
 * (an optional instruction, the haystack with the needles inserted at a depth,
 * the question) followed by the start of the assistant's answer.
 *
 * The prompt is built by tokenizing short segments that always meet at a
 * single space followed by a non-space (or right after a newline), where the
 * byte-level BPE pre-tokenizers of GPT-2, SmolLM2 and Llama 3 never merge
 * across; the token ids are the concatenation, so every span is exact.
 * `boundary_consistent` reports whether tokenizing the whole rendered chat at
 * once gives the same ids (it should; the ids used are the concatenation). */
#ifndef OBC_NIAH_H
#define OBC_NIAH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "traces/trace.h"

#define NIAH_MAX_NEEDLES 16

typedef enum { NIAH_VALUE_NUMBER = 0, NIAH_VALUE_UUID } NiahValueKind;

typedef struct {
  size_t length;        /* target prompt length in tokens, template included */
  double depth;         /* 0..100: where the first needle goes (% of the haystack) */
  uint64_t seed;        /* keys and values */
  const char *haystack; /* "noise", "kjv" or a text file path */
  size_t n_needles;     /* 1..NIAH_MAX_NEEDLES */
  bool multi_value;     /* all needles share one key (RULER multi-value); else
                           each has its own key and the question asks the first */
  NiahValueKind value_kind;
  /* A custom needle replaces RULER's: all three are needed together; the
   * answer must occur inside the needle. NULL = RULER's. */
  const char *needle_text;
  const char *question_text;
  const char *answer_text;
  const char *answer_prefix; /* NULL = RULER's for RULER needles, none for custom */
  bool no_chat_template;     /* plain text even when the model has a template */
} NiahOptions;

typedef struct {
  int32_t *tokens; /* (n_tokens) the ids the model reads */
  size_t n_tokens;
  char *text;     /* the prompt decoded back from tokens */
  size_t n_spans; /* "context", "needle", "needle_value", "question",
                     "answer_prefix", "needle_2", "needle_value_2", ... */
  TraceSpan spans[OBC_TRACE_MAX_SPANS];
  size_t n_answers; /* the values the answer must contain (RULER string match) */
  char answers[NIAH_MAX_NEEDLES][128];
  char question[512];
  char haystack_source[256];
  bool boundary_consistent;
} NiahPrompt;

void niah_options_default(NiahOptions *options);
/* Builds the prompt. Fails (one-line message) on a depth outside 0..100, a
 * target length shorter than the needles, question and template together, an
 * answer that is not in the custom needle, or an unreadable haystack. */
int niah_build(const Tokenizer *tokenizer, const NiahOptions *options, NiahPrompt *out);
void niah_prompt_free(NiahPrompt *prompt);

/* RULER's string_match_all (obc_match_needle, the rule replay applies too):
 * 1 when every answer occurs in text, ignoring case; else 0, also when an
 * answer is empty or there is none. */
int niah_answer_found(const NiahPrompt *prompt, const char *text);

#endif
