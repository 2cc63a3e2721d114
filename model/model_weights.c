/* The weight tensors a configuration needs, named in GGUF or Hugging Face
 * convention, and the single fp32 arena they are dequantised into
 * (model/model_load.h). Keeping the list in one place means both loaders check
 * exactly the same shapes. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "model/model_load.h"

typedef struct {
  ModelWeightSlot *slots;
  size_t n;
  ModelFormat format;
} SlotList;

static void add(SlotList *list, const char *name, float **dest, uint64_t rows, uint64_t cols,
                bool optional) {
  ModelWeightSlot *s = &list->slots[list->n++];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->dest = dest;
  s->n_dims = cols ? 2 : 1;
  s->shape[0] = rows;
  s->shape[1] = cols;
  s->optional = optional;
}

/* A per-layer tensor: GGUF "blk.N.<gguf>.weight|bias", HF "model.layers.N.<hf>.weight|bias". */
static void add_layer(SlotList *list, size_t layer, const char *gguf, const char *hf,
                      const char *suffix, float **dest, uint64_t rows, uint64_t cols) {
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
  SlotList list = {obc_calloc(4 + 12 * c->n_layers, sizeof *list.slots, "the weight list"), 0,
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
    add_layer(&list, l, "attn_output", "self_attn.o_proj", "weight", &lw->wo, dim, q_dim);
    add_layer(&list, l, "ffn_norm", "post_attention_layernorm", "weight", &lw->ffn_norm, dim, 0);
    add_layer(&list, l, "ffn_gate", "mlp.gate_proj", "weight", &lw->w_gate, ffn, dim);
    add_layer(&list, l, "ffn_up", "mlp.up_proj", "weight", &lw->w_up, ffn, dim);
    add_layer(&list, l, "ffn_down", "mlp.down_proj", "weight", &lw->w_down, dim, ffn);
  }
  *slots = list.slots;
  *n_slots = list.n;
  return 0;
}

static size_t slot_elements(const ModelWeightSlot *s) {
  return (size_t)s->shape[0] * (s->n_dims == 2 ? (size_t)s->shape[1] : 1);
}

int model_weight_arena(Model *model, ModelWeightSlot *slots, size_t n_slots) {
  const size_t align = 16; /* floats: 64 bytes */
  size_t total = 0;
  for (size_t i = 0; i < n_slots; i++) /* tied: the output projection is the embedding */
    if (slots[i].dest == &model->weights.output && model->config.tied_embeddings)
      slots[i].present = false;
  for (size_t i = 0; i < n_slots; i++)
    if (slots[i].present) total += (slot_elements(&slots[i]) + align - 1) / align * align;
  void *arena = NULL;
  if (posix_memalign(&arena, 64, (total ? total : 1) * sizeof(float)))
    return obc_fail(OBC_ENOMEM, "%s: out of memory for %zu MB of fp32 weights", model->path,
                    total * sizeof(float) >> 20);
  model->storage = arena;
  float *next = arena;
  for (size_t i = 0; i < n_slots; i++) {
    if (!slots[i].present) continue;
    *slots[i].dest = next;
    next += (slot_elements(&slots[i]) + align - 1) / align * align;
  }
  if (!model->weights.output) { /* absent output projection: tied */
    model->config.tied_embeddings = true;
    model->weights.output = model->weights.token_embedding;
  }
  return 0;
}

int model_check_finite(const char *path, const char *tensor, const float *values, size_t n) {
  size_t bad = n;
#pragma omp parallel for schedule(static) reduction(min : bad) if (n >= (1u << 20))
  for (size_t i = 0; i < n; i++)
    if (!isfinite(values[i]) && i < bad) bad = i;
  if (bad == n) return 0;
  return obc_fail(OBC_EVALUE,
                  "%s: tensor %s holds a non-finite value (%g) at element %zu (corrupt weights?)",
                  path, tensor, (double)values[bad], bad);
}
