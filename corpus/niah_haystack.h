/* Haystacks for Needle-in-a-Haystack prompts: an endless stream of sentences
 * that the builder fills the context with. Three sources: RULER's repeated
 * noise sentences, natural prose from a UTF-8 text file, and the King James
 * Bible (public domain) read through the `bible` program of Debian's
 * bible-kjv package. Whitespace is collapsed to single spaces, so that every
 * sentence joins its neighbour with exactly one space. */
#ifndef OBC_NIAH_HAYSTACK_H
#define OBC_NIAH_HAYSTACK_H

#include <stddef.h>

typedef struct {
  char source[4096];      /* "noise", "kjv" or the file path */
  char *text;             /* owned; sentences separated by NUL bytes */
  const char **sentences; /* (n_sentences) pointers into text */
  size_t *lengths;        /* (n_sentences) bytes of each sentence */
  size_t n_sentences;     /* >= 1 once loaded */
} NiahHaystack;

/* RULER's noise paragraph, whose sentences the "noise" haystack repeats. */
extern const char niah_haystack_noise_text[];

/* spec: "noise", "kjv", or the path of a text file. */
int niah_haystack_open(const char *spec, NiahHaystack *out);
void niah_haystack_close(NiahHaystack *haystack);

/* Sentence i of the endless stream (the source repeats when exhausted). */
const char *niah_haystack_sentence(const NiahHaystack *haystack, size_t i, size_t *length);

/* Splits normalised prose into sentences in place (exposed for tests):
 * collapses whitespace and drops words for which drop_word returns nonzero
 * (may be NULL). Returns OBC_EFORMAT naming source when no sentence is found. */
int niah_haystack_from_text(char *text, const char *source, int (*drop_word)(const char *, size_t),
                            NiahHaystack *out);

#endif
