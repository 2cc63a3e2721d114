/* The tokenizer's two hash maps: token string -> id (FNV-1a, open addressing
 * with linear probing) and (left id, right id) -> merge rank and merged id.
 * Both are built once at load time and only read while encoding, so they need
 * no deletion and can be shared by threads. */
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "tokenizer/tokenizer_internal.h"

static uint64_t hash_bytes(const char *text, size_t length) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < length; i++) {
    h ^= (unsigned char)text[i];
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t hash_pair(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  return key;
}

static size_t capacity_for(size_t count) {
  size_t capacity = 64;
  while (capacity < 2 * count + 1) capacity *= 2;
  return capacity;
}

int tokenizer_string_map_init(TokenizerStringMap *map, size_t max_count) {
  memset(map, 0, sizeof(*map));
  map->capacity = capacity_for(max_count);
  map->keys = obc_calloc(map->capacity, sizeof(*map->keys), "token map keys");
  map->key_lengths = obc_calloc(map->capacity, sizeof(*map->key_lengths), "token map lengths");
  map->values = obc_calloc(map->capacity, sizeof(*map->values), "token map values");
  if (!map->keys || !map->key_lengths || !map->values) return OBC_ENOMEM;
  return OBC_OK;
}

void tokenizer_string_map_free(TokenizerStringMap *map) {
  free(map->keys);
  free(map->key_lengths);
  free(map->values);
  memset(map, 0, sizeof(*map));
}

/* Inserts key (borrowed) unless present; returns the value now stored. */
int32_t tokenizer_string_map_insert(TokenizerStringMap *map, const char *key, size_t length,
                                    int32_t value) {
  size_t mask = map->capacity - 1;
  size_t slot = (size_t)hash_bytes(key, length) & mask;
  while (map->keys[slot]) {
    if (map->key_lengths[slot] == length && !memcmp(map->keys[slot], key, length))
      return map->values[slot];
    slot = (slot + 1) & mask;
  }
  map->keys[slot] = key;
  map->key_lengths[slot] = (uint32_t)length;
  map->values[slot] = value;
  map->count++;
  return value;
}

int32_t tokenizer_string_map_find(const TokenizerStringMap *map, const char *key, size_t length) {
  if (!map->capacity) return -1;
  size_t mask = map->capacity - 1;
  size_t slot = (size_t)hash_bytes(key, length) & mask;
  while (map->keys[slot]) {
    if (map->key_lengths[slot] == length && !memcmp(map->keys[slot], key, length))
      return map->values[slot];
    slot = (slot + 1) & mask;
  }
  return -1;
}

int tokenizer_pair_map_init(TokenizerPairMap *map, size_t max_count) {
  memset(map, 0, sizeof(*map));
  map->capacity = capacity_for(max_count);
  map->keys = obc_malloc(map->capacity * sizeof(*map->keys), "merge map keys");
  map->ranks = obc_calloc(map->capacity, sizeof(*map->ranks), "merge map ranks");
  map->merged = obc_calloc(map->capacity, sizeof(*map->merged), "merge map ids");
  if (!map->keys || !map->ranks || !map->merged) return OBC_ENOMEM;
  for (size_t i = 0; i < map->capacity; i++) map->keys[i] = TOKEN_PAIR_EMPTY;
  return OBC_OK;
}

void tokenizer_pair_map_free(TokenizerPairMap *map) {
  free(map->keys);
  free(map->ranks);
  free(map->merged);
  memset(map, 0, sizeof(*map));
}

static uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

/* Keeps the first (lowest-rank) entry when a pair is listed twice. */
void tokenizer_pair_map_insert(TokenizerPairMap *map, int32_t left, int32_t right, int32_t rank,
                               int32_t merged) {
  uint64_t key = pair_key(left, right);
  size_t mask = map->capacity - 1;
  size_t slot = (size_t)hash_pair(key) & mask;
  while (map->keys[slot] != TOKEN_PAIR_EMPTY) {
    if (map->keys[slot] == key) return;
    slot = (slot + 1) & mask;
  }
  map->keys[slot] = key;
  map->ranks[slot] = rank;
  map->merged[slot] = merged;
  map->count++;
}

int tokenizer_pair_map_find(const TokenizerPairMap *map, int32_t left, int32_t right, int32_t *rank,
                            int32_t *merged) {
  if (!map->capacity) return 0;
  uint64_t key = pair_key(left, right);
  size_t mask = map->capacity - 1;
  size_t slot = (size_t)hash_pair(key) & mask;
  while (map->keys[slot] != TOKEN_PAIR_EMPTY) {
    if (map->keys[slot] == key) {
      *rank = map->ranks[slot];
      *merged = map->merged[slot];
      return 1;
    }
    slot = (slot + 1) & mask;
  }
  return 0;
}
