/* RULER's synthetic tasks as prompts in the model's own tokens: niah_single_1/2/3,
 * niah_multikey_1/2/3, niah_multivalue, niah_multiquery, vt, cwe and fwe, with
 * RULER's templates, variables and answer prefixes (docs/SCIENCE.md, "Task
 * accuracy"). A sample is a pure function of (task, length, seed): the text
 * comes from the task's generator (prompts/ruler_text.h), the haystack size
 * is fitted so that the prompt plus RULER's tokens_to_generate fit in
 * `length` tokens (the largest such size; fwe: RULER's steps, below), and the
 * user turn sits in the model's chat template with the answer prefix opening
 * the assistant's turn. The result is a NiahPrompt
 * (spans "context", "question", "answer_prefix" and the task's marks), so
 * capture_run records it like any NIAH prompt. */
#ifndef OBC_RULER_TASK_H
#define OBC_RULER_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prompts/niah.h"
#include "prompts/ruler_text.h"
#include "tokenizer/tokenizer.h"

typedef struct {
  const char *name;          /* "niah_single_1", "vt", ... */
  const char *ruler_task;    /* RULER's generator: "niah", "variable_tracking", ... */
  size_t tokens_to_generate; /* RULER's (niah 128, vt 30, cwe 120, fwe 50) */
  const char *haystack;      /* RULER's type_haystack: "noise", "essay", "needle"; NULL none */
  size_t min_size;           /* the smallest haystack the generator takes; 0 = 1 */
  /* RULER's fit in steps (freq_words_extraction.py): from budget / 6 units,
   * grow by budget / 32 while the run's sample has fewer than budget tokens
   * and step back once; then step down while this sample has more (budget:
   * length - tokens_to_generate). Else the largest size that fits. */
  bool fit_in_steps;
  RulerTextFn generate;
} RulerTask;

/* The tasks, in RULER's order. */
size_t ruler_task_count(void);
const RulerTask *ruler_task_at(size_t i);
/* NULL when name is not a task. */
const RulerTask *ruler_task_find(const char *name);

typedef struct {
  const char *essay;     /* haystack of RULER's "essay" tasks: "kjv" (default) or a file */
  const char *words;     /* word list file; NULL = /usr/share/dict/words */
  bool no_chat_template; /* plain text even when the model has a template */
  /* After a chat template the answer prefix is tokenized without its leading
   * space (kvpress's RULER data), or with it (answer_space: RULER's
   * model_template + " The special..."). Without a template the base
   * template's space is always there. */
  bool answer_space;
  /* The run's seed, on whose sample a task fitted in steps (fwe) grows its
   * size once (RULER fits once per run); has_run_seed false: the sample's
   * own seed. */
  uint64_t run_seed;
  bool has_run_seed;
} RulerOptions;

void ruler_options_default(RulerOptions *options);
/* Loads what the generators draw from; fails naming a missing or unreadable
 * word list (hint: apt-get install wamerican) or haystack. */
int ruler_sources_open(const RulerOptions *options, RulerSources *out);
void ruler_sources_close(RulerSources *sources);

/* Sample `seed` of the task at `length` tokens into *out (niah_prompt_free).
 * Fails (one line) when even the smallest haystack does not fit. */
int ruler_task_build(const Tokenizer *tokenizer, const RulerSources *sources,
                     const RulerOptions *options, const RulerTask *task, size_t length,
                     uint64_t seed, NiahPrompt *out);

/* A sample with what the search found: the prompt, the haystack size, the
 * tokens the next size would take (size + 1, more than length -
 * tokens_to_generate; fitted in steps: size + one step, which this sample
 * may fit), and the user turn and answer prefix as text. */
typedef struct {
  NiahPrompt prompt;
  size_t size;         /* haystack units */
  size_t next_tokens;  /* tokens of the prompt at the next size */
  char *user;          /* before + context + after; owned */
  char *answer_prefix; /* owned */
} RulerSample;

/* ruler_task_build with the search's result (ruler_sample_free). */
int ruler_sample_build(const Tokenizer *tokenizer, const RulerSources *sources,
                       const RulerOptions *options, const RulerTask *task, size_t length,
                       uint64_t seed, RulerSample *out);
void ruler_sample_free(RulerSample *sample);

struct cJSON;
/* The sample as one JSON object (task, length, seed, size, tokens,
 * next_tokens, ids, text, user, answer_prefix, answers, spans,
 * boundary_consistent), for a line of prompts.jsonl or tests/ruler_dump.c;
 * *out is the caller's (cJSON_Delete). */
int ruler_prompt_json(const RulerTask *task, size_t length, uint64_t seed,
                      const RulerSample *sample, struct cJSON **out);

#endif
