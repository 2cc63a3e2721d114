/* A Llama-family model in memory: configuration, weights and tokenizer.
 *
 * model_load() takes a GGUF file (formats/gguf.h) or a Hugging Face folder
 * (config.json + safetensors, formats/safetensors.h). Weight matrices are
 * row-major (out_features, in_features), the layout of both formats, and by
 * default stay in the GGUF file's stored type, pointing into the file's
 * mapping (MODEL_WEIGHTS_NATIVE); MODEL_WEIGHTS_F32 dequantises them once at
 * load, the reference path (docs/SCIENCE.md, "Stored-type weights"). 1-D
 * tensors (norms, biases, rope factors) are always fp32 copies. The forward
 * pass lives in runtime/runtime.h. */
#ifndef OBC_MODEL_H
#define OBC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

typedef enum { OBC_ROPE_NONE = 0, OBC_ROPE_LLAMA3, OBC_ROPE_LINEAR } ObcRopeScaling;

typedef struct {
  char name[256];        /* GGUF file name without .gguf / HF folder name */
  char architecture[32]; /* "llama", "qwen2" or "qwen3" */
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
  /* Qwen3: RMSNorm of every query and key head (weights of head_dim, shared
   * by the heads, epsilon norm_eps) after the projections and before RoPE. */
  bool qk_norm;
} ModelConfig;

/* A weight matrix (rows, cols) in a ggml type (GgufType of formats/gguf.h:
 * GGML_TYPE_F32 = 0, or F16, BF16, Q8_0, Q4_0, ...): row r starts at
 * (const char *)data + r * row_bytes; cols is a multiple of the type's block
 * size. data points into the GGUF mapping or into the model's fp32 arena. */
typedef struct {
  uint32_t type;
  size_t rows, cols, row_bytes;
  const void *data;
} ModelMatrix;

enum { MODEL_MATRIX_F32 = 0 }; /* GGML_TYPE_F32 */

/* Row r of m as fp32 into out (m->cols), dequantised exactly from its stored
 * type (formats/gguf.h dequant_gguf). */
int model_matrix_row_f32(const ModelMatrix *m, size_t r, float *out);

/* An fp32 matrix over caller-owned values (tests, hand-built models). */
static inline ModelMatrix model_matrix_f32(const float *data, size_t rows, size_t cols) {
  ModelMatrix m = {MODEL_MATRIX_F32, rows, cols, cols * sizeof(float), data};
  return m;
}

typedef struct {
  float *attn_norm;   /* (dim) */
  ModelMatrix wq;     /* (n_heads * head_dim, dim) */
  ModelMatrix wk;     /* (n_kv_heads * head_dim, dim) */
  ModelMatrix wv;     /* (n_kv_heads * head_dim, dim) */
  float *bq;          /* (n_heads * head_dim) or NULL */
  float *bk;          /* (n_kv_heads * head_dim) or NULL */
  float *bv;          /* (n_kv_heads * head_dim) or NULL */
  float *q_norm;      /* (head_dim) or NULL: per-head RMSNorm of Q, before RoPE */
  float *k_norm;      /* (head_dim) or NULL: per-head RMSNorm of K, before RoPE */
  ModelMatrix wo;     /* (dim, n_heads * head_dim) */
  float *ffn_norm;    /* (dim) */
  ModelMatrix w_gate; /* (ffn_dim, dim) */
  ModelMatrix w_up;   /* (ffn_dim, dim) */
  ModelMatrix w_down; /* (dim, ffn_dim) */
} ModelLayerWeights;

typedef struct {
  ModelMatrix token_embedding; /* (vocab_size, dim) */
  float *output_norm;          /* (dim) */
  ModelMatrix output;          /* (vocab_size, dim); the same data as token_embedding when tied */
  ModelLayerWeights *layers;   /* (n_layers) */
  /* Per-frequency divisors of RoPE (head_dim / 2), or NULL: GGUF files store
   * Llama-3 rope scaling as the tensor rope_freqs.weight; for Hugging Face
   * folders model_load computes them from config.json's rope_scaling. */
  float *rope_freq_factors;
} ModelWeights;

/* How weight matrices are held: in the file's stored type (GGUF only; Hugging
 * Face folders are always fp32) or dequantised to fp32 at load. */
