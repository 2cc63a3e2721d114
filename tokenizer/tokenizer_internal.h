/* The inside of the Tokenizer shared by its files (tokenizer*.c only): the
 * vocabulary and its hash map, the BPE merge table, the special tokens that
 * are split out before pre-tokenization, the pre-tokenizer regexes and the chat
 * template. A loader allocates the tokenizer, sets every token, indexes the
 * vocabulary, adds the merges and calls tokenizer_finish(). */
#ifndef OBC_TOKENIZER_INTERNAL_H
#define OBC_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

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
  const char **keys;     /* (capacity) borrowed pointers; NULL = empty slot */
  uint32_t *key_lengths; /* (capacity) */
  int32_t *values;       /* (capacity) */
  size_t capacity;       /* power of two */
  size_t count;
} TokenizerStringMap;

#define TOKEN_PAIR_EMPTY UINT64_MAX
/* Open-addressing hash map from a (left id, right id) pair to its merge. */
typedef struct {
  uint64_t *keys;  /* (capacity) left << 32 | right; TOKEN_PAIR_EMPTY = empty slot */
  int32_t *ranks;  /* (capacity) position in the merge list: lower merges first */
  int32_t *merged; /* (capacity) id of the concatenation */
  size_t capacity; /* power of two */
  size_t count;
} TokenizerPairMap;

/* The pre-tokenizer: regexes applied in turn; each splits every piece of the
 * previous one into its matches and the gaps between them ("isolated"). */
#define TOKENIZER_MAX_REGEXES 4
typedef struct {
  char name[64]; /* pre type, e.g. "smollm", or "tokenizer.json" */
  size_t n_regexes;
  void *codes[TOKENIZER_MAX_REGEXES]; /* pcre2_code_8 * */
} TokenizerPreSplit;

/* The normalizer: steps applied in turn to every stretch of text between
 * special tokens, before pre-tokenization (tokenizer.json's normalizer, a
 * Sequence flattened; a Metaspace pre-tokenizer adds its replacement and
 * prefix as the last steps). */
typedef enum {
  NORMALIZE_NFC = 0,
  NORMALIZE_NFD,
  NORMALIZE_NFKC,
  NORMALIZE_NFKD,
  NORMALIZE_LOWERCASE,
  NORMALIZE_PREPEND,       /* text before a non-empty stretch */
  NORMALIZE_PREFIX_ALWAYS, /* text before a stretch that does not start with it */
  NORMALIZE_PREFIX_FIRST,  /* the same, for the first stretch of the input only */
  NORMALIZE_REPLACE,       /* every occurrence of pattern by text */
  NORMALIZE_STRIP          /* White_Space at the left and/or right end */
} TokenizerNormalizeKind;

typedef struct {
  TokenizerNormalizeKind kind;
  char *pattern; /* NORMALIZE_REPLACE: what is replaced (non-empty) */
  size_t pattern_length;
  char *text; /* PREPEND, PREFIX_*, REPLACE: what is written */
  size_t text_length;
  int strip_left, strip_right; /* NORMALIZE_STRIP */
} TokenizerNormalizeStep;

#define TOKENIZER_MAX_NORMALIZE_STEPS 64
typedef struct {
  TokenizerNormalizeStep steps[TOKENIZER_MAX_NORMALIZE_STEPS];
  size_t n_steps;
} TokenizerNormalizer;

/* What BPE starts from. Byte-level (GPT-2 style): every byte as the token of
 * its stand-in character. SentencePiece style (Llama 2, Mistral, TinyLlama):
 * every UTF-8 character as its token, or, when it has none, its bytes as the
 * byte-fallback tokens <0xXX>; spaces are spelled with a marker (U+2581 "▁")
 * that the normalizer writes and decoding turns back into spaces. */
typedef enum { TOKENIZER_BYTE_LEVEL = 0, TOKENIZER_SENTENCEPIECE } TokenizerKind;

/* The space the encoder put before the text, undone when decoding: kept;
 * one leading space of the first token dropped (llama.cpp, the Strip decoder
 * of Llama 2's tokenizer.json); or, as `tokenizers`' Metaspace decoder does,
 * every space marker of the first token dropped. */
typedef enum {
  DECODE_SPACE_KEEP = 0,
  DECODE_SPACE_STRIP_ONE,
  DECODE_SPACE_DROP_FIRST_MARKERS
} TokenizerDecodeSpace;

struct Tokenizer {
  TokenizerKind kind;
  size_t n_vocab;
  char **tokens;           /* (n_vocab) token strings as stored (byte-level form), NUL-terminated */
  uint32_t *token_lengths; /* (n_vocab) bytes */
  uint8_t *token_types;    /* (n_vocab) TOKEN_TYPE_* */
  TokenizerStringMap vocab; /* token string -> id */
  TokenizerPairMap merges;
  int ignore_merges; /* a piece that is itself a token is not merged (Llama 3) */

  /* GPT-2 byte <-> unicode mapping: every byte has a printable stand-in. */
  uint16_t byte_codepoint[256]; /* byte -> code point of its stand-in */
  int16_t codepoint_byte[512];  /* code point (< 512) -> byte, -1 when none */
  /* id of the token of each byte: byte-level, the one-character token of its
   * stand-in; SentencePiece, its <0xXX> token (-1 when none) */
  int32_t byte_ids[256];
  int32_t unk_id;       /* SentencePiece: a character without any token; -1 when none */
  char space_marker[8]; /* SentencePiece: what a space is spelled as (NUL-terminated) */
  TokenizerDecodeSpace decode_space; /* what decoding does to the first token's spaces */

