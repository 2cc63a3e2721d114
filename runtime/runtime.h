/* The forward pass of a Llama-family model (model/model.h) with its KV cache,
 * a seam where capture can read each layer's attention, and a small backend
 * interface with two implementations: the CPU (runtime/backend_cpu.c) and
 * CUDA (runtime/cuda/, "cuda" and "cuda-bf16", built when CMake finds nvcc).
 *
 * A Runtime owns one sequence: runtime_forward() runs tokens at the next
 * positions (prefill of a prompt, or one decode token), appends their post-RoPE
 * keys and values to the cache and returns logits. Long inputs are processed
 * in chunks of at most max_batch tokens; results do not depend on the chunking
 * beyond rounding. Greedy generation on top of this lives in runtime/generate.h. */
#ifndef OBC_RUNTIME_H
#define OBC_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct Runtime Runtime;

/* The cache capacity of a model whose context is longer or unknown. */
#define RUNTIME_DEFAULT_CONTEXT 4096

typedef struct {
  size_t max_context;  /* cache capacity in positions; 0 = min(model context,
                        * RUNTIME_DEFAULT_CONTEXT) */
  size_t max_batch;    /* tokens per chunk of a forward call; 0 = 512 */
  const char *backend; /* "cpu" (NULL = "cpu"), "cuda" or "cuda-bf16" (runtime/cuda/) */
  size_t threads;      /* OpenMP threads; 0 = leave the default */
} RuntimeOptions;

/* The KV cache of one sequence, in host memory. Keys are stored after RoPE,
 * in the model's own head-dimension layout (see ModelConfig.rope_interleaved:
 * GGUF llama-arch keys and queries are both permuted by the same fixed
 * permutation, so their dot products, and all attention, are the same).
 * Positions [0, length) hold valid rows.
 *
 * Model replay (replay/model_replay.c) writes a trace's rows into k/v directly
 * and then sets the length with runtime_set_position(). Eviction
 * (runtime_evict, runtime_set_kept) marks cached rows of one (layer, KV head)
 * as dropped: attention then runs over the kept positions only, plus every
 * position appended afterwards (always kept); RoPE positions are unchanged
 * (both backends honour it, see runtime_evict). */
typedef struct {
  size_t n_layers;
  size_t n_kv_heads;
  size_t max_context;
  size_t head_dim;
  size_t length; /* positions filled */
  float *k;      /* (n_layers, n_kv_heads, max_context, head_dim) */
  float *v;      /* (n_layers, n_kv_heads, max_context, head_dim) */
  /* 1 = the row is evicted (not attended); NULL until the first eviction. */
  unsigned char *evicted; /* (n_layers, n_kv_heads, max_context) */
  /* For a backend with its own copy of the cache (CUDA): rows [0,
   * host_written) were written on the host (runtime_set_position) since its
   * last forward call, and marks_version changes with every change of the
   * marks, so that it uploads what changed and nothing else. */
  size_t host_written;
  uint64_t marks_version;
} RuntimeCache;

/* Pointer to K (or V) of (layer, kv_head, position 0); rows follow with a
 * stride of head_dim floats. */
float *runtime_cache_k(const RuntimeCache *cache, size_t layer, size_t kv_head);
float *runtime_cache_v(const RuntimeCache *cache, size_t layer, size_t kv_head);

typedef enum {
  RUNTIME_LOGITS_NONE = 0, /* no LM head (e.g. filling the cache) */
  RUNTIME_LOGITS_LAST,     /* logits (vocab_size) of the last token */
  RUNTIME_LOGITS_ALL       /* logits (n_tokens, vocab_size) of every token */
} RuntimeLogits;

/* What the capture seam shows for one layer and one chunk of a forward call:
 * the chunk's tokens occupy positions [pos0, pos0 + n_tokens). Every pointer
 * is valid only during the callback; copy what you keep. Query heads are
 * grouped: query head h attends with KV head h / (n_heads / n_kv_heads). */
