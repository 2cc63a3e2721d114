/* Loading a llama, qwen2 or qwen3 GGUF file: hyperparameters from the <arch>.*
 * metadata, every weight checked for presence and shape before anything is
 * read, matrices pointed into the mapping in their stored type (or dequantised
 * to fp32 under MODEL_WEIGHTS_F32), 1-D tensors copied to fp32, every value
 * checked finite, and the tokenizer from the tokenizer.ggml.* metadata.
 * llama.cpp permutes the Q/K rows of llama-arch models so that RoPE on
 * interleaved pairs reproduces Hugging Face's half-split rotation, hence
 * rope_interleaved for "llama" (qwen2 and qwen3 files are not permuted:
 * llama.cpp rotates them NEOX-style, on halves). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "formats/gguf.h"
#include "model/model_load.h"

/* "<arch>.<suffix>" as a positive size; def == 0 means required. */
static int read_size(const GgufFile *file, const char *arch, const char *suffix, size_t def,
                     size_t *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  uint64_t value;
  int rc = gguf_get_u64(file, key, &value);
  if (rc == OBC_ENOTFOUND && def) {
    *out = def;
    return OBC_OK;
  }
  if (rc) return rc;
  if (value == 0 || value > ((uint64_t)1 << 40))
    return obc_fail(OBC_EFORMAT, "%s: %s is %" PRIu64 " (expected a positive size)",
                    gguf_path(file), key, value);
  *out = (size_t)value;
  return OBC_OK;
}

static int read_double(const GgufFile *file, const char *arch, const char *suffix, double def,
                       double *out) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  int rc = gguf_get_f64(file, key, out);
  if (rc == OBC_ENOTFOUND && !isnan(def)) {
    *out = def;
    return OBC_OK;
  }
  return rc;
}

static int read_rope_scaling(const GgufFile *file, const char *arch, ModelConfig *c) {
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
  GgufString type;
  int rc = gguf_get_string(file, key, &type);
  if (rc == OBC_ENOTFOUND) return OBC_OK;
  if (rc) return rc;
  if (type.length == 4 && !memcmp(type.data, "none", 4)) return OBC_OK;
  if (type.length == 6 && !memcmp(type.data, "linear", 6)) {
    c->rope_scaling = OBC_ROPE_LINEAR;
    return read_double(file, arch, "rope.scaling.factor", NAN, &c->rope_factor);
  }
  return obc_fail(OBC_EUNSUPPORTED,
                  "%s: %s is \"%.*s\" (supported: none, linear; llama3 via rope_freqs.weight)",
                  gguf_path(file), key, (int)(type.length > 32 ? 32 : type.length), type.data);
}

