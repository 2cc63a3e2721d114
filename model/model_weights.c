/* The weight tensors a configuration needs, named in GGUF or Hugging Face
 * convention, the single fp32 arena that holds the 1-D ones (and every matrix
 * under MODEL_WEIGHTS_F32), and the finiteness checks of values as stored
 * (model/model_load.h). Keeping the list in one place means both loaders check
 * exactly the same shapes. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "formats/float16.h"
#include "formats/gguf.h"
#include "model/model_load.h"

typedef struct {
  ModelWeightSlot *slots;
  size_t n;
  ModelFormat format;
} SlotList;

/* dest is a float ** (1-D, cols == 0) or a ModelMatrix * (2-D). */
static void add(SlotList *list, const char *name, void *dest, uint64_t rows, uint64_t cols,
                bool optional) {
  ModelWeightSlot *s = &list->slots[list->n++];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  if (cols)
    s->matrix = dest;
  else
    s->dest = dest;
  s->n_dims = cols ? 2 : 1;
  s->shape[0] = rows;
  s->shape[1] = cols;
  s->optional = optional;
}

/* A per-layer tensor: GGUF "blk.N.<gguf>.weight|bias", HF "model.layers.N.<hf>.weight|bias". */
static void add_layer(SlotList *list, size_t layer, const char *gguf, const char *hf,
                      const char *suffix, void *dest, uint64_t rows, uint64_t cols) {
  char name[128];
  if (list->format == MODEL_FORMAT_GGUF)
    snprintf(name, sizeof name, "blk.%zu.%s.%s", layer, gguf, suffix);
  else
    snprintf(name, sizeof name, "model.layers.%zu.%s.%s", layer, hf, suffix);
  add(list, name, dest, rows, cols, false);
}

int model_weight_slots(Model *model, ModelFormat format, ModelWeightSlot **slots, size_t *n_slots) {
  const ModelConfig *c = &model->config;
  ModelWeights *w = &model->weights;
  *slots = NULL;
  *n_slots = 0;
  w->layers = obc_calloc(c->n_layers, sizeof *w->layers, "the layer weight table");
  SlotList list = {obc_calloc(4 + 14 * c->n_layers, sizeof *list.slots, "the weight list"), 0,
                   format};
  if (!w->layers || !list.slots) {
    free(list.slots);
    return OBC_ENOMEM;
  }
  bool gguf = format == MODEL_FORMAT_GGUF;
  uint64_t dim = c->dim, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  uint64_t ffn = c->ffn_dim, vocab = c->vocab_size;
  add(&list, gguf ? "token_embd.weight" : "model.embed_tokens.weight", &w->token_embedding, vocab,
      dim, false);
  add(&list, gguf ? "output_norm.weight" : "model.norm.weight", &w->output_norm, dim, 0, false);
  add(&list, gguf ? "output.weight" : "lm_head.weight", &w->output, vocab, dim, true);
  /* GGUF only; a Hugging Face loader fills it from config.json. */
  add(&list, "rope_freqs.weight", &w->rope_freq_factors, c->head_dim / 2, 0, true);
  for (size_t l = 0; l < c->n_layers; l++) {
    ModelLayerWeights *lw = &w->layers[l];
    add_layer(&list, l, "attn_norm", "input_layernorm", "weight", &lw->attn_norm, dim, 0);
    add_layer(&list, l, "attn_q", "self_attn.q_proj", "weight", &lw->wq, q_dim, dim);
    add_layer(&list, l, "attn_k", "self_attn.k_proj", "weight", &lw->wk, kv_dim, dim);
    add_layer(&list, l, "attn_v", "self_attn.v_proj", "weight", &lw->wv, kv_dim, dim);
    if (c->qkv_bias) {
      add_layer(&list, l, "attn_q", "self_attn.q_proj", "bias", &lw->bq, q_dim, 0);
      add_layer(&list, l, "attn_k", "self_attn.k_proj", "bias", &lw->bk, kv_dim, 0);
      add_layer(&list, l, "attn_v", "self_attn.v_proj", "bias", &lw->bv, kv_dim, 0);
    }
    if (c->qk_norm) {
      add_layer(&list, l, "attn_q_norm", "self_attn.q_norm", "weight", &lw->q_norm, c->head_dim, 0);
      add_layer(&list, l, "attn_k_norm", "self_attn.k_norm", "weight", &lw->k_norm, c->head_dim, 0);
    }
    add_layer(&list, l, "attn_output", "self_attn.o_proj", "weight", &lw->wo, dim, q_dim);
    add_layer(&list, l, "ffn_norm", "post_attention_layernorm", "weight", &lw->ffn_norm, dim, 0);
    add_layer(&list, l, "ffn_gate", "mlp.gate_proj", "weight", &lw->w_gate, ffn, dim);
    add_layer(&list, l, "ffn_up", "mlp.up_proj", "weight", &lw->w_up, ffn, dim);
    add_layer(&list, l, "ffn_down", "mlp.down_proj", "weight", &lw->w_down, dim, ffn);
  }
  *slots = list.slots;
  *n_slots = list.n;
  return OBC_OK;
}

