/* A tiny llama, qwen2 (q/k/v biases) or qwen3 (per-head Q/K norms) model as a
 * GGUF file (2 layers, dim 16, 4 query and 2 KV heads of dim 4, vocabulary 40,
 * F32 weights with deterministic values tiny_value(tensor index, element)),
 * with optional damage: a tensor left out, reshaped, poisoned with a NaN or
 * given an unknown type, an extra tensor, a rope.dimension_count, an
 * attention.sliding_window; tiny_gguf_model writes the plain llama one
 * (tiny_gguf_model_of: of another architecture) and loads it. Test code. */
#ifndef OBC_TEST_TINY_GGUF_H
#define OBC_TEST_TINY_GGUF_H

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "model/model.h"
#include "tests/gguf_builder.h"
#include "tests/test_env.h"

typedef struct {
  const char *arch;    /* general.architecture */
  const char *skip;    /* tensor left out, or NULL */
  const char *reshape; /* tensor given the wrong shape, or NULL */
  const char *poison;  /* tensor with a NaN, or NULL */
  const char *retype;  /* tensor given type 99, or NULL */
  uint64_t reshape_dims[2];
  uint32_t rope_dims;        /* <arch>.rope.dimension_count when non-zero */
  const char *extra;         /* an extra 1-D tensor, or NULL */
  size_t extra_length;       /* its length (0: TINY_DIM) */
  const float *extra_values; /* its values (NULL: tiny_value) */
  bool untied;               /* with output.weight (else tied to token_embd) */
  uint32_t sliding_window;   /* <arch>.attention.sliding_window when non-zero */
} TinySpec;

enum {
  TINY_DIM = 16,
  TINY_FFN = 32,
  TINY_HEADS = 4,
  TINY_KV = 2,
  TINY_HD = 4,
  TINY_VOCAB = 40,
  TINY_LAYERS = 2
};

static float tiny_value(size_t tensor, size_t i) {
  return 0.01f * (float)((int)((i * 7 + tensor * 13) % 23) - 11);
}

