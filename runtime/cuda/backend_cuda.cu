/* The CUDA backend of the runtime: the forward pass of backend_cpu.c with the
 * weights, the KV cache and every activation on the device. Weight products
 * are cuBLAS GEMMs (fp32, or bf16 inputs with fp32 accumulation), attention
 * is the tiled kernel of cuda_attention.cu, the rest the kernels of
 * cuda_ops.cu. With a capture, each layer's captured rows and new K/V rows are
 * copied to pinned host buffers on a second stream while the next layer runs,
 * and handed to on_layer from there (two buffer slots, alternating layers).
 * A capture's device sums (RuntimeSums) are the kernels of cuda_sums.cu, run
 * on every prompt row right after each layer's attention. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/backend_cuda.h"

extern "C" {
#include "common/obc_error.h"
#include "common/obc_time.h"
#include "formats/gguf.h"
}
#include "runtime/cuda/cuda_attention.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/cuda_sums.h"

/* Floats converted per step when uploading weights in bf16 (device staging). */
enum { UPLOAD_STAGE_FLOATS = 1 << 24 };

typedef struct {
  void *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down; /* as ModelWeights, fp32 or bf16 */
  float *attn_norm;                                 /* (dim) */
  float *ffn_norm;                                  /* (dim) */
  float *bq, *bk, *bv;                              /* biases or NULL */
  float *q_norm, *k_norm;                           /* (head_dim) per-head Q/K norms or NULL */
} CudaLayer;

/* Device and pinned host buffers of one layer's capture, and what they hold. */
typedef struct {
  size_t cap_q, cap_o, cap_lse, cap_attn, cap_k, cap_v; /* capacities in floats */
  float *q, *o, *lse, *attn, *k, *v;                    /* device: (n_heads, n_rows, head_dim) q/o,
                                                           (n_heads, n_rows) lse, (n_heads, n_rows, n_keys)
                                                           attn, (n_kv_heads, n, head_dim) k/v */
  float *host_q, *host_o, *host_lse, *host_attn, *host_k, *host_v; /* pinned, same shapes */
  cudaEvent_t ready;  /* compute stream: the slot's device buffers are written */
  cudaEvent_t copied; /* copy stream: the pinned buffers are filled */
  size_t layer;
} CaptureSlot;

/* The device accumulators of a capture's RuntimeSums, in its layout. */
typedef struct {
  size_t n_prompt;         /* what they are sized for; 0 = none yet */
  double *attn, *obc;      /* (n_layers, VARIANTS, [OBC_TERMS,] n_heads, n_prompt) */
  double *q_sum, *q_outer; /* (n_layers, VARIANTS, n_heads, head_dim [, head_dim]) */
} DeviceSums;

typedef enum { SPAN_GEMM = 0, SPAN_ATTENTION = 1 } SpanKind;

typedef struct {
  cudaEvent_t start, stop;
  SpanKind kind;
} TimedSpan;

typedef struct {
  const Model *model;
  RuntimeCache *cache; /* host mirror */
  size_t max_batch;
  int bf16;
  cudaStream_t stream;      /* all compute */
  cudaStream_t copy_stream; /* capture downloads */
  cublasHandle_t blas;
  CudaLayer *layers;      /* (n_layers) */
  void *embedding;        /* (vocab_size, dim) */
  void *output;           /* (vocab_size, dim); == embedding when tied */
  float *output_norm;     /* (dim) */
  float *rope_cos;        /* (max_context, head_dim / 2) */
  float *rope_sin;        /* (max_context, head_dim / 2) */
  float *k_cache;         /* (n_layers, n_kv_heads, max_context, head_dim) */
  float *v_cache;         /* (n_layers, n_kv_heads, max_context, head_dim) */
  size_t device_length;   /* positions valid in the device cache */
  unsigned char *evicted; /* (n_layers, n_kv_heads, max_context) marks, once the host has any */
  uint64_t marks_version; /* the host's RuntimeCache.marks_version that evicted holds */
  bool marks_uploaded;    /* evicted holds the host's marks of marks_version */
  int32_t *tokens;        /* (max_batch) */
  float *x;               /* (max_batch, dim) residual stream */
  float *xb;              /* (max_batch, dim) */
  float *q;               /* (max_batch, n_heads * head_dim) */
  float *k;               /* (max_batch, n_kv_heads * head_dim) */
  float *v;               /* (max_batch, n_kv_heads * head_dim) */
  float *att;             /* (max_batch, n_heads * head_dim) */
  float *lse;             /* (n_heads, max_batch) */
  float *gate;            /* (max_batch, ffn_dim) */
  float *up;              /* (max_batch, ffn_dim) */
  float *logits;          /* (max_batch, vocab_size) */
  uint16_t *act16;        /* (max_batch, max(dim, q_dim, ffn_dim)) bf16 GEMM input */
  int32_t *row_t;         /* (max_batch) chunk index of each captured row */
  int32_t *host_row_t;    /* (max_batch) */
  CaptureSlot slots[2];
  DeviceSums sums;
  TimedSpan *spans; /* (n_spans_cap) */
  size_t n_spans, n_spans_cap;
} CudaState;

/* ---- device probe and memory helpers ------------------------------------ */

extern "C" int cuda_backend_probe(void) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    return obc_fail(OBC_EUNSUPPORTED, "--device cuda: no CUDA device found (%s)",
                    status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
  }
  return 0;
}

static void device_free(void *ptr) {
  if (ptr) cudaFree(ptr);
}

static void host_free(void *ptr) {
  if (ptr) cudaFreeHost(ptr);
}

static int upload_vector(const float *host, size_t count, float **dev, const char *what) {
  *dev = NULL;
  if (!host) return OBC_OK;
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(dev, count * sizeof(float), what));
  return OBC_CUDA(cudaMemcpy(*dev, host, count * sizeof(float), cudaMemcpyHostToDevice));
}

/* A weight matrix (count floats) in the backend's storage type; bf16 goes
 * through an fp32 staging buffer on the device and cuda_to_bf16. */
