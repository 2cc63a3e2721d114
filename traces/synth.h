/* Synthetic traces: a trace of any shape with the structure real attention
 * has (a sink at position 0, local attention that decays with distance, a
 * planted "needle" span that the question and decode queries retrieve, values
 * with log-normal norms), generated from a seed, one layer at a time, with O,
 * lse (and A) computed exactly from Q, K, V. It lets every later module be
 * tested and benchmarked at full scale without a model. */
#ifndef OBC_SYNTH_H
#define OBC_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  size_t n_layers;
  size_t n_heads;    /* query heads */
  size_t n_kv_heads; /* must divide n_heads */
  size_t head_dim;
  size_t n_prompt;      /* s */
  size_t n_prompt_rows; /* R: the last R prompt rows are captured (R <= s) */
  size_t n_decode;      /* T: every decode row is captured */
  size_t vocab_size;    /* > 0: also write random tokens and decode logits */
  uint64_t seed;
  double needle_depth;    /* where the needle starts, percent of the haystack */
  size_t needle_length;   /* tokens in the needle span (>= 1) */
  size_t question_length; /* last prompt positions that ask for the needle; 0 = auto */
  bool store_attn;        /* also write A */
  /* also write the column sums of every prompt row (schema 3, computed
   * exactly from the rows); needs every prompt row captured (R = s) */
  bool store_column_sums;
  bool store_f16;         /* half-precision storage */
  int compression_level;  /* 0..9 */
  const char *model_name; /* NULL = "synthetic" */
  const char *producer;   /* NULL = a description of these options */
} SynthOptions;

/* A small quick trace: 2 layers, 4 heads, 2 KV heads, d=16, s=64, R=16, T=4. */
void synth_options_default(SynthOptions *options);
/* Fills the model dimensions of a named shape: "smollm2" (SmolLM2-135M: 30
 * layers, 9 heads, 3 KV heads, d=64) or "llama8b" (Llama-3.1-8B: 32 layers,
 * 32 heads, 8 KV heads, d=128, s=32768, R=128, T=16). OBC_EINVAL otherwise. */
int synth_options_shape(SynthOptions *options, const char *shape);

/* The needle and question spans the options imply (what the trace records). */
void synth_needle_span(const SynthOptions *options, int64_t *begin, int64_t *end);
void synth_question_span(const SynthOptions *options, int64_t *begin, int64_t *end);

/* The bytes the trace's datasets take uncompressed (HDF5's own few KiB
 * aside), known before anything is written; fails (naming path) when the
 * count overflows. */
int synth_trace_bytes(const SynthOptions *options, const char *path, uint64_t *bytes);

/* Writes the trace to path (temporary name, renamed when complete). */
int synth_generate(const SynthOptions *options, const char *path);

#endif
