/* The text of one sample of a RULER synthetic task (NVIDIA RULER,
 * scripts/synthetic.yaml and scripts/data/synthetic/), before the chat
 * template and before tokenization: what goes before the context in the
 * user turn (the instruction, few-shot examples), the context, what follows
 * it (the question), the start of the answer, and the strings the answer
 * must contain. A generator is a pure function of (length, seed, size): the size is
 * the number of haystack units the task grows with (noise paragraphs, essay
 * sentences, words), which prompts/ruler_task.c searches so that the prompt
 * fits the target length. */
#ifndef OBC_RULER_TEXT_H
#define OBC_RULER_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "prompts/niah.h"
#include "corpus/niah_haystack.h"

#define RULER_MAX_ANSWERS NIAH_MAX_NEEDLES
#define RULER_MAX_MARKS 64

/* A named byte range of the context (a needle, a chain's assignment), so
 * that prompts/ruler_task.c can record its token span. */
typedef struct {
  char name[32]; /* "needle", "needle_value", "needle_2", ... */
  size_t begin, end;
} RulerMark;

typedef struct {
  char *before;                         /* user text before the context; owned, may be "" */
  char *context;                        /* owned */
  char *after;                          /* user text after the context (starts with "\n"); owned */
  char *answer_prefix;                  /* the answer's start, no leading space; owned, may be "" */
  char answers[RULER_MAX_ANSWERS][128]; /* (n_answers) what string_match_all looks for */
  size_t n_answers;
  RulerMark marks[RULER_MAX_MARKS]; /* (n_marks) byte ranges of context */
  size_t n_marks;
} RulerText;

/* What the generators draw from, loaded once per run: the essay haystack
 * (RULER's Paul Graham essays; here the King James Bible or a text file) and
 * an English word list (RULER's wonderwords lists; here a Debian word list,
 * /usr/share/dict/words of the wamerican package, or a file). */
typedef struct {
  NiahHaystack essay;
  char **words; /* (n_words) lowercase ASCII words, sorted, distinct */
  size_t n_words;
} RulerSources;

/* One task's generator: the sample drawn from seed with `size` haystack
 * units, for a prompt of `length` tokens (RULER's max_seq_length, which some
 * tasks read beyond the haystack size: cwe's repeat counts and few-shot
 * example, fwe's vocabulary size). Fills *out (freed with ruler_text_free)
 * or fails with a message. */
typedef int (*RulerTextFn)(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                           RulerText *out);

void ruler_text_free(RulerText *text);

#endif
