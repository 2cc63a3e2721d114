/* Loading a Hugging Face folder: config.json (model/hf_config.h), the weights
 * from model.safetensors or its sharded index, each checked for presence and
 * shape before conversion to fp32, Llama-3 rope frequency factors computed from
 * the config, and the tokenizer from tokenizer.json when the folder has one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/obc_error.h"
#include "model/hf_config.h"
#include "model/model_load.h"
#include "formats/safetensors.h"

static int match_tensors(const SafetensorsModel *st, const char *folder, Model *model,
                         ModelWeightSlot *slots, size_t n_slots) {
  for (size_t i = 0; i < n_slots; i++) {
    ModelWeightSlot *s = &slots[i];
    if (s->dest == &model->weights.rope_freq_factors) { /* computed, not stored */
      s->present = model->config.rope_scaling == OBC_ROPE_LLAMA3;
      continue;
    }
    const SafetensorsTensor *t = safetensors_find(st, s->name);
    if (!t) {
      if (s->optional) continue;
      return obc_fail(OBC_EFORMAT, "%s: tensor %s is missing from the checkpoint", folder, s->name);
    }
    int rc = safetensors_check_shape(t, s->n_dims, s->shape);
    if (rc) return rc;
    s->present = true;
    s->source = t;
  }
  return OBC_OK;
}

static int load_weights(const SafetensorsModel *st, const char *folder, Model *model) {
  ModelWeightSlot *slots;
  size_t n_slots;
  int rc = model_weight_slots(model, MODEL_FORMAT_HF, &slots, &n_slots);
  if (!rc) rc = match_tensors(st, folder, model, slots, n_slots);
  /* Always fp32 here, whatever the weights mode: safetensors hold bf16/f16/f32
   * and the runtime's stored-type paths are for GGUF files. */
  model->weights_mode = MODEL_WEIGHTS_F32;
  if (!rc) rc = model_weight_arena(model, slots, n_slots, true);
  for (size_t i = 0; !rc && i < n_slots; i++) {
    if (!slots[i].present || !slots[i].source) continue;
    const SafetensorsTensor *t = slots[i].source;
    rc = safetensors_to_f32(t, slots[i].f32);
    if (!rc) rc = model_check_finite(t->path, t->name, slots[i].f32, t->n_elements);
  }
  if (!rc) model_weight_tie(model); /* tied or no lm_head: the embedding */
  if (!rc && model->weights.rope_freq_factors)
    model_llama3_freq_factors(&model->config, model->weights.rope_freq_factors);
  free(slots);
  return rc;
}

int model_load_hf(const char *folder, ModelTokenizerMode tokenizer, Model *model) {
  int rc = hf_config_read(folder, &model->config);
  char where[4200];
  snprintf(where, sizeof where, "%s/config.json", folder);
  if (!rc) rc = model_config_validate(&model->config, where);
  SafetensorsModel *st = NULL;
  if (!rc) rc = safetensors_open_folder(folder, &st);
  if (!rc) {
    /* The checkpoint, not the config, has the last word on the vocabulary. */
    const SafetensorsTensor *embedding = safetensors_find(st, "model.embed_tokens.weight");
    if (embedding && embedding->n_dims == 2 && embedding->shape[0] != model->config.vocab_size)
      rc = obc_fail(OBC_EFORMAT,
                    "%s: tensor model.embed_tokens.weight has %llu rows but config.json says "
                    "vocab_size %zu",
                    embedding->path, (unsigned long long)embedding->shape[0],
                    model->config.vocab_size);
  }
  if (!rc) rc = load_weights(st, folder, model);
  safetensors_close(st);
  struct stat info;
  snprintf(where, sizeof where, "%s/tokenizer.json", folder);
  if (!rc && tokenizer == MODEL_TOKENIZER_LOAD && stat(where, &info) == 0)
    rc = tokenizer_from_hf(folder, &model->tokenizer);
  return rc;
}