  int32_t *special_ids; /* (n_special) split out first, longest first */
  size_t n_special;
  uint8_t special_first_byte[256]; /* 1 where some special token starts with that byte */

  TokenizerNormalizer normalizer;
  TokenizerPreSplit pre;

  int32_t bos_id, eos_id; /* -1 when none */
  int add_bos;
  int32_t *stop_ids; /* (n_stop) */
  size_t n_stop;

  TokenizerChatTemplate chat;
  char *chat_template;  /* the template text from the metadata (NULL when none) */
  char *default_system; /* default system message of the template (NULL when none) */
  /* Qwen3: the template has an enable_thinking switch; rendered with thinking
   * off, the assistant turn opens with an empty "<think>\n\n</think>\n\n". */
  int empty_think;
};

/* tokenizer_maps.c */
int tokenizer_string_map_init(TokenizerStringMap *map, size_t max_count);
void tokenizer_string_map_free(TokenizerStringMap *map);
int32_t tokenizer_string_map_insert(TokenizerStringMap *map, const char *key, size_t length,
                                    int32_t value);
int32_t tokenizer_string_map_find(const TokenizerStringMap *map, const char *key, size_t length);
int tokenizer_pair_map_init(TokenizerPairMap *map, size_t max_count);
void tokenizer_pair_map_free(TokenizerPairMap *map);
void tokenizer_pair_map_insert(TokenizerPairMap *map, int32_t left, int32_t right, int32_t rank,
                               int32_t merged);
int tokenizer_pair_map_find(const TokenizerPairMap *map, int32_t left, int32_t right, int32_t *rank,
                            int32_t *merged);

/* tokenizer_build.c: the loaders' side. */
int tokenizer_alloc(size_t n_vocab, Tokenizer **out);
/* Copies the token text (length bytes) as token id. */
int tokenizer_set_token(Tokenizer *tokenizer, size_t id, const char *text, size_t length,
                        uint8_t type);
/* Builds the string -> id map once every token is set, and sizes the merge
 * table for n_merges merges. */
int tokenizer_index_vocab(Tokenizer *tokenizer, size_t n_merges, const char *source);
/* Adds merge number rank ("left right"); a merge whose parts or result are not
 * tokens is skipped, as it can never apply. */
void tokenizer_add_merge(Tokenizer *tokenizer, const char *left, size_t left_length,
                         const char *right, size_t right_length, int32_t rank);
int tokenizer_set_chat_template(Tokenizer *tokenizer, const char *text, size_t length);
/* Byte mapping, special-token list, stop tokens and chat kind; checks that
 * every byte has its token. The pre-tokenizer must be set already. */
int tokenizer_finish(Tokenizer *tokenizer, const char *source);

/* tokenizer_normalize.c */
/* Appends a step of that kind (pattern and text copied; either may be NULL)
 * and returns it in *step (may be NULL), for the caller to set the rest. */
int tokenizer_normalizer_add(TokenizerNormalizer *normalizer, TokenizerNormalizeKind kind,
                             const char *pattern, const char *text, const char *source,
                             TokenizerNormalizeStep **step);
void tokenizer_normalizer_free(TokenizerNormalizer *normalizer);
/* The normalized form of text[0, length) (valid UTF-8) as a malloc'ed
 * NUL-terminated string; first says whether the stretch starts the input. */
int tokenizer_normalize(const TokenizerNormalizer *normalizer, const char *text, size_t length,
                        int first, char **out, size_t *out_length);

/* tokenizer_pretokenize.c */
/* The regexes llama.cpp uses for a GGUF tokenizer.ggml.pre value. */
int tokenizer_pre_from_name(TokenizerPreSplit *pre, const char *name, const char *source);
/* Appends one regex (PCRE2 syntax, UTF + UCP) to the pre-tokenizer. */
int tokenizer_pre_add_regex(TokenizerPreSplit *pre, const char *pattern, const char *source);
void tokenizer_pre_free(TokenizerPreSplit *pre);
/* Calls piece(context, start, length) for every piece of text[0, length),
 * in order; the pieces tile the text. */
typedef int (*TokenizerPieceFn)(void *context, const char *start, size_t length);
int tokenizer_pre_split(const TokenizerPreSplit *pre, const char *text, size_t length,
                        TokenizerPieceFn piece, void *context);

/* tokenizer_bpe.c: appends the ids of one pre-tokenized piece to out. */
typedef struct {
  int32_t *ids; /* (count) */
  size_t count, capacity;
} TokenizerIdList;
int tokenizer_id_list_push(TokenizerIdList *list, int32_t id);
int tokenizer_bpe_piece(const Tokenizer *tokenizer, const char *piece, size_t length,
                        TokenizerIdList *out);

/* tokenizer_sentencepiece.c */
/* Sets the SentencePiece kind, the space marker (U+2581 unless set) and,
 * with byte_fallback, the ids of the <0xXX> tokens (else none: a character
 * without a token is unknown). The vocabulary must be indexed. */
void tokenizer_sentencepiece_bytes(Tokenizer *tokenizer, int byte_fallback);
/* The merge table of a vocabulary with scores (llama.cpp's SPM): every split
 * of a token into two tokens merges into it, the higher the token's score the
 * earlier. scores (n_vocab); the vocabulary must be indexed. */
int tokenizer_sentencepiece_merges(Tokenizer *tokenizer, const float *scores, const char *source);

/* tokenizer_chat.c: finds the template kind and its default system message. */
int tokenizer_chat_detect(Tokenizer *tokenizer);

#endif