static int upload_floats(CudaState *s, const float *host, size_t count, float *stage, void **dev,
                         const char *what) {
  if (!s->bf16) return upload_vector(host, count, (float **)dev, what);
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(dev, count * sizeof(uint16_t), what));
  for (size_t done = 0; done < count; done += UPLOAD_STAGE_FLOATS) {
    size_t len = count - done < UPLOAD_STAGE_FLOATS ? count - done : UPLOAD_STAGE_FLOATS;
    OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(stage, host + done, len * sizeof(float),
                                          cudaMemcpyHostToDevice, s->stream)));
    OBC_CUDA_TRY(cuda_to_bf16((uint16_t *)*dev + done, stage, len, s->stream));
  }
  return OBC_CUDA(cudaStreamSynchronize(s->stream));
}

/* A matrix in a stored GGUF type (model/model.h) is dequantised into a
 * temporary host buffer first; the device holds fp32 or bf16 either way. */
static int upload_matrix(CudaState *s, const ModelMatrix *m, float *stage, void **dev,
                         const char *what) {
  size_t count = m->rows * m->cols;
  if (m->type == MODEL_MATRIX_F32)
    return upload_floats(s, (const float *)m->data, count, stage, dev, what);
  float *host = (float *)obc_malloc(count * sizeof(float), what);
  if (!host) return OBC_ENOMEM;
  int rc = dequant_gguf(m->type, m->data, host, count);
  if (!rc) rc = upload_floats(s, host, count, stage, dev, what);
  free(host);
  return rc;
}

static int upload_weights(CudaState *s) {
  const ModelConfig *c = &s->model->config;
  const ModelWeights *w = &s->model->weights;
  size_t q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  float *stage = NULL;
  if (s->bf16)
    OBC_CUDA_TRY(OBC_CUDA_ALLOC(&stage, UPLOAD_STAGE_FLOATS * sizeof(float), "weight staging"));
  s->layers = (CudaLayer *)obc_calloc(c->n_layers, sizeof(CudaLayer), "CUDA layer table");
  int rc = s->layers ? 0 : OBC_ENOMEM;
  if (!rc)
    rc = upload_matrix(s, &w->token_embedding, stage, &s->embedding,
                       "token embedding (GPU weights)");
  if (!rc && w->output.data == w->token_embedding.data)
    s->output = s->embedding;
  else if (!rc)
    rc = upload_matrix(s, &w->output, stage, &s->output, "output matrix (GPU weights)");
  if (!rc) rc = upload_vector(w->output_norm, c->dim, &s->output_norm, "output norm");
  for (size_t l = 0; l < c->n_layers && !rc; l++) {
    const ModelLayerWeights *lw = &w->layers[l];
    CudaLayer *d = &s->layers[l];
    if (!rc) rc = upload_matrix(s, &lw->wq, stage, &d->wq, "wq (GPU weights)");
    if (!rc) rc = upload_matrix(s, &lw->wk, stage, &d->wk, "wk (GPU weights)");
    if (!rc) rc = upload_matrix(s, &lw->wv, stage, &d->wv, "wv (GPU weights)");
    if (!rc) rc = upload_matrix(s, &lw->wo, stage, &d->wo, "wo (GPU weights)");
    if (!rc) rc = upload_matrix(s, &lw->w_gate, stage, &d->w_gate, "w_gate (GPU weights)");
    if (!rc) rc = upload_matrix(s, &lw->w_up, stage, &d->w_up, "w_up (GPU weights)");
    if (!rc) rc = upload_matrix(s, &lw->w_down, stage, &d->w_down, "w_down (GPU weights)");
    if (!rc) rc = upload_vector(lw->attn_norm, c->dim, &d->attn_norm, "attention norm");
    if (!rc) rc = upload_vector(lw->ffn_norm, c->dim, &d->ffn_norm, "MLP norm");
    if (!rc) rc = upload_vector(lw->bq, q_dim, &d->bq, "q bias");
    if (!rc) rc = upload_vector(lw->bk, kv_dim, &d->bk, "k bias");
    if (!rc) rc = upload_vector(lw->bv, kv_dim, &d->bv, "v bias");
    if (!rc) rc = upload_vector(lw->q_norm, c->head_dim, &d->q_norm, "q norm");
    if (!rc) rc = upload_vector(lw->k_norm, c->head_dim, &d->k_norm, "k norm");
  }
  device_free(stage);
  return rc;
}

/* Same tables as the CPU backend (model_rope_inv_freq, double angles). */
static int upload_rope_tables(CudaState *s) {
  const ModelConfig *c = &s->model->config;
  size_t half = c->head_dim / 2, max_context = s->cache->max_context;
  double *inv_freq = (double *)obc_malloc(half * sizeof(double), "RoPE frequencies");
  float *cos_table = (float *)obc_malloc(max_context * half * sizeof(float), "RoPE cos table");
  float *sin_table = (float *)obc_malloc(max_context * half * sizeof(float), "RoPE sin table");
  int rc = inv_freq && cos_table && sin_table ? 0 : OBC_ENOMEM;
  if (!rc) {
    model_rope_inv_freq(s->model, inv_freq);
    for (size_t p = 0; p < max_context; p++)
      for (size_t i = 0; i < half; i++) {
        double angle = (double)p * inv_freq[i];
        cos_table[p * half + i] = (float)cos(angle);
        sin_table[p * half + i] = (float)sin(angle);
      }
    rc = upload_vector(cos_table, max_context * half, &s->rope_cos, "RoPE cos table");
  }
  if (!rc) rc = upload_vector(sin_table, max_context * half, &s->rope_sin, "RoPE sin table");
  free(inv_freq);
  free(cos_table);
  free(sin_table);
  return rc;
}

