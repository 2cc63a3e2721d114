/* The task text of a Needle-in-a-Haystack prompt, before any tokenization:
 * the needles (RULER's "One of the special magic numbers for KEY is: VALUE."
 * with seeded keys and values, or one custom needle), the instruction that
 * opens the user turn, the question and the start of the answer. Each needle
 * is kept in three parts around its value so the builder can tokenize the
 * value on its own and record its exact span. */
#ifndef OBC_NIAH_TASK_H
#define OBC_NIAH_TASK_H

#include <stdbool.h>
#include <stddef.h>

#include "prompts/niah.h"

typedef struct {
  char key[64];
  char before[1024]; /* "One of the special magic numbers for KEY is:" */
  char value[128];   /* "1234567" */
  char after[1024];  /* "." */
  bool value_spaced; /* a space separates before and value */
} NiahNeedle;

typedef struct {
  NiahNeedle needles[NIAH_MAX_NEEDLES]; /* (n_needles) */
  size_t n_needles;
  char instruction[256]; /* ends with "\n", or empty (custom needle) */
  char question[512];
  char answer_prefix[512]; /* may be empty */
} NiahTask;

/* RULER's task from the seed, or the custom needle of the options (which
 * must then give --needle, --question and --answer, the answer inside the
 * needle). */
int niah_task_make(const NiahOptions *options, NiahTask *task);

#endif
