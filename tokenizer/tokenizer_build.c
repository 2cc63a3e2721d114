/* Building a Tokenizer from what a loader read (GGUF metadata or
 * tokenizer.json): token strings and types, the string -> id map, the merge
 * table keyed by id pairs, GPT-2's byte <-> stand-in character mapping, the
 * special tokens to split out first, and the stop tokens. */
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"

int tokenizer_alloc(size_t n_vocab, Tokenizer **out) {
  *out = NULL;
  Tokenizer *t = obc_calloc(1, sizeof(*t), "tokenizer");
  if (!t) return OBC_ENOMEM;
  t->n_vocab = n_vocab;
  t->tokens = obc_calloc(n_vocab, sizeof(*t->tokens), "token strings");
  t->token_lengths = obc_calloc(n_vocab, sizeof(*t->token_lengths), "token lengths");
  t->token_types = obc_calloc(n_vocab, sizeof(*t->token_types), "token types");
  t->bos_id = t->eos_id = t->unk_id = -1;
  if (!t->tokens || !t->token_lengths || !t->token_types) {
    tokenizer_free(t);
    return OBC_ENOMEM;
  }
  *out = t;
  return OBC_OK;
}

int tokenizer_set_token(Tokenizer *tokenizer, size_t id, const char *text, size_t length,
                        uint8_t type) {
  if (id >= tokenizer->n_vocab) return obc_fail(OBC_EFORMAT, "token id %zu out of range", id);
  char *copy = malloc(length + 1);
  if (!copy) return obc_fail(OBC_ENOMEM, "out of memory for token %zu", id);
  memcpy(copy, text, length);
  copy[length] = '\0';
  free(tokenizer->tokens[id]);
  tokenizer->tokens[id] = copy;
  tokenizer->token_lengths[id] = (uint32_t)length;
  tokenizer->token_types[id] = type;
  return OBC_OK;
}

int tokenizer_index_vocab(Tokenizer *tokenizer, size_t n_merges, const char *source) {
  int rc = tokenizer_string_map_init(&tokenizer->vocab, tokenizer->n_vocab);
  if (rc) return rc;
  for (size_t i = 0; i < tokenizer->n_vocab; i++) {
    if (!tokenizer->tokens[i])
      return obc_fail(OBC_EFORMAT, "%s: token id %zu has no string (vocabulary has holes)", source,
                      i);
    tokenizer_string_map_insert(&tokenizer->vocab, tokenizer->tokens[i],
                                tokenizer->token_lengths[i], (int32_t)i);
  }
  return tokenizer_pair_map_init(&tokenizer->merges, n_merges);
}

void tokenizer_add_merge(Tokenizer *tokenizer, const char *left, size_t left_length,
                         const char *right, size_t right_length, int32_t rank) {
  int32_t left_id = tokenizer_string_map_find(&tokenizer->vocab, left, left_length);
  int32_t right_id = tokenizer_string_map_find(&tokenizer->vocab, right, right_length);
  if (left_id < 0 || right_id < 0) return;
  char small[512];
  size_t length = left_length + right_length;
  char *joined = length <= sizeof(small) ? small : malloc(length);
  if (!joined) return;
  memcpy(joined, left, left_length);
  memcpy(joined + left_length, right, right_length);
  int32_t merged = tokenizer_string_map_find(&tokenizer->vocab, joined, length);
  if (joined != small) free(joined);
  if (merged < 0) return;
  if (2 * tokenizer->merges.count + 1 >= tokenizer->merges.capacity)
    return; /* more than announced */
  tokenizer_pair_map_insert(&tokenizer->merges, left_id, right_id, rank, merged);
}

int tokenizer_set_chat_template(Tokenizer *tokenizer, const char *text, size_t length) {
  free(tokenizer->chat_template);
  tokenizer->chat_template = malloc(length + 1);
  if (!tokenizer->chat_template) return obc_fail(OBC_ENOMEM, "out of memory for the chat template");
  memcpy(tokenizer->chat_template, text, length);
  tokenizer->chat_template[length] = '\0';
  return OBC_OK;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * other 68 bytes get code points 256, 257, ... in byte order. */
static void build_byte_mapping(Tokenizer *tokenizer) {
  int next = 256;
  for (int i = 0; i < 512; i++) tokenizer->codepoint_byte[i] = -1;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int cp = printable ? b : next++;
    tokenizer->byte_codepoint[b] = (uint16_t)cp;
    tokenizer->codepoint_byte[cp] = (int16_t)b;
  }
}

static size_t spell_codepoint(uint16_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xC0 | (cp >> 6));
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

typedef struct {
  uint32_t length;
  int32_t id;
} SpecialToken;