/* Writes the tiny model to path. */
static void tiny_gguf_write(const TinySpec *spec, const char *path) {
  static float data[TB_MAX_TENSORS][TINY_VOCAB * TINY_DIM];
  TestGguf g;
  tg_init(&g, 3);
  const char *arch = spec->arch ? spec->arch : "llama";
  char key[128];
  tg_kv_str(&g, "general.architecture", arch);
  tg_kv_str(&g, "general.name", "tiny");
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
  tg_kv_u32(&g, KEY("block_count"), TINY_LAYERS);
  tg_kv_u32(&g, KEY("context_length"), 64);
  tg_kv_u32(&g, KEY("embedding_length"), TINY_DIM);
  tg_kv_u32(&g, KEY("feed_forward_length"), TINY_FFN);
  tg_kv_u32(&g, KEY("attention.head_count"), TINY_HEADS);
  tg_kv_u32(&g, KEY("attention.head_count_kv"), TINY_KV);
  tg_kv_f32(&g, KEY("rope.freq_base"), 10000.0f);
  tg_kv_f32(&g, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
  if (spec->rope_dims) tg_kv_u32(&g, KEY("rope.dimension_count"), spec->rope_dims);
  if (spec->sliding_window) tg_kv_u32(&g, KEY("attention.sliding_window"), spec->sliding_window);
#undef KEY
  struct {
    char name[64];
    uint64_t d0, d1;
  } list[TB_MAX_TENSORS];
  size_t n = 0;
#define T(nm, a, b) \
  (snprintf(list[n].name, sizeof list[n].name, "%s", nm), list[n].d0 = (a), list[n].d1 = (b), n++)
  T("token_embd.weight", TINY_DIM, TINY_VOCAB);
  T("output_norm.weight", TINY_DIM, 0);
  if (spec->untied) T("output.weight", TINY_DIM, TINY_VOCAB);
  int qwen = !strcmp(arch, "qwen2"), qwen3 = !strcmp(arch, "qwen3");
  for (int l = 0; l < TINY_LAYERS; l++) {
    static const struct {
      const char *what;
      uint64_t d0, d1;
    } per_layer[] = {
        {"attn_norm.weight", TINY_DIM, 0},
        {"attn_q.weight", TINY_DIM, TINY_HEADS * TINY_HD},
        {"attn_k.weight", TINY_DIM, TINY_KV * TINY_HD},
        {"attn_v.weight", TINY_DIM, TINY_KV * TINY_HD},
        {"attn_output.weight", TINY_HEADS * TINY_HD, TINY_DIM},
        {"ffn_norm.weight", TINY_DIM, 0},
        {"ffn_gate.weight", TINY_DIM, TINY_FFN},
        {"ffn_up.weight", TINY_DIM, TINY_FFN},
        {"ffn_down.weight", TINY_FFN, TINY_DIM},
    };
    for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++) {
      char name[64];
      snprintf(name, sizeof name, "blk.%d.%s", l, per_layer[k].what);
      T(name, per_layer[k].d0, per_layer[k].d1);
    }
    if (qwen) {
      char name[64];
      snprintf(name, sizeof name, "blk.%d.attn_q.bias", l);
      T(name, TINY_HEADS * TINY_HD, 0);
      snprintf(name, sizeof name, "blk.%d.attn_k.bias", l);
      T(name, TINY_KV * TINY_HD, 0);
      snprintf(name, sizeof name, "blk.%d.attn_v.bias", l);
      T(name, TINY_KV * TINY_HD, 0);
    }
    if (qwen3) {
      char name[64];
      snprintf(name, sizeof name, "blk.%d.attn_q_norm.weight", l);
      T(name, TINY_HD, 0);
      snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", l);
      T(name, TINY_HD, 0);
    }
  }
  if (spec->extra) T(spec->extra, spec->extra_length ? spec->extra_length : TINY_DIM, 0);
#undef T
  for (size_t t = 0; t < n; t++) {
    if (spec->skip && !strcmp(spec->skip, list[t].name)) continue;
    uint64_t dims[2] = {list[t].d0, list[t].d1};
    if (spec->reshape && !strcmp(spec->reshape, list[t].name)) {
      dims[0] = spec->reshape_dims[0];
      dims[1] = spec->reshape_dims[1];
    }
    size_t count = (size_t)dims[0] * (dims[1] ? (size_t)dims[1] : 1);
    ck_assert_uint_le(count, TINY_VOCAB * TINY_DIM);
    bool extra = spec->extra && !strcmp(spec->extra, list[t].name) && spec->extra_values;
    for (size_t i = 0; i < count; i++)
      data[t][i] = extra ? spec->extra_values[i] : tiny_value(t, i);
    if (spec->poison && !strcmp(spec->poison, list[t].name)) data[t][count / 2] = NAN;
    uint32_t type =
        spec->retype && !strcmp(spec->retype, list[t].name) ? 99u : (uint32_t)GGML_TYPE_F32;
    tg_tensor(&g, list[t].name, type, dims[1] ? 2 : 1, dims, data[t], count * sizeof(float));
  }
  size_t size = 0;
  uint8_t *bytes = tg_finish(&g, &size);
  FILE *fp = fopen(path, "wb");
  ck_assert_ptr_nonnull(fp);
  ck_assert_uint_eq(fwrite(bytes, 1, size, fp), size);
  fclose(fp);
  free(bytes);
}

/* The plain tiny llama model (no damage, tied embeddings), written to
 * file_name in the suite's scratch folder (tests/test_env.h) and loaded;
 * fails the current test when it does not load. */
static inline Model *tiny_gguf_model_of(const char *file_name, const char *arch) {
  char path[4096];
  test_scratch_file(file_name, path, sizeof path);
  TinySpec spec = {.arch = arch};
  tiny_gguf_write(&spec, path);
  Model *model = NULL;
  ck_assert_int_eq(model_load(path, &model), 0);
  return model;
}

static inline Model *tiny_gguf_model(const char *file_name) {
  return tiny_gguf_model_of(file_name, "llama");
}

#endif
