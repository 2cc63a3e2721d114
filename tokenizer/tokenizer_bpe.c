/* BPE on one pre-tokenized piece: every byte starts as its own symbol (the
 * token of its GPT-2 stand-in character), or, for a SentencePiece vocabulary,
 * every UTF-8 character (tokenizer_sentencepiece.c), then the adjacent pair
 * with the lowest merge rank is merged until none is left, leftmost first on
 * ties. Symbols form a linked list and candidate pairs sit in a binary heap
 * (stale entries are skipped when popped), so a piece of n bytes costs
 * O(n log n) instead of the naive O(n^2). */
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"
#include "tokenizer/unicode.h"

int tokenizer_id_list_push(TokenizerIdList *list, int32_t id) {
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? 2 * list->capacity : 256;
    int32_t *ids = realloc(list->ids, capacity * sizeof(*ids));
    if (!ids) return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for %zu token ids", capacity);
    list->ids = ids;
    list->capacity = capacity;
  }
  list->ids[list->count++] = id;
  return OBC_OK;
}

typedef struct {
  int32_t rank;
  int32_t left, right;       /* symbol positions */
  int32_t left_id, right_id; /* their ids when the pair was queued */
  int32_t merged;
} MergeCandidate;

typedef struct {
  int32_t *id;          /* (n) current token of the symbol starting at each byte */
  int32_t *prev;        /* (n) previous live symbol, -1 at the start */
  int32_t *next;        /* (n) next live symbol, -1 at the end */
  MergeCandidate *heap; /* (3 n) min-heap on (rank, left) */
  size_t heap_size;
} MergeState;

static int candidate_before(const MergeCandidate *a, const MergeCandidate *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(MergeState *state, MergeCandidate candidate) {
  size_t i = state->heap_size++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!candidate_before(&candidate, &state->heap[parent])) break;
    state->heap[i] = state->heap[parent];
    i = parent;
  }
  state->heap[i] = candidate;
}

static MergeCandidate heap_pop(MergeState *state) {
  MergeCandidate top = state->heap[0];
  MergeCandidate last = state->heap[--state->heap_size];
  size_t n = state->heap_size, i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && candidate_before(&state->heap[child + 1], &state->heap[child])) child++;
    if (!candidate_before(&state->heap[child], &last)) break;
    state->heap[i] = state->heap[child];
    i = child;
  }
  if (n > 0) state->heap[i] = last;
  return top;
}

static void queue_pair(const Tokenizer *tokenizer, MergeState *state, int32_t left) {
  if (left < 0) return;
  int32_t right = state->next[left];
  if (right < 0) return;
  MergeCandidate candidate = {
      .left = left, .right = right, .left_id = state->id[left], .right_id = state->id[right]};
  if (tokenizer_pair_map_find(&tokenizer->merges, candidate.left_id, candidate.right_id,
                              &candidate.rank, &candidate.merged))
    heap_push(state, candidate);
}

static void merge_all(const Tokenizer *tokenizer, MergeState *state, size_t n) {
  for (size_t i = 0; i + 1 < n; i++) queue_pair(tokenizer, state, (int32_t)i);
  while (state->heap_size > 0) {
    MergeCandidate c = heap_pop(state);
    /* Stale when either side has merged since the pair was queued. */
    if (state->id[c.left] != c.left_id || state->next[c.left] != c.right ||
        state->id[c.right] != c.right_id)
      continue;
    state->id[c.left] = c.merged;
    int32_t after = state->next[c.right];
    state->next[c.left] = after;
    if (after >= 0) state->prev[after] = c.left;
    state->id[c.right] = -1;
    state->next[c.right] = -1;
    queue_pair(tokenizer, state, state->prev[c.left]);
    queue_pair(tokenizer, state, c.left);
  }
}

/* The token of the whole piece, or -1 (ignore_merges: such a piece is not
 * merged). The byte-level vocabulary spells pieces with stand-ins. */