static int alloc_activations(CudaState *s) {
  const ModelConfig *c = &s->model->config;
  size_t b = s->max_batch, q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
  size_t cache_floats = c->n_layers * c->n_kv_heads * s->cache->max_context * c->head_dim;
  size_t widest = c->dim > q_dim ? c->dim : q_dim;
  widest = widest > c->ffn_dim ? widest : c->ffn_dim;
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->k_cache, cache_floats * sizeof(float), "KV cache (keys)"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->v_cache, cache_floats * sizeof(float), "KV cache (values)"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->tokens, b * sizeof(int32_t), "token ids"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->x, b * c->dim * sizeof(float), "activations"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->xb, b * c->dim * sizeof(float), "activations"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->q, b * q_dim * sizeof(float), "queries"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->k, b * kv_dim * sizeof(float), "keys"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->v, b * kv_dim * sizeof(float), "values"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->att, b * q_dim * sizeof(float), "attention outputs"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->lse, c->n_heads * b * sizeof(float), "attention lse"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->gate, b * c->ffn_dim * sizeof(float), "MLP activations"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->up, b * c->ffn_dim * sizeof(float), "MLP activations"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->logits, b * c->vocab_size * sizeof(float), "logits"));
  if (s->bf16)
    OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->act16, b * widest * sizeof(uint16_t), "bf16 GEMM inputs"));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->row_t, b * sizeof(int32_t), "capture row map"));
  s->host_row_t = (int32_t *)obc_malloc(b * sizeof(int32_t), "capture row map");
  if (!s->host_row_t) return OBC_ENOMEM;
  s->n_spans_cap = 5 * c->n_layers + 1;
  s->spans = (TimedSpan *)obc_calloc(s->n_spans_cap, sizeof(TimedSpan), "GPU timers");
  if (!s->spans) return OBC_ENOMEM;
  for (size_t i = 0; i < s->n_spans_cap; i++) {
    OBC_CUDA_TRY(OBC_CUDA(cudaEventCreate(&s->spans[i].start)));
    OBC_CUDA_TRY(OBC_CUDA(cudaEventCreate(&s->spans[i].stop)));
  }
  for (int i = 0; i < 2; i++) {
    OBC_CUDA_TRY(OBC_CUDA(cudaEventCreateWithFlags(&s->slots[i].ready, cudaEventDisableTiming)));
    OBC_CUDA_TRY(OBC_CUDA(cudaEventCreateWithFlags(&s->slots[i].copied, cudaEventDisableTiming)));
  }
  return OBC_OK;
}

static void slot_free(CaptureSlot *slot) {
  float **device[] = {&slot->q, &slot->o, &slot->lse, &slot->attn, &slot->k, &slot->v};
  float **host[] = {&slot->host_q,    &slot->host_o, &slot->host_lse,
                    &slot->host_attn, &slot->host_k, &slot->host_v};
  for (size_t i = 0; i < 6; i++) {
    device_free(*device[i]);
    host_free(*host[i]);
    *device[i] = *host[i] = NULL;
  }
  slot->cap_q = slot->cap_o = slot->cap_lse = slot->cap_attn = slot->cap_k = slot->cap_v = 0;
}

static void cuda_destroy(void *state) {
  CudaState *s = (CudaState *)state;
  if (!s) return;
  if (s->stream) cudaStreamSynchronize(s->stream);
  if (s->copy_stream) cudaStreamSynchronize(s->copy_stream);
  if (s->layers) {
    for (size_t l = 0; l < s->model->config.n_layers; l++) {
      CudaLayer *d = &s->layers[l];
      void *ptrs[] = {d->wq,        d->wk,       d->wv, d->wo, d->w_gate, d->w_up,   d->w_down,
                      d->attn_norm, d->ffn_norm, d->bq, d->bk, d->bv,     d->q_norm, d->k_norm};
      for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) device_free(ptrs[i]);
    }
    free(s->layers);
  }
  if (s->output != s->embedding) device_free(s->output);
  void *ptrs[] = {s->embedding, s->output_norm, s->rope_cos,   s->rope_sin,    s->k_cache,
                  s->v_cache,   s->tokens,      s->x,          s->xb,          s->q,
                  s->k,         s->v,           s->att,        s->lse,         s->gate,
                  s->up,        s->logits,      s->act16,      s->row_t,       s->evicted,
                  s->sums.attn, s->sums.obc,    s->sums.q_sum, s->sums.q_outer};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) device_free(ptrs[i]);
  free(s->host_row_t);
  for (int i = 0; i < 2; i++) {
    slot_free(&s->slots[i]);
    if (s->slots[i].ready) cudaEventDestroy(s->slots[i].ready);
    if (s->slots[i].copied) cudaEventDestroy(s->slots[i].copied);
  }
  if (s->spans) {
    for (size_t i = 0; i < s->n_spans_cap; i++) {
      if (s->spans[i].start) cudaEventDestroy(s->spans[i].start);
      if (s->spans[i].stop) cudaEventDestroy(s->spans[i].stop);
    }
    free(s->spans);
  }
  if (s->blas) cublasDestroy(s->blas);
  if (s->stream) cudaStreamDestroy(s->stream);
  if (s->copy_stream) cudaStreamDestroy(s->copy_stream);
  free(s);
}

static int create_state(const Model *model, const RuntimeOptions *options, RuntimeCache *cache,
                        int bf16, CudaState *s) {
  s->model = model;
  s->cache = cache;
  s->max_batch = options->max_batch;
  s->bf16 = bf16;
  OBC_CUDA_TRY(OBC_CUDA(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)));
  OBC_CUDA_TRY(OBC_CUDA(cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking)));
  OBC_CUDA_TRY(OBC_CUBLAS(cublasCreate(&s->blas)));
  OBC_CUDA_TRY(OBC_CUBLAS(cublasSetStream(s->blas, s->stream)));
  OBC_CUDA_TRY(upload_weights(s));
  OBC_CUDA_TRY(upload_rope_tables(s));
  return alloc_activations(s);
}

static int cuda_create_common(const Model *model, const RuntimeOptions *options,
                              RuntimeCache *cache, int bf16, void **out) {
  *out = NULL;
  const ModelConfig *c = &model->config;
  OBC_CUDA_TRY(cuda_backend_probe());
  if (!cuda_attention_supports(c->head_dim))
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: head_dim %zu is not supported by the CUDA attention (expected 32, 64, "
                    "96 or 128; hint: --device cpu)",
                    model->path, c->head_dim);
  CudaState *s = (CudaState *)obc_calloc(1, sizeof(CudaState), "CUDA backend");
  if (!s) return OBC_ENOMEM;
  int rc = create_state(model, options, cache, bf16, s);
  if (rc) {
    cuda_destroy(s);
    return rc;
  }
  *out = s;
  return OBC_OK;
}

