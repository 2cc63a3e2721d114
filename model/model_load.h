/* Internals of model_load shared by its GGUF and Hugging Face halves: the list
 * of weight tensors a configuration needs ("slots", with their names in either
 * format and their expected shapes), one arena that holds them all in fp32,
 * and the Llama-3 rope frequency factors computed from a config. */
#ifndef OBC_MODEL_LOAD_H
#define OBC_MODEL_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef enum { MODEL_FORMAT_GGUF, MODEL_FORMAT_HF } ModelFormat;

typedef struct {
  char name[128];     /* tensor name in the source format */
  float **dest;       /* the ModelWeights field this tensor fills */
  size_t n_dims;      /* 1 or 2 */
  uint64_t shape[2];  /* row-major, slowest first: (out_features, in_features) or (n) */
  bool optional;      /* output / lm_head (tied when absent), rope_freqs */
  bool present;       /* set by the format loader */
  const void *source; /* the format loader's tensor handle */
} ModelWeightSlot;

/* Allocates model->weights.layers and returns the slots the configuration
 * needs (malloc'ed array in *slots). */
int model_weight_slots(Model *model, ModelFormat format, ModelWeightSlot **slots, size_t *n_slots);
/* One 64-byte-aligned arena (model->storage) for every present slot; sets each
 * slot's *dest, and the output = token_embedding alias when tied. */
int model_weight_arena(Model *model, ModelWeightSlot *slots, size_t n_slots);
/* Fails with OBC_EVALUE naming the tensor if values holds a NaN or infinity. */
int model_check_finite(const char *path, const char *tensor, const float *values, size_t n);
/* Llama-3 rope scaling as transformers computes it: per frequency the divisor
 * of theta^(-2i/head_dim) (head_dim / 2 entries). */
void model_llama3_freq_factors(const ModelConfig *config, float *factors);

int model_load_gguf(const char *path, Model *model);
int model_load_hf(const char *folder, Model *model);

#endif