static int read_config(const GgufFile *file, ModelConfig *c) {
  const char *path = gguf_path(file);
  GgufString text;
  int rc = gguf_get_string(file, "general.architecture", &text);
  if (rc) return rc;
  char name[32] = "";
  if (text.length < sizeof name) snprintf(name, sizeof name, "%.*s", (int)text.length, text.data);
  if (strlen(name) != text.length || !model_architecture_set(c, name))
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: general.architecture is \"%.*s\" (supported: " MODEL_ARCHITECTURES ")",
                    path, (int)(text.length > 32 ? 32 : text.length), text.data);
  const char *arch = c->architecture;
  /* The name shown in reports and plot titles is the file's name without
   * .gguf (e.g. "SmolLM2-135M-Instruct.Q4_1"): it says which checkpoint and
   * quantisation the user ran, where general.name is often a training-run
   * label ("Smollm2 135M 8k Lc100K Mix1 Ep2"). */
  const char *slash = strrchr(path, '/');
  snprintf(c->name, sizeof c->name, "%s", slash ? slash + 1 : path);
  size_t name_length = strlen(c->name);
  if (name_length > 5 && !strcmp(c->name + name_length - 5, ".gguf"))
    c->name[name_length - 5] = '\0';
  size_t experts = 0;
  if ((rc = read_size(file, arch, "block_count", 0, &c->n_layers)) ||
      (rc = read_size(file, arch, "embedding_length", 0, &c->dim)) ||
      (rc = read_size(file, arch, "feed_forward_length", 0, &c->ffn_dim)) ||
      (rc = read_size(file, arch, "attention.head_count", 0, &c->n_heads)) ||
      (rc = read_size(file, arch, "attention.head_count_kv", c->n_heads, &c->n_kv_heads)) ||
      (rc = read_size(file, arch, "attention.key_length",
                      c->dim / c->n_heads ? c->dim / c->n_heads : 1, &c->head_dim)) ||
      (rc = read_size(file, arch, "context_length", 0, &c->context_length)) ||
      (rc = read_size(file, arch, "expert_count", 1, &experts)) ||
      (rc = read_double(file, arch, "rope.freq_base", 10000.0, &c->rope_theta)) ||
      (rc = read_double(file, arch, "attention.layer_norm_rms_epsilon", NAN, &c->norm_eps)) ||
      (rc = read_rope_scaling(file, arch, c)))
    return rc;
  if (experts > 1)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: %s.expert_count is %zu (mixture-of-experts models are not supported)",
                    path, arch, experts);
  size_t value_length = 0;
  if ((rc = read_size(file, arch, "attention.value_length", c->head_dim, &value_length))) return rc;
  if (value_length != c->head_dim)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: %s.attention.value_length %zu differs from key_length %zu", path, arch,
                    value_length, c->head_dim);
  size_t rope_dims = 0; /* partial rotary embedding would need its own code path */
  if ((rc = read_size(file, arch, "rope.dimension_count", c->head_dim, &rope_dims))) return rc;
  if (rope_dims != c->head_dim)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: %s.rope.dimension_count %zu differs from the head dimension %zu "
                    "(partial rotary embeddings are not supported)",
                    path, arch, rope_dims, c->head_dim);
  char key[128]; /* Mistral-style sliding-window attention */
  snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
  uint64_t window = 0;
  rc = gguf_get_u64(file, key, &window);
  if (rc && rc != OBC_ENOTFOUND) return rc;
  if (!rc && window > 0)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: %s is %" PRIu64
                    " (sliding-window attention is not supported; "
                    "supported: " MODEL_ARCHITECTURES " with full attention)",
                    path, key, window);
  const GgufTensor *embedding = gguf_find_tensor(file, "token_embd.weight");
  if (!embedding || embedding->n_dims != 2)
    return obc_fail(OBC_EFORMAT, "%s: tensor token_embd.weight is %s", path,
                    embedding ? "not a matrix" : "missing");
  c->vocab_size = (size_t)embedding->dims[1];
  c->rope_interleaved = !strcmp(arch, "llama"); /* qwen2 and qwen3 files are not permuted */
  return OBC_OK;
}

/* Biases the runtime has no place for: refused rather than silently dropped. */
static int refuse_extra_biases(const GgufFile *file, const ModelConfig *c) {
  static const char *const names[] = {"blk.0.attn_output.bias", "blk.0.ffn_gate.bias",
                                      "blk.0.ffn_up.bias", "blk.0.ffn_down.bias",
                                      "blk.0.attn_q.bias"};
  size_t n = sizeof names / sizeof names[0] - (c->qkv_bias ? 1 : 0);
  for (size_t i = 0; i < n; i++)
    if (gguf_find_tensor(file, names[i]))
      return obc_fail(OBC_EUNSUPPORTED,
                      "%s: tensor %s: biases there are not supported for %s models",
                      gguf_path(file), names[i], c->architecture);
  return OBC_OK;
}

/* Finds every slot's tensor and checks its shape (GGUF dims are fastest first,
 * the reverse of the slots' row-major shapes). */