static int cuda_create_f32(const Model *model, const RuntimeOptions *options, RuntimeCache *cache,
                           void **out) {
  return cuda_create_common(model, options, cache, 0, out);
}

static int cuda_create_bf16(const Model *model, const RuntimeOptions *options, RuntimeCache *cache,
                            void **out) {
  return cuda_create_common(model, options, cache, 1, out);
}

/* ---- timing --------------------------------------------------------------- */

static int span_begin(CudaState *s, SpanKind kind, size_t *index) {
  *index = s->n_spans;
  if (s->n_spans == s->n_spans_cap) return OBC_OK; /* untimed beyond the pool */
  s->spans[s->n_spans].kind = kind;
  return OBC_CUDA(cudaEventRecord(s->spans[s->n_spans++].start, s->stream));
}

static int span_end(CudaState *s, size_t index) {
  if (index >= s->n_spans) return OBC_OK;
  return OBC_CUDA(cudaEventRecord(s->spans[index].stop, s->stream));
}

/* Adds the spans of a finished forward call to the profile (seconds). */
static int spans_collect(CudaState *s, double *gemm, double *attention) {
  for (size_t i = 0; i < s->n_spans; i++) {
    float ms = 0.0f;
    OBC_CUDA_TRY(OBC_CUDA(cudaEventElapsedTime(&ms, s->spans[i].start, s->spans[i].stop)));
    *(s->spans[i].kind == SPAN_GEMM ? gemm : attention) += ms * 1e-3;
  }
  s->n_spans = 0;
  return 0;
}

/* ---- GEMMs ------------------------------------------------------------------ */

/* The GEMM input for a (n, width) activation: itself in fp32 mode, its bf16
 * copy in act16 otherwise. */
static int gemm_input(CudaState *s, const float *a, size_t n, size_t width, const void **out) {
  if (!s->bf16) {
    *out = a;
    return 0;
  }
  *out = s->act16;
  return cuda_to_bf16(s->act16, a, n * width, s->stream);
}

/* c (n, out) = a (n, in) w^T + beta c with w (out, in) row-major: in cuBLAS's
 * column-major terms c^T = w^T' a^T, i.e. op(A) = T on w, op(B) = N on a. */
static int gemm(CudaState *s, float *c, const void *a, const void *w, size_t n, size_t in,
                size_t out, float beta) {
  const float alpha = 1.0f;
  cudaDataType_t type = s->bf16 ? CUDA_R_16BF : CUDA_R_32F;
  return OBC_CUBLAS(cublasGemmEx(s->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)n, (int)in,
                                 &alpha, w, type, (int)in, a, type, (int)in, &beta, c, CUDA_R_32F,
                                 (int)out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ---- capture -------------------------------------------------------------- */

static int grow_pair(float **device, float **host, size_t *cap, size_t need, const char *what) {
  if (need <= *cap) return 0;
  device_free(*device);
  host_free(*host);
  *device = *host = NULL;
  *cap = 0;
  OBC_CUDA_TRY(OBC_CUDA_ALLOC(device, need * sizeof(float), what));
  OBC_CUDA_TRY(OBC_CUDA_ALLOC_HOST(host, need * sizeof(float), what));
  *cap = need;
  return 0;
}

/* Room in both slots for n_rows captured rows of a chunk of n tokens. */
static int slots_reserve(CudaState *s, size_t n_rows, size_t n, size_t n_keys, int want_attn) {
  const ModelConfig *c = &s->model->config;
  size_t rows = c->n_heads * (n_rows ? n_rows : 1), kv = c->n_kv_heads * n * c->head_dim;
  for (int i = 0; i < 2; i++) {
    CaptureSlot *t = &s->slots[i];
    OBC_CUDA_TRY(grow_pair(&t->q, &t->host_q, &t->cap_q, rows * c->head_dim, "captured Q rows"));
    OBC_CUDA_TRY(grow_pair(&t->o, &t->host_o, &t->cap_o, rows * c->head_dim, "captured O rows"));
    OBC_CUDA_TRY(grow_pair(&t->lse, &t->host_lse, &t->cap_lse, rows, "captured lse"));
    if (want_attn)
      OBC_CUDA_TRY(grow_pair(&t->attn, &t->host_attn, &t->cap_attn, rows * n_keys,
                             "captured attention rows"));
    OBC_CUDA_TRY(grow_pair(&t->k, &t->host_k, &t->cap_k, kv, "captured K rows"));
    OBC_CUDA_TRY(grow_pair(&t->v, &t->host_v, &t->cap_v, kv, "captured V rows"));
  }
  return 0;
}

typedef struct {
  const RuntimeCapture *capture;
  size_t first;  /* index of the chunk's first row in capture->row_positions */
  size_t n_rows; /* rows inside the chunk */
  size_t pos0, n;
} ChunkRows;

/* The device eviction marks of one layer (n_kv_heads, max_context), or NULL. */
static const unsigned char *layer_marks(const CudaState *s, size_t layer) {
  if (!s->cache->evicted || !s->evicted) return NULL;
  return s->evicted + layer * s->cache->n_kv_heads * s->cache->max_context;
}

/* Gathers the layer's captured rows and new K/V into the slot on the compute
 * stream, then queues their download on the copy stream. */
static int capture_layer(CudaState *s, size_t layer, const ChunkRows *rows, CaptureSlot *slot) {
  const ModelConfig *c = &s->model->config;
  size_t hd = c->head_dim, R = rows->n_rows, n = rows->n, n_keys = rows->pos0 + n;
  cudaStream_t st = s->stream;
  OBC_CUDA_TRY(OBC_CUDA(cudaStreamWaitEvent(st, slot->copied, 0)));
  OBC_CUDA_TRY(cuda_gather_rows(slot->q, s->q, s->row_t, R, c->n_heads, hd, st));
  OBC_CUDA_TRY(cuda_gather_rows(slot->o, s->att, s->row_t, R, c->n_heads, hd, st));
  OBC_CUDA_TRY(cuda_gather_lse(slot->lse, s->lse, s->row_t, R, c->n_heads, n, st));
  size_t layer_offset = layer * c->n_kv_heads * s->cache->max_context * hd;
  if (rows->capture->want_attn && R > 0) {
    CpuAttentionShape shape = {
        c->n_heads, c->n_kv_heads, hd, s->cache->max_context, rows->pos0, n, layer_marks(s, layer)};
    OBC_CUDA_TRY(cuda_attention_rows(&shape, s->q, s->k_cache + layer_offset, s->lse, s->row_t, R,
                                     slot->attn, st));
  }
  OBC_CUDA_TRY(cuda_store_kv(slot->k, s->k, n, c->n_kv_heads, hd, n, 0, st));
  OBC_CUDA_TRY(cuda_store_kv(slot->v, s->v, n, c->n_kv_heads, hd, n, 0, st));
  OBC_CUDA_TRY(OBC_CUDA(cudaEventRecord(slot->ready, st)));

  cudaStream_t cp = s->copy_stream;
  size_t qo = c->n_heads * R * hd * sizeof(float), kv = c->n_kv_heads * n * hd * sizeof(float);
  OBC_CUDA_TRY(OBC_CUDA(cudaStreamWaitEvent(cp, slot->ready, 0)));
  OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(slot->host_q, slot->q, qo, cudaMemcpyDeviceToHost, cp)));
  OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(slot->host_o, slot->o, qo, cudaMemcpyDeviceToHost, cp)));
  OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(slot->host_lse, slot->lse, c->n_heads * R * sizeof(float),
                                        cudaMemcpyDeviceToHost, cp)));
  if (rows->capture->want_attn && R > 0)
    OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(slot->host_attn, slot->attn,
                                          c->n_heads * R * n_keys * sizeof(float),
                                          cudaMemcpyDeviceToHost, cp)));
  OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(slot->host_k, slot->k, kv, cudaMemcpyDeviceToHost, cp)));
  OBC_CUDA_TRY(OBC_CUDA(cudaMemcpyAsync(slot->host_v, slot->v, kv, cudaMemcpyDeviceToHost, cp)));
  OBC_CUDA_TRY(OBC_CUDA(cudaEventRecord(slot->copied, cp)));
  slot->layer = layer;
  return 0;
}