static size_t slot_elements(const ModelWeightSlot *s) {
  return (size_t)s->shape[0] * (s->n_dims == 2 ? (size_t)s->shape[1] : 1);
}

int model_weight_arena(Model *model, ModelWeightSlot *slots, size_t n_slots, bool matrices_f32) {
  const size_t align = 16; /* floats: 64 bytes */
  size_t total = 0;
  for (size_t i = 0; i < n_slots; i++) /* tied: the output projection is the embedding */
    if (slots[i].matrix == &model->weights.output && model->config.tied_embeddings)
      slots[i].present = false;
  for (size_t i = 0; i < n_slots; i++)
    if (slots[i].present && (slots[i].dest || matrices_f32))
      total += (slot_elements(&slots[i]) + align - 1) / align * align;
  void *arena = NULL;
  if (posix_memalign(&arena, 64, (total ? total : 1) * sizeof(float)))
    return obc_fail(OBC_ENOMEM, "%s: out of memory for %zu MB of fp32 weights", model->path,
                    total * sizeof(float) >> 20);
  model->storage = arena;
  float *next = arena;
  for (size_t i = 0; i < n_slots; i++) {
    ModelWeightSlot *s = &slots[i];
    if (!s->present || !(s->dest || matrices_f32)) continue;
    s->f32 = next;
    if (s->dest)
      *s->dest = next;
    else
      *s->matrix = model_matrix_f32(next, (size_t)s->shape[0], (size_t)s->shape[1]);
    next += (slot_elements(s) + align - 1) / align * align;
  }
  return OBC_OK;
}

void model_weight_tie(Model *model) {
  if (model->config.tied_embeddings || !model->weights.output.data) {
    model->config.tied_embeddings = true; /* absent output projection: tied */
    model->weights.output = model->weights.token_embedding;
  }
}

int model_check_finite(const char *path, const char *tensor, const float *values, size_t n) {
  size_t bad = n;
#pragma omp parallel for schedule(static) reduction(min : bad) if (n >= (1u << 20))
  for (size_t i = 0; i < n; i++)
    if (!isfinite(values[i]) && i < bad) bad = i;
  if (bad == n) return OBC_OK;
  return obc_fail(OBC_EVALUE,
                  "%s: tensor %s holds a non-finite value (%g) at element %zu (corrupt weights?)",
                  path, tensor, (double)values[bad], bad);
}

/* Byte offsets of the f16 scales in a block of each quantised type
 * (formats/dequant.c); -1 ends the list. */
static const int *scale_offsets(uint32_t type) {
  static const int d[] = {0, -1}, dm[] = {0, 2, -1}, q6_k[] = {208, -1};
  switch (type) {
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q8_0: return d;
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K: return dm;
    case GGML_TYPE_Q6_K: return q6_k;
    default: return NULL;
  }
}

/* Whether unit i (an element of F16/BF16, a block of a quantised type) is finite. */
static bool unit_finite(uint32_t type, const uint8_t *data, size_t i, size_t block_bytes,
                        const int *offsets) {
  const uint8_t *unit = data + i * block_bytes;
  if (type == GGML_TYPE_BF16) return (float16_read_u16(unit) & 0x7F80u) != 0x7F80u;
  if (!offsets) return (float16_read_u16(unit) & 0x7C00u) != 0x7C00u; /* F16 */
  for (const int *o = offsets; *o >= 0; o++)
    if ((float16_read_u16(unit + *o) & 0x7C00u) == 0x7C00u) return false;
  return true;
}

