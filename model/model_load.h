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
  char name[128];      /* tensor name in the source format */
  float **dest;        /* the ModelWeights field a 1-D tensor fills, or NULL */
  ModelMatrix *matrix; /* the ModelWeights field a 2-D tensor fills, or NULL */
  float *f32;          /* where the loader writes fp32 values (arena), or NULL: kept native */
  size_t n_dims;       /* 1 or 2 */
  uint64_t shape[2];   /* row-major, slowest first: (out_features, in_features) or (n) */
  bool optional;       /* output / lm_head (tied when absent), rope_freqs */
  bool present;        /* set by the format loader */
  const void *source;  /* the format loader's tensor handle */
} ModelWeightSlot;

/* Allocates model->weights.layers and returns the slots the configuration
 * needs (malloc'ed array in *slots). */
int model_weight_slots(Model *model, ModelFormat format, ModelWeightSlot **slots, size_t *n_slots);
/* One 64-byte-aligned fp32 arena (model->storage) for every present 1-D slot
 * and, when matrices_f32, every 2-D one; sets each such slot's f32 and its
 * *dest or *matrix (an F32 matrix). Slots left out keep f32 NULL: the format
 * loader points their matrix at the stored data. */
int model_weight_arena(Model *model, ModelWeightSlot *slots, size_t n_slots, bool matrices_f32);
/* After the loader filled every matrix: output = token_embedding when tied
 * (or when the file has no output projection). */
void model_weight_tie(Model *model);
/* Fails with OBC_EVALUE naming the tensor if values holds a NaN or infinity. */
int model_check_finite(const char *path, const char *tensor, const float *values, size_t n);
/* The same check on n elements stored in a ggml type: every f16/bf16/fp32
 * value, or every block's f16 scales (finite scales make every dequantised
 * value finite, and a non-finite one makes some value non-finite); the message
 * names the first non-finite dequantised element, as model_check_finite's. */
int model_check_finite_stored(const char *path, const char *tensor, uint32_t type, const void *data,
                              size_t n);
/* Llama-3 rope scaling as transformers computes it: per frequency the divisor
 * of theta^(-2i/head_dim) (head_dim / 2 entries). */
void model_llama3_freq_factors(const ModelConfig *config, float *factors);

/* Each reads the tokenizer too unless tokenizer is MODEL_TOKENIZER_SKIP. */
int model_load_gguf(const char *path, ModelTokenizerMode tokenizer, Model *model);
int model_load_hf(const char *folder, ModelTokenizerMode tokenizer, Model *model);

#endif
