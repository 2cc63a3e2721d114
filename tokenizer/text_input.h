/* Text into token ids, for the model subcommands (generate, perplexity,
 * logits, tokenize) and the dynamic-eviction experiment: reading a whole text
 * file, parsing a comma-separated list of token ids and encoding plain text
 * (BOS first when the tokenizer asks for it), each failing with a one-line
 * message that names the file or option. */
#ifndef OBC_TOKENIZER_TEXT_INPUT_H
#define OBC_TOKENIZER_TEXT_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* Reads path into a malloc'ed NUL-terminated buffer (*length bytes). */
int text_read_file(const char *path, char **text, size_t *length);
/* "1,2,3" -> malloc'ed ids (*n of them). */
int text_parse_ids(const char *option, const char *text, int32_t **ids, size_t *n);
/* Encodes text[0, length) without a chat template into malloc'ed ids (*n of
 * them), BOS first when the tokenizer adds one and has a BOS id. */
int text_encode(const Tokenizer *tok, const char *text, size_t length, int32_t **ids, size_t *n);

#endif
