/* RULER's variable tracking (variable_tracking.py, noise haystack): one
 * chain "VAR A = 12345", "VAR B = VAR A ", ... of five variables inserted, in
 * order, between copies of RULER's noise paragraph, preceded by a one-chain
 * ICL example with its answer. The question asks for every variable that is
 * assigned the value. */
#include <stdio.h>
#include <string.h>

#include "prompts/ruler_words.h"
#include "common/obc_error.h"

#define VT_NOISE \
  "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
#define VT_HEAD \
  "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
#define VT_QUESTION \
  "\nQuestion: Find all variables that are assigned the value %s in the text above."
#define VT_ANSWER_PREFIX                                                            \
  "Answer: According to the chain(s) of variable assignment in the text above, %d " \
  "variables are assigned the value %s, they are: "

typedef struct {
  char names[RULER_VT_VARIABLES][RULER_VT_NAME_LETTERS + 1]; /* in chain order */
  char value[8];
  size_t positions[RULER_VT_VARIABLES]; /* ascending: assignment j goes before noise positions[j] */
} VtChain;

/* RULER's generate_chains and the noise branch of generate_input_output:
 * distinct names of `letters` uppercase letters, a value in
 * RULER_VT_VALUE_MIN..RULER_VT_VALUE_END - 1, and random.sample'd sorted
 * insertion points among n_noises paragraphs. */
static void vt_draw_chain(NiahRandom *random, size_t letters, size_t n_noises, VtChain *chain) {
  for (size_t j = 0; j < RULER_VT_VARIABLES; j++) {
    int repeated;
    do {
      for (size_t c = 0; c < letters; c++)
        chain->names[j][c] = (char)('A' + niah_random_below(random, 26));
      chain->names[j][letters] = '\0';
      repeated = 0;
      for (size_t i = 0; i < j; i++) repeated |= !strcmp(chain->names[i], chain->names[j]);
    } while (repeated);
  }
  snprintf(chain->value, sizeof chain->value, "%zu",
           RULER_VT_VALUE_MIN + niah_random_below(random, RULER_VT_VALUE_END - RULER_VT_VALUE_MIN));
  for (size_t j = 0; j < RULER_VT_VARIABLES; j++) {
    int repeated;
    do {
      chain->positions[j] = niah_random_below(random, n_noises);
      repeated = 0;
      for (size_t i = 0; i < j; i++) repeated |= chain->positions[i] == chain->positions[j];
    } while (repeated);
  }
  for (size_t j = 1; j < RULER_VT_VARIABLES; j++) /* insertion sort */
    for (size_t i = j; i > 0 && chain->positions[i - 1] > chain->positions[i]; i--) {
      size_t t = chain->positions[i];
      chain->positions[i] = chain->positions[i - 1];
      chain->positions[i - 1] = t;
    }
}

/* The noise paragraphs and the chain, one per line. RULER then replaces
 * ". \n" by ".\n", which never occurs here (only a hop ends with a space,
 * after a letter). With marks, records each assignment's byte range. */
static void vt_write_context(FILE *f, const VtChain *chain, size_t n_noises, RulerText *marks) {
  size_t j = 0;
  for (size_t i = 0; i < n_noises; i++) {
    for (; j < RULER_VT_VARIABLES && chain->positions[j] == i; j++) {
      long begin = ftell(f);
      if (j == 0)
        fprintf(f, "VAR %s = %s", chain->names[0], chain->value);
      else
        fprintf(f, "VAR %s = VAR %s", chain->names[j], chain->names[j - 1]);
      if (marks) {
        RulerMark *m = &marks->marks[marks->n_marks++];
        snprintf(m->name, sizeof m->name, "chain_%zu", j + 1);
        m->begin = (size_t)begin;
        m->end = (size_t)ftell(f);
      }
      fputs(j == 0 ? "\n" : " \n", f);
    }
    fputs(VT_NOISE, f);
    if (i + 1 < n_noises) fputc('\n', f);
  }
}

int ruler_vt_text(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                  RulerText *out) {
  (void)sources;
  (void)length;
  memset(out, 0, sizeof *out);
  if (size < RULER_VT_VARIABLES)
    return obc_fail(OBC_EINVAL, "vt: %zu noise paragraphs, at least %d needed (one per variable)",
                    size, RULER_VT_VARIABLES);
  NiahRandom random;
  ruler_words_seed(&random, "vt", seed);
  VtChain chain, icl;
  vt_draw_chain(&random, RULER_VT_NAME_LETTERS, size, &chain);
  vt_draw_chain(&random, RULER_VT_ICL_NAME_LETTERS, RULER_VT_ICL_NOISES, &icl);

  RulerWordsText before, context;
  int rc = ruler_words_text_open(&before);
  if (!rc) {
    /* RULER's ICL example: the task template and answer prefix around its
     * own chain, its answer, "\n", then "\n" before the task's template. */
    fputs(VT_HEAD, before.stream);
    vt_write_context(before.stream, &icl, RULER_VT_ICL_NOISES, NULL);
    fprintf(before.stream, VT_QUESTION " " VT_ANSWER_PREFIX, icl.value, RULER_VT_VARIABLES,
            icl.value);
    for (size_t j = 0; j < RULER_VT_VARIABLES; j++) fprintf(before.stream, " %s", icl.names[j]);
    fputs("\n\n" VT_HEAD, before.stream);
    rc = ruler_words_text_close(&before, &out->before);
  }
  if (!rc) rc = ruler_words_text_open(&context);
  if (!rc) {
    vt_write_context(context.stream, &chain, size, out);
    rc = ruler_words_text_close(&context, &out->context);
  }
  if (!rc) rc = ruler_words_format(&out->after, VT_QUESTION, chain.value);
  if (!rc)
    rc = ruler_words_format(&out->answer_prefix, VT_ANSWER_PREFIX, RULER_VT_VARIABLES, chain.value);
  for (size_t j = 0; !rc && j < RULER_VT_VARIABLES; j++)
    snprintf(out->answers[out->n_answers++], sizeof out->answers[0], "%s", chain.names[j]);
  if (rc) ruler_text_free(out);
  return rc;
}