/* Waits for a slot's download, mirrors its K/V rows into the host cache and
 * calls on_layer with the same view the CPU backend gives. */
static int capture_deliver(CudaState *s, const ChunkRows *rows, const CaptureSlot *slot) {
  const ModelConfig *c = &s->model->config;
  size_t hd = c->head_dim, n = rows->n;
  OBC_CUDA_TRY(OBC_CUDA(cudaEventSynchronize(slot->copied)));
  for (size_t g = 0; g < c->n_kv_heads; g++) {
    memcpy(runtime_cache_k(s->cache, slot->layer, g) + rows->pos0 * hd, slot->host_k + g * n * hd,
           n * hd * sizeof(float));
    memcpy(runtime_cache_v(s->cache, slot->layer, g) + rows->pos0 * hd, slot->host_v + g * n * hd,
           n * hd * sizeof(float));
  }
  const int want_attn = rows->capture->want_attn && rows->n_rows > 0;
  RuntimeLayerCapture view;
  memset(&view, 0, sizeof view);
  view.layer = slot->layer;
  view.n_heads = c->n_heads;
  view.n_kv_heads = c->n_kv_heads;
  view.head_dim = hd;
  view.pos0 = rows->pos0;
  view.n_tokens = n;
  view.k = runtime_cache_k(s->cache, slot->layer, 0) + rows->pos0 * hd;
  view.v = runtime_cache_v(s->cache, slot->layer, 0) + rows->pos0 * hd;
  view.kv_stride = s->cache->max_context;
  view.n_rows = rows->n_rows;
  view.row_positions = rows->capture->row_positions + rows->first;
  view.q = slot->host_q;
  view.o = slot->host_o;
  view.lse = slot->host_lse;
  view.attn = want_attn ? slot->host_attn : NULL;
  view.n_keys = rows->pos0 + n;
  return rows->capture->on_layer(rows->capture->user, &view);
}

/* ---- device sums ------------------------------------------------------------ */

/* Floats of each accumulator of one layer, in RuntimeSums's layout. */
static void sums_sizes(const CudaState *s, size_t n_prompt, size_t sizes[4]) {
  const ModelConfig *c = &s->model->config;
  size_t per = RUNTIME_SUMS_VARIANTS * c->n_heads;
  sizes[0] = per * n_prompt;
  sizes[1] = per * RUNTIME_SUMS_OBC_TERMS * n_prompt;
  sizes[2] = per * c->head_dim;
  sizes[3] = per * c->head_dim * c->head_dim;
}

/* At position 0: the accumulators, sized for the request and zeroed. */
static int sums_begin(CudaState *s, const RuntimeSums *request) {
  const ModelConfig *c = &s->model->config;
  DeviceSums *d = &s->sums;
  double **arrays[4] = {&d->attn, &d->obc, &d->q_sum, &d->q_outer};
  static const char *const what[4] = {"column sums (GPU)", "OBCache column sums (GPU)",
                                      "query sums (GPU)", "query outer-product sums (GPU)"};
  size_t sizes[4];
  sums_sizes(s, request->n_prompt, sizes);
  if (d->n_prompt != request->n_prompt) {
    for (int i = 0; i < 4; i++) {
      device_free(*arrays[i]);
      *arrays[i] = NULL;
    }
    d->n_prompt = 0;
    for (int i = 0; i < 4; i++)
      OBC_CUDA_TRY(OBC_CUDA_ALLOC(arrays[i], c->n_layers * sizes[i] * sizeof(double), what[i]));
    d->n_prompt = request->n_prompt;
  }
  for (int i = 0; i < 4; i++)
    OBC_CUDA_TRY(OBC_CUDA(
        cudaMemsetAsync(*arrays[i], 0, c->n_layers * sizes[i] * sizeof(double), s->stream)));
  return 0;
}

