/* A tiny in-memory GGUF writer for tests: metadata of any type and F32 (or
 * raw-typed) tensors, laid out exactly as the format prescribes, so tests can
 * make valid files and then damage them on purpose. Header-only; test code. */
#ifndef OBC_TEST_GGUF_BUILDER_H
#define OBC_TEST_GGUF_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint8_t *bytes;
  size_t size, capacity;
} TestBuffer;

static inline void tb_put(TestBuffer *b, const void *data, size_t n) {
  if (b->size + n > b->capacity) {
    b->capacity = (b->size + n) * 2 + 256;
    b->bytes = realloc(b->bytes, b->capacity);
  }
  if (n) memcpy(b->bytes + b->size, data, n); /* memcpy(_, NULL, 0) is undefined */
  b->size += n;
}
static inline void tb_u32(TestBuffer *b, uint32_t v) { tb_put(b, &v, 4); }
static inline void tb_u64(TestBuffer *b, uint64_t v) { tb_put(b, &v, 8); }
static inline void tb_str(TestBuffer *b, const char *s) {
  tb_u64(b, strlen(s));
  tb_put(b, s, strlen(s));
}

enum { TB_MAX_TENSORS = 64, TB_MAX_KV = 64 };

typedef struct {
  char name[128];
  uint32_t n_dims;
  uint64_t dims[4];
  uint32_t type;
  const void *data; /* n_bytes */
  size_t n_bytes;
} TestTensor;

/* A GGUF under construction: metadata is appended to kv as it comes. */
typedef struct {
  uint32_t version;
  TestBuffer kv;
  size_t n_kv;
  TestTensor tensors[TB_MAX_TENSORS];
  size_t n_tensors;
  size_t alignment;
} TestGguf;

static inline void tg_init(TestGguf *g, uint32_t version) {
  memset(g, 0, sizeof *g);
  g->version = version;
  g->alignment = 32;
}
static inline void tg_kv_u32(TestGguf *g, const char *key, uint32_t v) {
  tb_str(&g->kv, key);
  tb_u32(&g->kv, 4);
  tb_u32(&g->kv, v);
  g->n_kv++;
}
static inline void tg_kv_f32(TestGguf *g, const char *key, float v) {
  tb_str(&g->kv, key);
  tb_u32(&g->kv, 6);
  tb_put(&g->kv, &v, 4);
  g->n_kv++;
}
static inline void tg_kv_str(TestGguf *g, const char *key, const char *v) {
  tb_str(&g->kv, key);
  tb_u32(&g->kv, 8);
  tb_str(&g->kv, v);
  g->n_kv++;
}
/* Any scalar: type and its little-endian bytes. */
static inline void tg_kv_raw(TestGguf *g, const char *key, uint32_t type, const void *v, size_t n) {
  tb_str(&g->kv, key);
  tb_u32(&g->kv, type);
  tb_put(&g->kv, v, n);
  g->n_kv++;
}
static inline void tg_tensor(TestGguf *g, const char *name, uint32_t type, uint32_t n_dims,
                             const uint64_t *dims, const void *data, size_t n_bytes) {
  TestTensor *t = &g->tensors[g->n_tensors++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->n_dims = n_dims;
  for (uint32_t d = 0; d < n_dims; d++) t->dims[d] = dims[d];
  t->type = type;
  t->data = data;
  t->n_bytes = n_bytes;
}

/* Serialises the file; *size gets its length. Caller frees. */
static inline uint8_t *tg_finish(TestGguf *g, size_t *size) {
  TestBuffer b = {0};
  tb_put(&b, "GGUF", 4);
  tb_u32(&b, g->version);
  tb_u64(&b, g->n_tensors);
  tb_u64(&b, g->n_kv);
  tb_put(&b, g->kv.bytes, g->kv.size);
  uint64_t offset = 0;
  for (size_t i = 0; i < g->n_tensors; i++) {
    TestTensor *t = &g->tensors[i];
    tb_str(&b, t->name);
    tb_u32(&b, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims; d++) tb_u64(&b, t->dims[d]);
    tb_u32(&b, t->type);
    tb_u64(&b, offset);
    offset += (t->n_bytes + g->alignment - 1) / g->alignment * g->alignment;
  }
  static const uint8_t zeros[64] = {0};
  while (b.size % g->alignment) tb_put(&b, zeros, 1);
  for (size_t i = 0; i < g->n_tensors; i++) {
    tb_put(&b, g->tensors[i].data, g->tensors[i].n_bytes);
    while (b.size % g->alignment) tb_put(&b, zeros, 1);
  }
  free(g->kv.bytes);
  g->kv.bytes = NULL;
  *size = b.size;
  return b.bytes;
}

#endif
