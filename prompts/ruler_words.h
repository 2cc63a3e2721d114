/* RULER's tracing and aggregation tasks as text generators (RulerTextFn,
 * prompts/ruler_text.h): vt (variable tracking), cwe (common words
 * extraction) and fwe (frequent words extraction), with RULER's templates,
 * parameters (scripts/synthetic.yaml) and answer prefixes (docs/SCIENCE.md,
 * "RULER's vt, cwe and fwe").
 *
 * Every random choice of a sample comes from one NiahRandom stream seeded by
 * ruler_words_seed: FNV-1a 64 (common/obc_hash.h) over the task's name
 * ("vt", "cwe", "fwe") followed by the seed's 8 bytes, least significant
 * first. The draws, in order:
 *   vt:  the five 5-letter names (a name equal to an earlier one is drawn
 *        again), the value, the five insertion points (an equal point is
 *        drawn again), then the ICL example's noise layout, names (3 letters)
 *        and value the same way;
 *   cwe: the few-shot example's words (without replacement) and their order,
 *        then the task's words and their order;
 *   fwe: the vocabulary (a code equal to an earlier one is drawn again), then
 *        the order of the words.
 *
 * Tokenizing the pieces: fwe's `before` ends with a space that RULER's
 * template puts between "...coded words." and the context on one line; for
 * byte-level BPE that space belongs to the context's first word (" abcdef"),
 * so it must be tokenized with the context piece, not with `before`. vt's
 * answer prefix ends with a space (RULER's "they are: "). */
#ifndef OBC_RULER_WORDS_H
#define OBC_RULER_WORDS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "prompts/niah_random.h"
#include "prompts/ruler_text.h"

/* vt (synthetic.yaml: noise haystack, num_chains 1, num_hops 4). */
#define RULER_VT_HOPS 4
#define RULER_VT_VARIABLES (RULER_VT_HOPS + 1)
#define RULER_VT_NAME_LETTERS 5     /* the task's names; the ICL example's have 3 */
#define RULER_VT_ICL_NAME_LETTERS 3 /* generate_chains(is_icl=True) */
#define RULER_VT_VALUE_MIN 10000    /* np.random.randint(10000, 99999): 10000..99998 */
#define RULER_VT_VALUE_END 99999
/* The ICL example's noise paragraphs. RULER searches, with the model's
 * tokenizer, the most for which the example (template, chain, answer
 * prefix) stays within its max_seq_length of 500 tokens; obcache fixes the
 * count so the text needs no tokenizer. With SmolLM2's tokenizer
 * (`obcache tokenize`) 14 paragraphs give 483 tokens, 15 give 508. */
#define RULER_VT_ICL_NOISES 14

/* cwe (synthetic.yaml: freq_cw 30, freq_ucw 3, num_cw 10; num_fewshot 1).
 * Below RULER_CWE_SHORT_LENGTH tokens RULER repeats the task's words (6, 1)
 * times with a 20-word (3, 1) few-shot example, from it on (30, 3) with a
 * 40-word (10, 3) example. */
#define RULER_CWE_COMMON 10
#define RULER_CWE_SHORT_LENGTH 4096

/* fwe (synthetic.yaml: alpha 2.0; coded_wordlen 6, vocab_size -1). RULER's
 * vocabulary has (max_seq_length - tokens_to_generate) // 50 codes. */
#define RULER_FWE_CODE_LETTERS 6
#define RULER_FWE_TOKENS_TO_GENERATE 50
#define RULER_FWE_TOKENS_PER_CODE 50
/* The fewest words for which the answer of rank 4 occurs: int(n 4^-2 /
 * zeta(2)) >= 1 from n = 27. */
#define RULER_FWE_MIN_WORDS 27
#define RULER_FWE_ANSWERS 3
/* At most this many codes (lengths to 50M tokens), far below the 26^6 there are. */
#define RULER_FWE_MAX_CODES 1000000

/* ---- shared by the three generators ---- */

/* The stream of a sample of `task` (see above). */
void ruler_words_seed(NiahRandom *random, const char *task, uint64_t seed);

/* A text written with stdio (open_memstream), taken as an owned string. */
typedef struct {
  FILE *stream;
  char *data;
  size_t size;
} RulerWordsText;

int ruler_words_text_open(RulerWordsText *text);
/* Closes the stream and hands its text to *out; fails (out of memory) when a
 * write did. */
int ruler_words_text_close(RulerWordsText *text, char **out);
/* *out = the formatted string (owned). */
int ruler_words_format(char **out, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---- the generators ---- */

/* `size` noise paragraphs with one 5-variable chain inserted; answers are the
 * chain's names in order, marks "chain_1".."chain_5" its assignments (without
 * the trailing space of a hop). Fails when size < 5. */
int ruler_vt_text(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                  RulerText *out);
/* A numbered list of `size` distinct words of sources->words, the first 10
 * drawn repeated more often than the rest; answers are those 10. Fails when
 * size < 10 or size exceeds the word list. */
int ruler_cwe_text(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                   RulerText *out);
/* RULER's zeta-distributed coded text of `size` nominal words; answers are
 * the codes of ranks 2, 3 and 4 (rank 1 is the "..." noise). Fails when
 * `length` gives fewer than 4 codes or more than RULER_FWE_MAX_CODES, or
 * `size` is too small for rank 4 to occur. */
int ruler_fwe_text(const RulerSources *sources, size_t length, uint64_t seed, size_t size,
                   RulerText *out);

#endif