/* The all-rows sums of one layer become its agnostic ones. */
static int sums_snapshot(CudaState *s, size_t layer) {
  DeviceSums *d = &s->sums;
  double *arrays[4] = {d->attn, d->obc, d->q_sum, d->q_outer};
  size_t sizes[4];
  sums_sizes(s, d->n_prompt, sizes);
  for (int i = 0; i < 4; i++) {
    size_t variant = sizes[i] / RUNTIME_SUMS_VARIANTS;
    double *base = arrays[i] + layer * sizes[i];
    OBC_CUDA_TRY(OBC_CUDA(
        cudaMemcpyAsync(base + RUNTIME_SUMS_AGNOSTIC * variant, base + RUNTIME_SUMS_ALL * variant,
                        variant * sizeof(double), cudaMemcpyDeviceToDevice, s->stream)));
  }
  return 0;
}

/* Rows [t_begin, t_end) of the chunk into one layer's all-rows sums; the
 * query statistics from row stats_first on. */
static int sums_rows(CudaState *s, const TwinSumsShape *shape, size_t layer, size_t t_begin,
                     size_t t_end, size_t stats_first) {
  const ModelConfig *c = &s->model->config;
  DeviceSums *d = &s->sums;
  size_t sizes[4];
  sums_sizes(s, d->n_prompt, sizes);
  size_t layer_offset = layer * c->n_kv_heads * s->cache->max_context * c->head_dim;
  size_t all = RUNTIME_SUMS_ALL;
  double *attn = d->attn + layer * sizes[0] + all * (sizes[0] / RUNTIME_SUMS_VARIANTS);
  double *obc = d->obc + layer * sizes[1] + all * (sizes[1] / RUNTIME_SUMS_VARIANTS);
  double *q_sum = d->q_sum + layer * sizes[2] + all * (sizes[2] / RUNTIME_SUMS_VARIANTS);
  double *q_outer = d->q_outer + layer * sizes[3] + all * (sizes[3] / RUNTIME_SUMS_VARIANTS);
  OBC_CUDA_TRY(cuda_column_sums_add(shape, s->q, s->att, s->lse, s->k_cache + layer_offset,
                                    s->v_cache + layer_offset, t_begin, t_end, attn, obc,
                                    s->stream));
  size_t first = stats_first > t_begin ? stats_first : t_begin;
  return cuda_query_stats_add(shape, s->q, s->rope_cos, s->rope_sin, c->rope_interleaved, first,
                              t_end, q_sum, q_outer, s->stream);
}

/* One layer of the chunk [pos0, pos0 + n), as twin_sums_layer (twins.h)
 * does it on the host: the plan of twin_sums_plan with the kernels. */
static int sums_layer(CudaState *s, const RuntimeSums *request, size_t layer, size_t pos0,
                      size_t n) {
  const ModelConfig *c = &s->model->config;
  TwinSumsPlan plan = twin_sums_plan(request, pos0, n);
  if (plan.rows == 0) return 0;
  TwinSumsShape shape;
  shape.n_heads = c->n_heads;
  shape.n_kv_heads = c->n_kv_heads;
  shape.head_dim = c->head_dim;
  shape.kv_stride = s->cache->max_context;
  shape.pos0 = pos0;
  shape.n = n;
  shape.n_prompt = request->n_prompt;
  shape.scale = request->scale;
  OBC_CUDA_TRY(sums_rows(s, &shape, layer, 0, plan.cut, plan.stats_first));
  if (plan.snapshot) OBC_CUDA_TRY(sums_snapshot(s, layer));
  return sums_rows(s, &shape, layer, plan.cut, plan.rows, plan.stats_first);
}

/* After the chunk that holds row n_prompt - 1: the sums into the host arrays
 * (ordinary host memory: copied through the driver's staging buffers). */
static int sums_download(CudaState *s, const RuntimeSums *request) {
  const ModelConfig *c = &s->model->config;
  DeviceSums *d = &s->sums;
  const double *arrays[4] = {d->attn, d->obc, d->q_sum, d->q_outer};
  double *host[4] = {request->attn, request->obc, request->q_sum, request->q_outer};
  size_t sizes[4];
  sums_sizes(s, d->n_prompt, sizes);
  for (int i = 0; i < 4; i++)
    OBC_CUDA_TRY(
        OBC_CUDA(cudaMemcpyAsync(host[i], arrays[i], c->n_layers * sizes[i] * sizeof(double),
                                 cudaMemcpyDeviceToHost, s->stream)));
  return 0;
}

/* Checks a forward call's sums request against the chunk and the state. */
static int sums_check(CudaState *s, const RuntimeSums *request, size_t pos0) {
  const ModelConfig *c = &s->model->config;
  if (!cuda_sums_supports(c->head_dim))
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: head_dim %zu is not one the CUDA sums take (expected a multiple of 4 "
                    "up to %d; hint: OBC_CAPTURE_SUMS=cpu)",
                    s->model->path, c->head_dim, (int)CUDA_SUMS_MAX_HEAD_DIM);
  if (pos0 > 0 && pos0 < request->n_prompt && s->sums.n_prompt != request->n_prompt)
    return obc_fail(OBC_EINVAL,
                    "--device cuda: device sums over %zu prompt rows must start at position 0 "
                    "(this call starts at %zu)",
                    request->n_prompt, pos0);
  return 0;
}

/* ---- forward ------------------------------------------------------------------ */

/* The eviction marks (runtime_evict, runtime_set_kept), uploaded whole (1
 * byte per cached row: 8 MiB for an 8B model at 32K) when the host's
 * marks_version changed since the last upload, not at every call. */
static int sync_eviction_marks(CudaState *s) {
  const RuntimeCache *cache = s->cache;
  if (!cache->evicted) return 0;
  if (s->marks_uploaded && s->marks_version == cache->marks_version) return 0;
  size_t bytes = cache->n_layers * cache->n_kv_heads * cache->max_context;
  if (!s->evicted) OBC_CUDA_TRY(OBC_CUDA_ALLOC(&s->evicted, bytes, "eviction marks"));
  OBC_CUDA_TRY(OBC_CUDA(
      cudaMemcpyAsync(s->evicted, cache->evicted, bytes, cudaMemcpyHostToDevice, s->stream)));
  s->marks_version = cache->marks_version;
  s->marks_uploaded = true;
  return 0;
}

