/* Grouped-query causal attention of one layer on the CPU, for a chunk of
 * queries against every cached key before them, as one tiled online-softmax
 * pass (docs/SCIENCE.md, "Attention in one pass"): per block of queries, key
 * tiles are multiplied by sgemm (Q_block K_tile^T, then P V_tile) with a
 * running max and sum per row, so long prompts stay GEMM-bound; a single query
 * (decode) takes all its keys as one tile, by sgemv. It also yields lse. */
#ifndef OBC_CPU_ATTENTION_H
#define OBC_CPU_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  size_t n_heads;
  size_t n_kv_heads;
  size_t head_dim;
  size_t kv_stride; /* cache rows per KV head (max_context) */
  size_t pos0;      /* position of the first query */
  size_t n;         /* queries at positions [pos0, pos0 + n); keys [0, pos0 + n) */
  /* 1 = key row evicted: left out of the softmax (weight exactly 0); NULL = none. */
  const unsigned char *evicted; /* (n_kv_heads, kv_stride) or NULL */
} CpuAttentionShape;

/* Optional copy of softmax rows for chosen queries: row_of[t] is the index of
 * query t among the captured rows, or -1. */
typedef struct {
  const int32_t *row_of; /* (n) */
  size_t n_rows;
  float *attn; /* (n_heads, n_rows, pos0 + n) */
} CpuAttentionRows;

/* out[t, h] = softmax(q[t, h] . K^T / sqrt(head_dim)) V over keys <= pos0 + t.
 * Returns 0 or OBC_ENOMEM. *gemm_seconds grows by the sgemm time of thread 0. */
int cpu_attention(const CpuAttentionShape *shape, const float *q /* (n, n_heads * head_dim) */,
                  const float *k /* (n_kv_heads, kv_stride, head_dim) */,
                  const float *v /* (n_kv_heads, kv_stride, head_dim) */,
                  float *out /* (n, n_heads * head_dim) */, float *lse /* (n_heads, n) */,
                  const CpuAttentionRows *rows, double *gemm_seconds);

/* The same attention in the former two passes, kept as the reference path
 * (tests/test_attention.c, bench/bench_attention.c): per (head, block of 64
 * queries), whole score rows from one sgemm, a stable softmax per row, one
 * sgemm with V. Same contract as cpu_attention. */
int cpu_attention_two_pass(const CpuAttentionShape *shape, const float *q, const float *k,
                           const float *v, float *out, float *lse, const CpuAttentionRows *rows,
                           double *gemm_seconds);

#endif