int model_check_finite_stored(const char *path, const char *tensor, uint32_t type, const void *data,
                              size_t n) {
  if (type == GGML_TYPE_F32) return model_check_finite(path, tensor, data, n);
  size_t block = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  const int *offsets = scale_offsets(type);
  if (!block || (!offsets && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16))
    return obc_fail(OBC_EUNSUPPORTED, "%s: tensor %s has unsupported type %u", path, tensor,
                    (unsigned)type);
  size_t units = n / block, bad = units;
#pragma omp parallel for schedule(static) reduction(min : bad) if (units >= (1u << 16))
  for (size_t i = 0; i < units; i++)
    if (!unit_finite(type, data, i, block_bytes, offsets) && i < bad) bad = i;
  if (bad == units) return OBC_OK;
  float values[256]; /* the largest block */
  dequant_gguf(type, (const uint8_t *)data + bad * block_bytes, values, block);
  size_t j = 0;
  while (j + 1 < block && isfinite(values[j])) j++;
  return obc_fail(OBC_EVALUE,
                  "%s: tensor %s holds a non-finite value (%g) at element %zu (corrupt weights?)",
                  path, tensor, (double)values[j], bad * block + j);
}

size_t model_matrix_bytes(const Model *model) {
  const ModelWeights *w = &model->weights;
  size_t total = w->token_embedding.rows * w->token_embedding.row_bytes;
  if (w->output.data != w->token_embedding.data) total += w->output.rows * w->output.row_bytes;
  for (size_t l = 0; l < model->config.n_layers; l++) {
    const ModelLayerWeights *lw = &w->layers[l];
    const ModelMatrix *m[] = {&lw->wq,     &lw->wk,   &lw->wv,    &lw->wo,
                              &lw->w_gate, &lw->w_up, &lw->w_down};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) total += m[i]->rows * m[i]->row_bytes;
  }
  return total;
}

static void count_type(uint32_t type, uint32_t *types, size_t *counts, size_t *n_types) {
  for (size_t i = 0; i < *n_types; i++)
    if (types[i] == type) {
      counts[i]++;
      return;
    }
  if (*n_types < 16) {
    types[*n_types] = type;
    counts[(*n_types)++] = 1;
  }
}

void model_weights_describe(const Model *model, char *text, size_t size) {
  const ModelWeights *w = &model->weights;
  uint32_t types[16];
  size_t counts[16], n_types = 0;
  count_type(w->token_embedding.type, types, counts, &n_types);
  if (w->output.data != w->token_embedding.data)
    count_type(w->output.type, types, counts, &n_types);
  for (size_t l = 0; l < model->config.n_layers; l++) {
    const ModelLayerWeights *lw = &w->layers[l];
    const ModelMatrix *m[] = {&lw->wq,     &lw->wk,   &lw->wv,    &lw->wo,
                              &lw->w_gate, &lw->w_up, &lw->w_down};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
      count_type(m[i]->type, types, counts, &n_types);
  }
  int used = snprintf(text, size, "%s (", model_weights_mode_name(model->weights_mode));
  for (size_t i = 0; i < n_types && used >= 0 && (size_t)used < size; i++)
    used += snprintf(text + used, size - (size_t)used, "%s%s x %zu", i ? ", " : "",
                     gguf_type_name(types[i]), counts[i]);
  if (used >= 0 && (size_t)used < size)
    snprintf(text + used, size - (size_t)used, "; %.1f MB)",
             (double)model_matrix_bytes(model) / 1e6);
}

int model_matrix_row_f32(const ModelMatrix *m, size_t r, float *out) {
  const char *data = (const char *)m->data + r * m->row_bytes;
  if (m->type == MODEL_MATRIX_F32) {
    memcpy(out, data, m->cols * sizeof *out);
    return OBC_OK;
  }
  return dequant_gguf(m->type, data, out, m->cols);
}