typedef enum { MODEL_WEIGHTS_NATIVE = 0, MODEL_WEIGHTS_F32 } ModelWeightsMode;

/* Whether loading reads the tokenizer: commands that take token ids skip it,
 * so that a model runs whatever its tokenizer files hold, or without them. */
typedef enum { MODEL_TOKENIZER_LOAD = 0, MODEL_TOKENIZER_SKIP } ModelTokenizerMode;

typedef struct {
  ModelWeightsMode weights;
  ModelTokenizerMode tokenizer;
} ModelLoadOptions;

typedef struct {
  char path[4096]; /* what was loaded */
  ModelConfig config;
  ModelWeights weights;
  Tokenizer *tokenizer; /* NULL when the source has none or it was skipped */
  void *storage;        /* owned fp32 arena behind the fp32 weight pointers */
  void *mapping;        /* the GgufFile the native matrices point into, or NULL */
  ModelWeightsMode weights_mode;
} Model;

/* The embedded default model's name, and the words of --model's help for it. */
#define MODEL_DEFAULT_NAME "SmolLM2-135M-Instruct"
#define MODEL_DEFAULT_TEXT "the embedded " MODEL_DEFAULT_NAME
/* The embedded default model: $OBC_MODEL when set, else
 * models/MODEL_DEFAULT_NAME.Q4_1.gguf under the data folder (common/obc_paths.h:
 * the installed share/obcache or the source tree). */
const char *model_default_path(void);
/* The one check that a model exists: the GGUF file or Hugging Face folder
 * at path (NULL: the default), whether it is a folder, and with resolved
 * (PATH_MAX bytes; may be NULL) its absolute path. OBC_ENOTFOUND "<path>:
 * no such model file or folder (hint: ...)" when there is none. */
int model_locate(const char *path, bool *folder, char *resolved);
/* Loads a GGUF file or a Hugging Face folder; path NULL = the default.
 * model_load keeps stored types (MODEL_WEIGHTS_NATIVE). */
int model_load(const char *path, Model **out);
int model_load_with(const char *path, const ModelLoadOptions *options, Model **out);
/* The --weights option of every command that loads a model: an ObcOption
 * initialiser (common/obc_options.h) for a ModelWeightsMode target. */
#define MODEL_WEIGHTS_OPTION(target)                                                           \
  OBC_OPT_CUSTOM("--weights", "native|f32", (target), model_weights_mode_parse,                \
                 "weight matrices in the GGUF file's stored type, memory-mapped (native), or " \
                 "dequantised to fp32 at load (f32: the reference path, 4 bytes per weight); " \
                 "Hugging Face folders are always fp32",                                       \
                 .show = model_weights_mode_show)
/* "native" or "f32". */
const char *model_weights_mode_name(ModelWeightsMode mode);
/* Parses "native" or "f32" (an ObcOptionParse of common/obc_options.h for a
 * ModelWeightsMode target): "<option>: expected native or f32, got 'x'". */
int model_weights_mode_parse(void *target, const char *option, const char *value);
/* Its ObcOptionShow: the mode's name. */
void model_weights_mode_show(const void *target, char *text, size_t size);
/* Bytes of all weight matrices as held (tied output counted once): what one
 * decode step reads. */
size_t model_matrix_bytes(const Model *model);
/* One line: mode, the stored types of the matrices and their size, e.g.
 * "native (Q4_1 x 210, Q6_K x 1; 92.4 MB)". */
void model_weights_describe(const Model *model, char *text, size_t size);
void model_free(Model *model);
/* RoPE inverse frequencies (head_dim / 2): theta^(-2i/head_dim), divided by
 * rope_freq_factors[i] when present. Both runtimes use this. */
void model_rope_inv_freq(const Model *model, double *inv_freq);
/* The architectures the runtime computes, as GGUF general.architecture and
 * config.json model_type name them, for messages. */
#define MODEL_ARCHITECTURES "llama, qwen2, qwen3"
/* Whether arch (a GGUF general.architecture or config.json model_type) is one
 * of MODEL_ARCHITECTURES; sets what differs between them (qkv_bias,
 * qk_norm) in config. */
bool model_architecture_set(ModelConfig *config, const char *arch);
/* Checks the configuration is one the runtime supports (positive sizes,
 * n_heads % n_kv_heads == 0, even head_dim, ...). */
int model_config_validate(const ModelConfig *config, const char *source);

#endif
