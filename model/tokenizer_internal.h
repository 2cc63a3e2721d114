/* The inside of the Tokenizer shared by its files (tokenizer*.c only): the
 * vocabulary and its hash map, the BPE merge table, the special tokens that
 * are split out before pre-tokenization, the pre-tokenizer regexes and the chat
 * template. Loaders fill a TokenizerSpec and hand it to tokenizer_build(). */
#ifndef OBC_TOKENIZER_INTERNAL_H
#define OBC_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "model/tokenizer.h"

/* Token types, numbered as in GGUF's tokenizer.ggml.token_type. */
enum {
  TOKEN_TYPE_NORMAL = 1,
  TOKEN_TYPE_UNKNOWN = 2,
  TOKEN_TYPE_CONTROL = 3,
  TOKEN_TYPE_USER_DEFINED = 4,
  TOKEN_TYPE_UNUSED = 5,
  TOKEN_TYPE_BYTE = 6
};

/* Open-addressing hash map from a byte string to an int32 value. */
typedef struct {
  const char **keys;   /* (capacity) borrowed pointers; NULL = empty slot */
  uint32_t *key_lengths; /* (capacity) */
  int32_t *values;     /* (capacity) */
  size_t capacity;     /* power of two */
  size_t count;
} TokenStringMap;

/* Open-addressing hash map from a (left id, right id) pair to its merge. */
typedef struct {
  uint64_t *keys;   /* (capacity) (left << 32 | right) + 1; 0 = empty slot */
  int32_t *ranks;   /* (capacity) position in the merge list: lower merges first */
  int32_t *merged;  /* (capacity) id of the concatenation */
  size_t capacity;  /* power of two */
  size_t count;
} TokenPairMap;

/* The pre-tokenizer: regexes applied in turn; each splits every piece of the
 * previous one into its matches and the gaps between them. */
#define TOKENIZER_MAX_REGEXES 4
typedef struct {
  char name[64];                        /* pre type, e.g. "smollm" */
  size_t n_regexes;
  void *codes[TOKENIZER_MAX_REGEXES];   /* pcre2_code_8 * */
  int jit[TOKENIZER_MAX_REGEXES];       /* JIT-compiled */
} TokenizerPreSplit;

struct Tokenizer {
  size_t n_vocab;
  char **tokens;           /* (n_vocab) token strings as stored (byte-level form) */
  uint32_t *token_lengths; /* (n_vocab) bytes */
  uint8_t *token_types;    /* (n_vocab) TOKEN_TYPE_* */
  TokenStringMap vocab;    /* token string -> id */
  TokenPairMap merges;
  int32_t byte_ids[256];   /* id of the one-symbol token of each byte */

  int32_t *special_ids;    /* (n_special) split out first, longest first */
  size_t n_special;
  uint8_t special_first_byte[256]; /* 1 where some special token starts with that byte */

  TokenizerPreSplit pre;

  int32_t bos_id, eos_id; /* -1 when none */
  int add_bos;
  int32_t *stop_ids;      /* (n_stop) */
  size_t n_stop;

  ObcChatTemplate chat;
  char *chat_template;    /* the template text from the metadata (NULL when none) */
  char *default_system;   /* default system message of the template (NULL when none) */
};

#endif
