/* Byte-level BPE tokenizer (GPT-2 style, as used by SmolLM2, Llama 3 and
 * Qwen2), built from a GGUF file's tokenizer.ggml.* metadata or from a Hugging
 * Face tokenizer.json; plus the chat templates those models use.
 *
 * Encoding: special/added tokens are split out first (exact string match,
 * longest first), then each remaining piece is pre-tokenized with the model's
 * regex (PCRE2, UTF mode), mapped to byte-level symbols and merged by rank. */
#ifndef OBC_TOKENIZER_H
#define OBC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct Tokenizer Tokenizer;
typedef struct GgufFile GgufFile;

typedef enum {
  OBC_CHAT_NONE = 0, /* no template: plain text */
  OBC_CHAT_CHATML,   /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen2) */
  OBC_CHAT_LLAMA3    /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
} TokenizerChatTemplate;

int tokenizer_from_gguf(const GgufFile *file, const char *path, Tokenizer **out);
/* folder holds tokenizer.json (and tokenizer_config.json, optional). */
int tokenizer_from_hf(const char *folder, Tokenizer **out);
void tokenizer_free(Tokenizer *tokenizer);

size_t tokenizer_vocab_size(const Tokenizer *tokenizer);
/* Encodes text (no BOS added). *ids is malloc'ed; free() it. */
int tokenizer_encode(const Tokenizer *tokenizer, const char *text, size_t length, int32_t **ids,
                     size_t *n_ids);
/* Decodes ids to UTF-8 (bytes exactly as the model produced them); malloc'ed. */
int tokenizer_decode(const Tokenizer *tokenizer, const int32_t *ids, size_t n_ids, char **text);
/* The text of one token (after byte-level decoding), NUL-terminated in buf. */
int tokenizer_token_text(const Tokenizer *tokenizer, int32_t id, char *buf, size_t size);
/* -1 when the string is not a single token. */
int32_t tokenizer_token_id(const Tokenizer *tokenizer, const char *token);

int32_t tokenizer_bos_id(const Tokenizer *tokenizer); /* -1 when none */
int32_t tokenizer_eos_id(const Tokenizer *tokenizer);
/* True for the tokens that end a generation (eos, <|im_end|>, <|eot_id|>, ...). */
int tokenizer_is_stop(const Tokenizer *tokenizer, int32_t id);
/* True for control and user-defined (added) tokens, which encoding splits out
 * of the text whole and decoding writes as their text. */
int tokenizer_is_special(const Tokenizer *tokenizer, int32_t id);
/* The pre-tokenizer's name (GGUF tokenizer.ggml.pre, or "tokenizer.json"). */
const char *tokenizer_pre_name(const Tokenizer *tokenizer);
/* Whether encoding a prompt should start with BOS (tokenizer.ggml.add_bos_token
 * / the HF config). */
int tokenizer_adds_bos(const Tokenizer *tokenizer);

TokenizerChatTemplate tokenizer_chat_template(const Tokenizer *tokenizer);
/* Renders a one-turn chat (optional system message, user message, and the
 * assistant header that generation continues from), then encodes it,
 * including BOS when the template has one. */
int tokenizer_encode_chat(const Tokenizer *tokenizer, const char *system, const char *user,
                          int32_t **ids, size_t *n_ids);
/* The text tokenizer_encode_chat encodes (system may be NULL: the template's
 * default system message, if any, is used); *text is malloc'ed. Without a
 * template: the system message, a blank line, then the user message. */
int tokenizer_render_chat(const Tokenizer *tokenizer, const char *system, const char *user,
                          char **text);
/* The template's default system message (ChatML), or Llama 3.1's preamble of
 * every system turn; NULL when none. */
const char *tokenizer_default_system(const Tokenizer *tokenizer);

#endif