/* The order special tokens are tried in: longer first, then lower id. */
static int special_compare(const void *a, const void *b) {
  const SpecialToken *x = a, *y = b;
  if (x->length != y->length) return x->length > y->length ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* Split out of the text whole: control and user-defined tokens and, as
 * llama.cpp does, the unknown token (<unk> of a SentencePiece vocabulary). */
static int split_out(const Tokenizer *tokenizer, size_t id) {
  uint8_t type = tokenizer->token_types[id];
  return (type == TOKEN_TYPE_CONTROL || type == TOKEN_TYPE_USER_DEFINED ||
          type == TOKEN_TYPE_UNKNOWN) &&
         tokenizer->token_lengths[id];
}

static int collect_special(Tokenizer *tokenizer) {
  size_t n = 0;
  for (size_t i = 0; i < tokenizer->n_vocab; i++) n += split_out(tokenizer, i);
  tokenizer->special_ids = obc_malloc((n ? n : 1) * sizeof(int32_t), "special token ids");
  if (!tokenizer->special_ids) return OBC_ENOMEM;
  tokenizer->n_special = 0;
  for (size_t i = 0; i < tokenizer->n_vocab; i++) {
    if (split_out(tokenizer, i)) {
      tokenizer->special_ids[tokenizer->n_special++] = (int32_t)i;
      tokenizer->special_first_byte[(unsigned char)tokenizer->tokens[i][0]] = 1;
    }
  }
  /* Sorted with qsort: a file may hold a great many control tokens. */
  SpecialToken *order = obc_malloc(
      (tokenizer->n_special ? tokenizer->n_special : 1) * sizeof(*order), "special token order");
  if (!order) return OBC_ENOMEM;
  for (size_t i = 0; i < tokenizer->n_special; i++) {
    int32_t id = tokenizer->special_ids[i];
    order[i] = (SpecialToken){.length = tokenizer->token_lengths[id], .id = id};
  }
  qsort(order, tokenizer->n_special, sizeof(*order), special_compare);
  for (size_t i = 0; i < tokenizer->n_special; i++) tokenizer->special_ids[i] = order[i].id;
  free(order);
  return OBC_OK;
}

/* Tokens that end a generation: eos and the end-of-turn markers of the chat
 * formats we render. */
static int collect_stops(Tokenizer *tokenizer) {
  static const char *const names[] = {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>",
                                      "<|endoftext|>", "<|eom_id|>"};
  size_t n_names = sizeof(names) / sizeof(names[0]);
  tokenizer->stop_ids = obc_malloc((n_names + 1) * sizeof(int32_t), "stop token ids");
  if (!tokenizer->stop_ids) return OBC_ENOMEM;
  tokenizer->n_stop = 0;
  if (tokenizer->eos_id >= 0) tokenizer->stop_ids[tokenizer->n_stop++] = tokenizer->eos_id;
  for (size_t i = 0; i < n_names; i++) {
    int32_t id = tokenizer_token_id(tokenizer, names[i]);
    if (id >= 0 && !tokenizer_is_stop(tokenizer, id)) tokenizer->stop_ids[tokenizer->n_stop++] = id;
  }
  return OBC_OK;
}

static int finish_common(Tokenizer *tokenizer, const char *source);

int tokenizer_finish(Tokenizer *tokenizer, const char *source) {
  if (tokenizer->kind == TOKENIZER_SENTENCEPIECE) return finish_common(tokenizer, source);
  build_byte_mapping(tokenizer);
  /* A byte without a token (SmolLM2 lacks a few control bytes) is dropped
   * when encoding, as by llama.cpp and by Hugging Face's BPE without unk. */
  size_t n_bytes = 0;
  for (int b = 0; b < 256; b++) {
    char spelled[2];
    size_t length = spell_codepoint(tokenizer->byte_codepoint[b], spelled);
    tokenizer->byte_ids[b] = tokenizer_string_map_find(&tokenizer->vocab, spelled, length);
    n_bytes += tokenizer->byte_ids[b] >= 0;
  }
  if (n_bytes < 128)
    return obc_fail(
        OBC_EFORMAT,
        "%s: only %zu of the 256 byte tokens are in the vocabulary (expected a byte-level "
        "BPE vocabulary, spelled with GPT-2's byte stand-ins)",
        source, n_bytes);
  if (tokenizer->pre.n_regexes == 0)
    return obc_fail(OBC_EFORMAT, "%s: no pre-tokenizer set", source);
  return finish_common(tokenizer, source);
}

/* What every kind of vocabulary needs: ids in range, special and stop tokens,
 * the chat template's kind. */
static int finish_common(Tokenizer *tokenizer, const char *source) {
  if (tokenizer->bos_id >= (int32_t)tokenizer->n_vocab ||
      tokenizer->eos_id >= (int32_t)tokenizer->n_vocab ||
      tokenizer->unk_id >= (int32_t)tokenizer->n_vocab)
    return obc_fail(OBC_EFORMAT,
                    "%s: bos/eos/unk token id %d/%d/%d out of range (vocabulary of %zu)", source,
                    tokenizer->bos_id, tokenizer->eos_id, tokenizer->unk_id, tokenizer->n_vocab);
  int rc = collect_special(tokenizer);
  if (!rc) rc = collect_stops(tokenizer);
  if (!rc) rc = tokenizer_chat_detect(tokenizer);
  return rc;
}