typedef struct {
  size_t layer;
  size_t n_heads;
  size_t n_kv_heads;
  size_t head_dim;
  size_t pos0;
  size_t n_tokens;
  /* This chunk's new cache rows, post-RoPE as cached: row t of KV head g is
   * k[(g * kv_stride + t) * head_dim ...] (position pos0 + t). On the CPU
   * these point into the cache itself (kv_stride == max_context). */
  const float *k; /* (n_kv_heads, kv_stride, head_dim) */
  const float *v; /* (n_kv_heads, kv_stride, head_dim) */
  size_t kv_stride;
  /* The requested query rows that fall inside this chunk (maybe none). */
  size_t n_rows;
  const size_t *row_positions; /* (n_rows) absolute positions, ascending */
  const float *q;              /* (n_heads, n_rows, head_dim) post-RoPE, as cached K */
  const float *o;              /* (n_heads, n_rows, head_dim) per-head attention output,
                                  before the output projection */
  const float *lse; /* (n_heads, n_rows) log sum_{p <= i} exp(q_i . k_p / sqrt(head_dim)) */
  /* With want_attn: softmax rows over keys [0, n_keys), n_keys = pos0 +
   * n_tokens; entries of keys after the row's own position are 0. Else NULL. */
  const float *attn; /* (n_heads, n_rows, n_keys) */
  size_t n_keys;
} RuntimeLayerCapture;

/* Column sums of attention and pre-RoPE query statistics of every prompt
 * row (capture/capture_sums.h and capture/capture_qstats.h define them),
 * accumulated by a backend on its own device (RuntimeBackend.device_sums)
 * from the queries, outputs, lse and K/V it already holds, so that neither
 * every row's Q/O nor the work of the sums goes through the host. Rows
 * [0, n_prompt) are summed as forward calls reach them, starting at
 * position 0; just before row agnostic_rows (< n_prompt) each layer's
 * all-rows sums are copied into its agnostic ones. The host arrays are
 * written when the forward call that runs row n_prompt - 1 returns; the
 * agnostic copy for agnostic_rows == n_prompt and the symmetric mirror of
 * q_outer (its upper triangle holds the sums) are the caller's. */
typedef enum {
  RUNTIME_SUMS_AGNOSTIC = 0, /* rows [0, agnostic_rows) */
  RUNTIME_SUMS_ALL = 1,      /* every prompt row */
  RUNTIME_SUMS_VARIANTS = 2
} RuntimeSumsRows;
enum { RUNTIME_SUMS_OBC_TERMS = 3 }; /* obc_v, obc_k, obc_vk */
typedef struct {
  size_t n_prompt;         /* rows and key positions summed over */
  size_t agnostic_rows;    /* <= n_prompt */
  size_t qstats_first_row; /* query statistics sum rows [qstats_first_row, n_prompt) */
  float scale;             /* logit scale, as the attention uses it */
  double *attn;            /* host (n_layers, VARIANTS, n_heads, n_prompt) */
  double *obc;             /* host (n_layers, VARIANTS, OBC_TERMS, n_heads, n_prompt) */
  double *q_sum;           /* host (n_layers, VARIANTS, n_heads, head_dim) */
  double *q_outer;         /* host (n_layers, VARIANTS, n_heads, head_dim, head_dim) */
} RuntimeSums;

/* Asks a forward call to report per layer. on_layer runs once per (chunk,
 * layer), chunks in order and layers in order within a chunk, right after that
 * layer's attention (its K/V rows are already in the cache). Rows outside the
 * call's positions are ignored. The forward pass with capture == NULL does no
 * capture work at all. on_layer returns 0, or a negative OBC_E* code (after
 * obc_fail) that stops the forward call with that code (cache unchanged). */
typedef struct {
  const size_t *row_positions; /* (n_rows) absolute positions, strictly ascending */
  size_t n_rows;
  bool want_attn;
  void *user;
  int (*on_layer)(void *user, const RuntimeLayerCapture *view);
  /* Sums on the device (a backend with device_sums only), or NULL. */
  const RuntimeSums *sums;
} RuntimeCapture;

/* The requested rows that fall inside one chunk, positions [pos0, pos0 + n):
 * indices [*first, *first + *count) of capture->row_positions. Inline so that
 * both backends (C and CUDA) select a chunk's rows the same way. */
static inline void runtime_capture_chunk_rows(const RuntimeCapture *capture, size_t pos0, size_t n,
                                              size_t *first, size_t *count) {
  size_t lo = 0;
  while (lo < capture->n_rows && capture->row_positions[lo] < pos0) lo++;
  size_t hi = lo;
  while (hi < capture->n_rows && capture->row_positions[hi] < pos0 + n) hi++;
  *first = lo;
  *count = hi - lo;
}

/* Seconds spent, accumulated over forward calls since runtime_create or the
 * last runtime_profile_reset (wall clock, for benchmarks). */