static int match_tensors(const GgufFile *file, Model *model, ModelWeightSlot *slots,
                         size_t n_slots) {
  for (size_t i = 0; i < n_slots; i++) {
    ModelWeightSlot *s = &slots[i];
    const GgufTensor *t = gguf_find_tensor(file, s->name);
    if (!t) {
      if (s->optional) continue;
      return obc_fail(OBC_EFORMAT, "%s: tensor %s is missing (incomplete or not a %s model)",
                      gguf_path(file), s->name, model->config.architecture);
    }
    uint64_t dims[2] = {s->n_dims == 2 ? s->shape[1] : s->shape[0], s->shape[0]};
    int rc = gguf_tensor_check_shape(file, t, (uint32_t)s->n_dims, dims);
    if (rc) return rc;
    s->present = true;
    s->source = t;
    if (gguf_type_block_size(t->type) == 0 || !t->data)
      return obc_fail(
          OBC_EUNSUPPORTED,
          "%s: tensor %s has unsupported type %" PRIu32
          " (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
          gguf_path(file), t->name, t->type);
    if (s->dest == &model->weights.rope_freq_factors && model->config.rope_scaling == OBC_ROPE_NONE)
      model->config.rope_scaling = OBC_ROPE_LLAMA3; /* factors only; config fields stay 0 */
  }
  return OBC_OK;
}

static int load_weights(const GgufFile *file, Model *model) {
  ModelWeightSlot *slots;
  size_t n_slots;
  int rc = model_weight_slots(model, MODEL_FORMAT_GGUF, &slots, &n_slots);
  if (!rc) rc = refuse_extra_biases(file, &model->config);
  if (!rc) rc = match_tensors(file, model, slots, n_slots);
  bool f32 = model->weights_mode == MODEL_WEIGHTS_F32;
  if (!rc) rc = model_weight_arena(model, slots, n_slots, f32);
  for (size_t i = 0; !rc && i < n_slots; i++) {
    ModelWeightSlot *s = &slots[i];
    if (!s->present) continue;
    const GgufTensor *t = s->source;
    if (s->f32) { /* fp32 copy */
      rc = gguf_tensor_to_f32(file, t, s->f32);
      if (!rc) rc = model_check_finite(gguf_path(file), t->name, s->f32, t->n_elements);
      continue;
    }
    size_t rows = (size_t)s->shape[0];
    *s->matrix = (ModelMatrix){t->type, rows, (size_t)s->shape[1], t->n_bytes / rows, t->data};
    rc = model_check_finite_stored(gguf_path(file), t->name, t->type, t->data, t->n_elements);
  }
  if (!rc) model_weight_tie(model);                        /* no output.weight: tied */
  const float *factors = model->weights.rope_freq_factors; /* divisors of the RoPE frequencies */
  for (size_t i = 0; !rc && factors && i < model->config.head_dim / 2; i++)
    if (!(factors[i] > 0))
      rc = obc_fail(OBC_EVALUE,
                    "%s: tensor rope_freqs.weight holds %g at %zu (expected positive divisors)",
                    gguf_path(file), (double)factors[i], i);
  free(slots);
  return rc;
}

int model_load_gguf(const char *path, ModelTokenizerMode tokenizer, Model *model) {
  GgufFile *file;
  int rc = gguf_open(path, &file);
  if (rc) return rc;
  rc = read_config(file, &model->config);
  if (!rc) rc = model_config_validate(&model->config, path);
  if (!rc) rc = load_weights(file, model);
  GgufString tokenizer_model;
  if (!rc && tokenizer == MODEL_TOKENIZER_LOAD &&
      gguf_get_string(file, "tokenizer.ggml.model", &tokenizer_model) == 0)
    rc = tokenizer_from_gguf(file, path, &model->tokenizer);
  /* Native matrices point into the mapping: it lives as long as the model. */
  if (!rc && model->weights_mode == MODEL_WEIGHTS_NATIVE)
    model->mapping = file;
  else
    gguf_close(file);
  return rc;
}