/* Uploads rows [from, to) of every (layer, KV head) from the host cache. */
static int upload_rows(CudaState *s, size_t from, size_t to) {
  const RuntimeCache *cache = s->cache;
  size_t hd = cache->head_dim, count = to - from;
  for (size_t l = 0; l < cache->n_layers && count; l++)
    for (size_t g = 0; g < cache->n_kv_heads; g++) {
      size_t offset = ((l * cache->n_kv_heads + g) * cache->max_context + from) * hd;
      OBC_CUDA_TRY(
          OBC_CUDA(cudaMemcpyAsync(s->k_cache + offset, runtime_cache_k(cache, l, g) + from * hd,
                                   count * hd * sizeof(float), cudaMemcpyHostToDevice, s->stream)));
      OBC_CUDA_TRY(
          OBC_CUDA(cudaMemcpyAsync(s->v_cache + offset, runtime_cache_v(cache, l, g) + from * hd,
                                   count * hd * sizeof(float), cudaMemcpyHostToDevice, s->stream)));
    }
  return 0;
}

/* Brings the device cache up to the host's: the rows the host wrote
 * (runtime_set_position: [0, host_written)) and any valid rows beyond the
 * device's copy. A rewind (runtime_rewind) uploads nothing. */
static int sync_device_cache(CudaState *s) {
  RuntimeCache *cache = s->cache;
  size_t written = cache->host_written < cache->length ? cache->host_written : cache->length;
  if (written) OBC_CUDA_TRY(upload_rows(s, 0, written));
  size_t from = s->device_length > written ? s->device_length : written;
  if (cache->length > from) OBC_CUDA_TRY(upload_rows(s, from, cache->length));
  cache->host_written = 0;
  s->device_length = cache->length;
  return 0;
}

/* Queues one transformer block on the chunk in s->x (positions [pos0, pos0 + n)). */
static int run_layer(CudaState *s, size_t layer, size_t pos0, size_t n, const ChunkRows *rows) {
  const ModelConfig *c = &s->model->config;
  const CudaLayer *w = &s->layers[layer];
  size_t hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
  size_t layer_offset = layer * c->n_kv_heads * s->cache->max_context * hd;
  float *k_cache = s->k_cache + layer_offset, *v_cache = s->v_cache + layer_offset;
  cudaStream_t st = s->stream;
  const void *in = NULL;
  size_t span = 0;

  OBC_CUDA_TRY(cuda_rmsnorm(s->xb, s->x, w->attn_norm, n, c->dim, c->norm_eps, st));
  OBC_CUDA_TRY(gemm_input(s, s->xb, n, c->dim, &in));
  OBC_CUDA_TRY(span_begin(s, SPAN_GEMM, &span));
  OBC_CUDA_TRY(gemm(s, s->q, in, w->wq, n, c->dim, q_dim, 0.0f));
  OBC_CUDA_TRY(gemm(s, s->k, in, w->wk, n, c->dim, kv_dim, 0.0f));
  OBC_CUDA_TRY(gemm(s, s->v, in, w->wv, n, c->dim, kv_dim, 0.0f));
  OBC_CUDA_TRY(span_end(s, span));
  if (w->bq) OBC_CUDA_TRY(cuda_add_bias(s->q, w->bq, n, q_dim, st));
  if (w->bk) OBC_CUDA_TRY(cuda_add_bias(s->k, w->bk, n, kv_dim, st));
  if (w->bv) OBC_CUDA_TRY(cuda_add_bias(s->v, w->bv, n, kv_dim, st));
  /* Qwen3: one RMSNorm row per head, as cpu_attention_inputs */
  if (w->q_norm)
    OBC_CUDA_TRY(cuda_rmsnorm(s->q, s->q, w->q_norm, n * c->n_heads, hd, c->norm_eps, st));
  if (w->k_norm)
    OBC_CUDA_TRY(cuda_rmsnorm(s->k, s->k, w->k_norm, n * c->n_kv_heads, hd, c->norm_eps, st));
  OBC_CUDA_TRY(
      cuda_rope(s->q, n, c->n_heads, hd, pos0, s->rope_cos, s->rope_sin, c->rope_interleaved, st));
  OBC_CUDA_TRY(cuda_rope(s->k, n, c->n_kv_heads, hd, pos0, s->rope_cos, s->rope_sin,
                         c->rope_interleaved, st));
  OBC_CUDA_TRY(cuda_store_kv(k_cache, s->k, n, c->n_kv_heads, hd, s->cache->max_context, pos0, st));
  OBC_CUDA_TRY(cuda_store_kv(v_cache, s->v, n, c->n_kv_heads, hd, s->cache->max_context, pos0, st));

  CpuAttentionShape shape = {c->n_heads, c->n_kv_heads,        hd, s->cache->max_context, pos0,
                             n,          layer_marks(s, layer)};
  OBC_CUDA_TRY(span_begin(s, SPAN_ATTENTION, &span));
  OBC_CUDA_TRY(cuda_attention(&shape, s->q, k_cache, v_cache, s->att, s->lse, st));
  OBC_CUDA_TRY(span_end(s, span));
  if (rows && rows->capture->sums) OBC_CUDA_TRY(sums_layer(s, rows->capture->sums, layer, pos0, n));
  if (rows) OBC_CUDA_TRY(capture_layer(s, layer, rows, &s->slots[layer % 2]));

  /* Residual adds are the GEMMs' beta = 1 (as on the CPU). */
  OBC_CUDA_TRY(gemm_input(s, s->att, n, q_dim, &in));
  OBC_CUDA_TRY(span_begin(s, SPAN_GEMM, &span));
  OBC_CUDA_TRY(gemm(s, s->x, in, w->wo, n, q_dim, c->dim, 1.0f));
  OBC_CUDA_TRY(span_end(s, span));
  OBC_CUDA_TRY(cuda_rmsnorm(s->xb, s->x, w->ffn_norm, n, c->dim, c->norm_eps, st));
  OBC_CUDA_TRY(gemm_input(s, s->xb, n, c->dim, &in));
  OBC_CUDA_TRY(span_begin(s, SPAN_GEMM, &span));
  OBC_CUDA_TRY(gemm(s, s->gate, in, w->w_gate, n, c->dim, c->ffn_dim, 0.0f));
  OBC_CUDA_TRY(gemm(s, s->up, in, w->w_up, n, c->dim, c->ffn_dim, 0.0f));
  OBC_CUDA_TRY(span_end(s, span));
  OBC_CUDA_TRY(cuda_swiglu(s->gate, s->up, n * c->ffn_dim, st));
  OBC_CUDA_TRY(gemm_input(s, s->gate, n, c->ffn_dim, &in));
  OBC_CUDA_TRY(span_begin(s, SPAN_GEMM, &span));
  OBC_CUDA_TRY(gemm(s, s->x, in, w->w_down, n, c->ffn_dim, c->dim, 1.0f));
  return span_end(s, span);
}