typedef struct {
  double gemm_seconds;           /* weight GEMMs: Q/K/V/O projections, MLP, LM head */
  double attention_seconds;      /* scores, softmax, weighted values (incl. their GEMMs) */
  double attention_gemm_seconds; /* part of attention_seconds in sgemm (mean per thread) */
  double other_seconds;          /* embedding, norms, RoPE, SwiGLU, residuals, capture */
  size_t tokens;                 /* tokens processed */
} RuntimeProfile;

/* A backend: the ops one implementation provides. forward() runs one chunk
 * (n <= max_batch tokens at positions [cache->length, + n)) through every
 * layer, appends K/V to the cache, advances cache->length and writes logits.
 * The CUDA backend keeps its own copy of the cache and mirrors the host
 * RuntimeCache inside forward(): rows written on the host (replay) beyond its copy
 * are uploaded first, and with a capture each chunk's new K/V rows are
 * downloaded into the host cache; the CPU backend works on the host cache. */
typedef struct {
  const char *name;
  int (*create)(const Model *model, const RuntimeOptions *options, RuntimeCache *cache,
                void **state);
  void (*destroy)(void *state);
  int (*forward)(void *state, const int32_t *tokens /* (n) */, size_t n, RuntimeLogits which,
                 float *logits /* (1 or n, vocab_size) */, const RuntimeCapture *capture,
                 RuntimeProfile *profile);
  bool device_sums; /* forward honours RuntimeCapture.sums */
} RuntimeBackend;

extern const RuntimeBackend runtime_backend_cpu; /* runtime/backend_cpu.c */

/* The --device option of every command that runs the model: an ObcOption
 * initialiser (common/obc_options.h) for a const char * target, which
 * becomes RuntimeOptions.backend. */
#define RUNTIME_DEVICE_OPTION(target)                                                       \
  OBC_OPT_TEXT("--device", "cpu|cuda|cuda-bf16", (target),                                  \
               "runtime backend: the CPU, or the GPU with fp32 (cuda) or bf16 (cuda-bf16) " \
               "weights",                                                                   \
               .default_text = "cpu")

int runtime_create(const Model *model, const RuntimeOptions *options, Runtime **out);
void runtime_free(Runtime *runtime);

/* Runs n tokens at positions [runtime_position(), + n). logits: (vocab_size)
 * for LAST, (n, vocab_size) for ALL, may be NULL for NONE. capture may be NULL.
 * Fails (one-line message) when the tokens would not fit in max_context or a
 * token id is outside the vocabulary; the cache is then unchanged. */
int runtime_forward(Runtime *runtime, const int32_t *tokens /* (n) */, size_t n,
                    RuntimeLogits which, float *logits, const RuntimeCapture *capture);

size_t runtime_position(const Runtime *runtime); /* tokens in the cache */
size_t runtime_max_context(const Runtime *runtime);
const Model *runtime_model(const Runtime *runtime);
/* Empties the cache (position 0). */
void runtime_reset(Runtime *runtime);
/* The cache, for reading (capture) or writing rows (replay). */
RuntimeCache *runtime_cache(Runtime *runtime);
/* Declares positions [0, position) valid after writing their rows directly
 * into the host cache (a backend with its own copy uploads them). */
int runtime_set_position(Runtime *runtime, size_t position);
/* Goes back to position (<= runtime_position()): later positions are
 * dropped, rows [0, position) stay as they are, on every backend. For
 * decoding again from the same cache (replay) without uploading it again. */
int runtime_rewind(Runtime *runtime, size_t position);
/* Drops cached position `position` (< runtime_position()) of (layer, kv_head)
 * from every later attention. Rows written at or after the current position
 * by later forward calls are kept. Both backends honour the marks (the CUDA
 * one uploads them to the device at each forward call). */
int runtime_evict(Runtime *runtime, size_t layer, size_t kv_head, size_t position);
/* Sets the marks of positions [0, n) of (layer, kv_head) from a keep mask:
 * keep[p] != 0 keeps position p, 0 drops it as runtime_evict does; later
 * positions keep their marks. n must be <= runtime_position(). */
int runtime_set_kept(Runtime *runtime, size_t layer, size_t kv_head,
                     const unsigned char *keep /* (n) */, size_t n);
/* Keeps every cached position again (runtime_reset does this too). */
void runtime_clear_evictions(Runtime *runtime);

/* Whether the backend accumulates RuntimeCapture.sums on its device. */
bool runtime_device_sums(const Runtime *runtime);

const RuntimeProfile *runtime_profile(const Runtime *runtime);
void runtime_profile_reset(Runtime *runtime);

#endif
