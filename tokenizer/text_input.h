/* Text into token ids, for the model subcommands (generate, perplexity,
 * logits, tokenize) and the dynamic-eviction experiment: reading a whole text
 * file, parsing a comma-separated list of token ids and encoding plain text
 * (BOS first when the tokenizer asks for it), each failing with a one-line
 * message that names the file or option. */
#ifndef OBC_TOKENIZER_TEXT_INPUT_H
#define OBC_TOKENIZER_TEXT_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/obc_options.h"
#include "tokenizer/tokenizer.h"

/* The default cap on a text file, in bytes: 64 MiB. The longest context of
 * a supported model (128K tokens) is under 1 MiB of text and a perplexity
 * run over a whole book a few MiB, so this is far more than any command
 * uses, yet a wrong path (/dev/zero, a disk image) fails within a second
 * instead of growing until the kernel kills the process. */
#define OBC_TEXT_MAX_BYTES ((size_t)64 << 20)

/* The --max-text-bytes option of every command that reads a text file,
 * stored into *max_bytes (which the command sets to OBC_TEXT_MAX_BYTES). */
ObcOption text_max_bytes_option(size_t *max_bytes);

/* Reads path into a malloc'ed NUL-terminated buffer (*length bytes). Fails
 * (naming path) beyond max_bytes or on a NUL byte: not text (UTF-16?), and
 * the commands would cut the text there. */
int text_read_file(const char *path, size_t max_bytes, char **text, size_t *length);
/* "1,2,3" -> malloc'ed ids (*n of them). */
int text_parse_ids(const char *option, const char *text, int32_t **ids, size_t *n);
/* Encodes text[0, length) without a chat template into malloc'ed ids (*n of
 * them), BOS first when the tokenizer adds one and has a BOS id. */
int text_encode(const Tokenizer *tok, const char *text, size_t length, int32_t **ids, size_t *n);

#endif
