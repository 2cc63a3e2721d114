/* A Llama-family model in memory: configuration, fp32 weights and tokenizer.
 *
 * model_load() takes a GGUF file (formats/gguf.h) or a Hugging Face folder
 * (config.json + safetensors, formats/safetensors.h); quantised weights are
 * dequantised once, here. Matrices are row-major (out_features, in_features),
 * the layout of both formats. The forward pass lives in runtime/runtime.h. */
#ifndef OBC_MODEL_H
#define OBC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef enum { OBC_ROPE_NONE = 0, OBC_ROPE_LLAMA3, OBC_ROPE_LINEAR } ObcRopeScaling;

typedef struct {
  char name[256];        /* GGUF file name without .gguf / HF folder name */
  char architecture[32]; /* "llama" or "qwen2" */
  size_t n_layers;
  size_t dim;     /* hidden size */
  size_t ffn_dim; /* intermediate size */
  size_t n_heads;
  size_t n_kv_heads;
  size_t head_dim;
  size_t vocab_size;
  size_t context_length; /* max positions the model was trained for */
  double norm_eps;       /* RMSNorm epsilon */
  double rope_theta;
  ObcRopeScaling rope_scaling;
  double rope_factor;
  double rope_low_freq_factor;
  double rope_high_freq_factor;
  size_t rope_original_context;
  /* true: rotate interleaved pairs (2i, 2i+1), the layout of llama-arch GGUF
   * files (llama.cpp permutes the Q/K rows); false: rotate halves (i, i+d/2),
   * the Hugging Face layout. Same attention either way; cached K differ by a
   * fixed permutation of the head dimension. */
  bool rope_interleaved;
  bool tied_embeddings;
  bool qkv_bias; /* Qwen2 */
} ModelConfig;

typedef struct {
  float *attn_norm; /* (dim) */
  float *wq;        /* (n_heads * head_dim, dim) */
  float *wk;        /* (n_kv_heads * head_dim, dim) */
  float *wv;        /* (n_kv_heads * head_dim, dim) */
  float *bq;        /* (n_heads * head_dim) or NULL */
  float *bk;        /* (n_kv_heads * head_dim) or NULL */
  float *bv;        /* (n_kv_heads * head_dim) or NULL */
  float *wo;        /* (dim, n_heads * head_dim) */
  float *ffn_norm;  /* (dim) */
  float *w_gate;    /* (ffn_dim, dim) */
  float *w_up;      /* (ffn_dim, dim) */
  float *w_down;    /* (dim, ffn_dim) */
} ModelLayerWeights;

typedef struct {
  float *token_embedding;    /* (vocab_size, dim) */
  float *output_norm;        /* (dim) */
  float *output;             /* (vocab_size, dim); == token_embedding when tied */
  ModelLayerWeights *layers; /* (n_layers) */
  /* Per-frequency divisors of RoPE (head_dim / 2), or NULL: GGUF files store
   * Llama-3 rope scaling as the tensor rope_freqs.weight; for Hugging Face
   * folders model_load computes them from config.json's rope_scaling. */
  float *rope_freq_factors;
} ModelWeights;

typedef struct {
  char path[4096]; /* what was loaded */
  ModelConfig config;
  ModelWeights weights;
  Tokenizer *tokenizer; /* NULL when the source has none */
  void *storage;        /* owned allocations behind the weight pointers */
} Model;

/* The embedded default model (models/SmolLM2-135M-Instruct.Q4_1.gguf under the
 * source tree, or $OBC_MODEL when set). */
const char *model_default_path(void);
/* Loads a GGUF file or a Hugging Face folder; path NULL = the default. */
int model_load(const char *path, Model **out);
void model_free(Model *model);
/* RoPE inverse frequencies (head_dim / 2): theta^(-2i/head_dim), divided by
 * rope_freq_factors[i] when present. Both runtimes use this. */
void model_rope_inv_freq(const Model *model, double *inv_freq);
/* Checks the configuration is one the runtime supports (positive sizes,
 * n_heads % n_kv_heads == 0, even head_dim, ...). */
int model_config_validate(const ModelConfig *config, const char *source);

#endif