static int32_t whole_piece(const Tokenizer *tokenizer, const unsigned char *bytes, size_t length) {
  if (tokenizer->kind == TOKENIZER_SENTENCEPIECE)
    return tokenizer_string_map_find(&tokenizer->vocab, (const char *)bytes, length);
  char spelled[256];
  size_t k = 0;
  for (size_t i = 0; i < length; i++) {
    if (k + 2 > sizeof(spelled)) return -1;
    uint16_t cp = tokenizer->byte_codepoint[bytes[i]];
    if (cp < 0x80) {
      spelled[k++] = (char)cp;
    } else {
      spelled[k++] = (char)(0xC0 | (cp >> 6));
      spelled[k++] = (char)(0x80 | (cp & 0x3F));
    }
  }
  return tokenizer_string_map_find(&tokenizer->vocab, spelled, k);
}

/* SentencePiece symbols: each UTF-8 character as its token, or else its bytes
 * as byte-fallback tokens, or else (a byte without one) a single unknown
 * token, -1 when the vocabulary has none (dropped). Returns the count. */
static size_t sentencepiece_symbols(const Tokenizer *tokenizer, const unsigned char *bytes,
                                    size_t length, int32_t *id) {
  size_t n = 0;
  for (size_t i = 0; i < length;) {
    size_t width = 1;
    unicode_utf8_next((const char *)bytes + i, length - i, &width);
    int32_t token = tokenizer_string_map_find(&tokenizer->vocab, (const char *)bytes + i, width);
    int fallback = 1;
    for (size_t k = 0; k < width; k++) fallback &= tokenizer->byte_ids[bytes[i + k]] >= 0;
    if (token >= 0)
      id[n++] = token;
    else if (fallback)
      for (size_t k = 0; k < width; k++) id[n++] = tokenizer->byte_ids[bytes[i + k]];
    else
      id[n++] = tokenizer->unk_id;
    i += width;
  }
  return n;
}

int tokenizer_bpe_piece(const Tokenizer *tokenizer, const char *piece, size_t length,
                        TokenizerIdList *out) {
  if (length == 0) return 0;
  const unsigned char *bytes = (const unsigned char *)piece;
  int byte_level = tokenizer->kind == TOKENIZER_BYTE_LEVEL;
  if (byte_level && length == 1)
    return tokenizer->byte_ids[bytes[0]] < 0
               ? 0
               : tokenizer_id_list_push(out, tokenizer->byte_ids[bytes[0]]);
  if (tokenizer->ignore_merges) {
    int32_t id = whole_piece(tokenizer, bytes, length);
    if (id >= 0) return tokenizer_id_list_push(out, id);
  }

  /* The heap holds the n - 1 initial pairs plus at most two new pairs per
   * merge (n - 1 merges): under 3n entries, n symbols <= length bytes. Short
   * pieces use the stack. */
  enum { SMALL = 64 };
  int32_t small_ints[3 * SMALL];
  MergeCandidate small_heap[3 * SMALL];
  MergeState state = {0};
  int32_t *ints = small_ints;
  state.heap = small_heap;
  if (length > SMALL) {
    ints = malloc(3 * length * sizeof(*ints));
    state.heap = malloc(3 * length * sizeof(*state.heap));
    if (!ints || !state.heap) {
      free(ints);
      free(state.heap);
      return obc_fail(OBC_ENOMEM, "tokenizer: out of memory for a piece of %zu bytes", length);
    }
  }
  state.id = ints;
  state.prev = ints + length;
  state.next = ints + 2 * length;
  size_t n = length;
  if (byte_level)
    for (size_t i = 0; i < length; i++) state.id[i] = tokenizer->byte_ids[bytes[i]];
  else
    n = sentencepiece_symbols(tokenizer, bytes, length, state.id);
  for (size_t i = 0; i < n; i++) {
    state.prev[i] = (int32_t)i - 1;
    state.next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
  }
  merge_all(tokenizer, &state, n);
  int rc = 0;
  for (int32_t i = 0; n > 0 && i >= 0 && !rc; i = state.next[i])
    if (state.id[i] >= 0)
      rc = tokenizer_id_list_push(out, state.id[i]); /* -1: a byte without a token */
  if (ints != small_ints) free(ints);
  if (state.heap != small_heap) free(state.heap);
  return rc;
}
