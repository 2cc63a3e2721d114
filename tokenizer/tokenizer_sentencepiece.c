/* The SentencePiece side of the tokenizer (Llama 2, Mistral, TinyLlama): the
 * byte-fallback tokens <0xXX> and the merge table of a vocabulary that comes
 * with scores instead of merges (GGUF tokenizer.ggml.model "llama").
 *
 * llama.cpp's SPM tokenizer starts from UTF-8 characters and repeatedly
 * merges the adjacent pair whose concatenation is a token of the highest
 * score, leftmost first on ties. That is BPE with one merge per way of cutting
 * a token in two tokens, ranked by the token's score, so the tokenizer builds
 * that table once and encodes with the same merge loop as byte-level BPE
 * (tokenizer_bpe.c). A character that is no token cannot merge (llama.cpp
 * could merge it when some token contained it; SentencePiece vocabularies
 * hold every character of their pieces). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"

void tokenizer_sentencepiece_bytes(Tokenizer *tokenizer, int byte_fallback) {
  tokenizer->kind = TOKENIZER_SENTENCEPIECE;
  if (!tokenizer->space_marker[0])
    snprintf(tokenizer->space_marker, sizeof tokenizer->space_marker, "\xE2\x96\x81");
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    int32_t id = tokenizer_string_map_find(&tokenizer->vocab, name, 6);
    if (id >= 0 && tokenizer->token_types[id] == TOKEN_TYPE_NORMAL)
      tokenizer->token_types[id] = TOKEN_TYPE_BYTE;
    if (id >= 0 && (tokenizer->token_types[id] != TOKEN_TYPE_BYTE || !byte_fallback)) id = -1;
    tokenizer->byte_ids[b] = id;
  }
}

typedef struct {
  float score;
  int32_t id;
} ScoredToken;

/* Higher score first (NaN as the lowest), then lower id. */
static int scored_compare(const void *a, const void *b) {
  const ScoredToken *x = a, *y = b;
  float sx = isnan(x->score) ? -INFINITY : x->score;
  float sy = isnan(y->score) ? -INFINITY : y->score;
  if (sx != sy) return sx > sy ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int is_continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

int tokenizer_sentencepiece_merges(Tokenizer *tokenizer, const float *scores, const char *source) {
  size_t n = tokenizer->n_vocab;
  ScoredToken *order = obc_malloc(n * sizeof(*order), "token scores");
  int32_t *rank = obc_malloc(n * sizeof(*rank), "token ranks");
  if (!order || !rank) {
    free(order);
    free(rank);
    return OBC_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) order[i] = (ScoredToken){.score = scores[i], .id = (int32_t)i};
  qsort(order, n, sizeof(*order), scored_compare);
  /* Equal scores share a rank, so that the leftmost pair wins among them. */
  int32_t dense = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && scored_compare(&(ScoredToken){order[i - 1].score, 0},
                                &(ScoredToken){order[i].score, 0}) != 0)
      dense++;
    rank[order[i].id] = dense;
  }
  free(order);

  size_t n_splits = 0;
  for (size_t id = 0; id < n; id++)
    for (uint32_t k = 1; k < tokenizer->token_lengths[id]; k++)
      n_splits += !is_continuation(tokenizer->tokens[id][k]);
  tokenizer_pair_map_free(&tokenizer->merges);
  int rc = tokenizer_pair_map_init(&tokenizer->merges, n_splits);
  for (size_t id = 0; id < n && !rc; id++) {
    const char *text = tokenizer->tokens[id];
    uint32_t length = tokenizer->token_lengths[id];
    for (uint32_t k = 1; k < length; k++) {
      if (is_continuation(text[k])) continue;
      int32_t left = tokenizer_string_map_find(&tokenizer->vocab, text, k);
      int32_t right = tokenizer_string_map_find(&tokenizer->vocab, text + k, length - k);
      if (left >= 0 && right >= 0)
        tokenizer_pair_map_insert(&tokenizer->merges, left, right, rank[id], (int32_t)id);
    }
  }
  free(rank);
  if (rc)
    return obc_fail_context(rc, "%s: the merge table of the SentencePiece vocabulary", source);
  return OBC_OK;
}