/* The requested rows inside [pos0, pos0 + n), uploaded as chunk indices. */
static int chunk_rows(CudaState *s, const RuntimeCapture *capture, size_t pos0, size_t n,
                      ChunkRows *rows) {
  memset(rows, 0, sizeof *rows);
  rows->capture = capture;
  rows->pos0 = pos0;
  rows->n = n;
  size_t first;
  runtime_capture_chunk_rows(capture, pos0, n, &first, &rows->n_rows);
  rows->first = first;
  for (size_t r = 0; r < rows->n_rows; r++)
    s->host_row_t[r] = (int32_t)(capture->row_positions[first + r] - pos0);
  OBC_CUDA_TRY(slots_reserve(s, rows->n_rows, n, pos0 + n, capture->want_attn));
  if (rows->n_rows == 0) return OBC_OK;
  return OBC_CUDA(cudaMemcpyAsync(s->row_t, s->host_row_t, rows->n_rows * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, s->stream));
}

static int forward_layers(CudaState *s, size_t pos0, size_t n, const ChunkRows *rows) {
  const ModelConfig *c = &s->model->config;
  for (size_t layer = 0; layer < c->n_layers; layer++) {
    OBC_CUDA_TRY(run_layer(s, layer, pos0, n, rows));
    /* The previous layer's capture is handed over while this one runs. */
    if (rows && layer > 0) OBC_CUDA_TRY(capture_deliver(s, rows, &s->slots[(layer - 1) % 2]));
  }
  if (rows) OBC_CUDA_TRY(capture_deliver(s, rows, &s->slots[(c->n_layers - 1) % 2]));
  return 0;
}

static int forward_logits(CudaState *s, size_t n, RuntimeLogits which, float *logits) {
  const ModelConfig *c = &s->model->config;
  size_t first = which == RUNTIME_LOGITS_LAST ? n - 1 : 0, rows_out = n - first;
  const void *in = NULL;
  size_t span = 0;
  OBC_CUDA_TRY(cuda_rmsnorm(s->xb, s->x + first * c->dim, s->output_norm, rows_out, c->dim,
                            c->norm_eps, s->stream));
  OBC_CUDA_TRY(gemm_input(s, s->xb, rows_out, c->dim, &in));
  OBC_CUDA_TRY(span_begin(s, SPAN_GEMM, &span));
  OBC_CUDA_TRY(gemm(s, s->logits, in, s->output, rows_out, c->dim, c->vocab_size, 0.0f));
  OBC_CUDA_TRY(span_end(s, span));
  return OBC_CUDA(cudaMemcpyAsync(logits, s->logits, rows_out * c->vocab_size * sizeof(float),
                                  cudaMemcpyDeviceToHost, s->stream));
}

static int cuda_forward(void *state, const int32_t *tokens, size_t n, RuntimeLogits which,
                        float *logits, const RuntimeCapture *capture, RuntimeProfile *profile) {
  CudaState *s = (CudaState *)state;
  const ModelConfig *c = &s->model->config;
  size_t pos0 = s->cache->length;
  double start = obc_now_seconds();
  s->n_spans = 0;
  ChunkRows rows;
  int rc = sync_device_cache(s);
  if (!rc) rc = sync_eviction_marks(s);
  if (!rc)
    rc = OBC_CUDA(
        cudaMemcpyAsync(s->tokens, tokens, n * sizeof(int32_t), cudaMemcpyHostToDevice, s->stream));
  if (!rc) rc = cuda_embed(s->x, s->embedding, s->bf16, s->tokens, n, c->dim, s->stream);
  const RuntimeSums *sums = capture ? capture->sums : NULL;
  if (!rc && sums) rc = sums_check(s, sums, pos0);
  if (!rc && sums && pos0 == 0) rc = sums_begin(s, sums);
  if (!rc && capture) rc = chunk_rows(s, capture, pos0, n, &rows);
  if (!rc) rc = forward_layers(s, pos0, n, capture ? &rows : NULL);
  if (!rc && sums && pos0 < sums->n_prompt && pos0 + n >= sums->n_prompt)
    rc = sums_download(s, sums);
  if (!rc && which != RUNTIME_LOGITS_NONE) rc = forward_logits(s, n, which, logits);
  /* Also reports a failure inside an earlier kernel. */
  int sync = OBC_CUDA(cudaStreamSynchronize(s->stream));
  cudaStreamSynchronize(s->copy_stream);
  if (!rc) rc = sync;
  if (rc) return rc;
  s->cache->length = s->device_length = pos0 + n;
  double gemm_seconds = 0.0, attention_seconds = 0.0;
  OBC_CUDA_TRY(spans_collect(s, &gemm_seconds, &attention_seconds));
  double total = obc_now_seconds() - start;
  profile->gemm_seconds += gemm_seconds;
  profile->attention_seconds += attention_seconds;
  profile->other_seconds +=
      total > gemm_seconds + attention_seconds ? total - gemm_seconds - attention_seconds : 0.0;
  profile->tokens += n;
  return 0;
}

extern "C" const RuntimeBackend runtime_backend_cuda = {"cuda", cuda_create_f32, cuda_destroy,
                                                        cuda_forward, true};

extern "C" const RuntimeBackend runtime_backend_cuda_bf16 = {"cuda-bf16", cuda_create_bf16,
                                                             cuda_destroy, cuda_forward, true};
