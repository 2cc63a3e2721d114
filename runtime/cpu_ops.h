/* Element-wise and row-wise kernels of the CPU forward pass (RMSNorm, RoPE,
 * SwiGLU, embedding lookup, biases and Q/K norms) and the one GEMM wrapper every weight product goes
 * through. Rows are independent, so each kernel splits them over OpenMP
 * threads; fp32 GEMMs are OpenBLAS (OpenMP flavour), weights in a quantised
 * type go through formats/quant_dot.h or dequantised tiles. */
#ifndef OBC_CPU_OPS_H
#define OBC_CPU_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"

/* exp(x) for x in [-87, 88] (clamped outside) to about 1e-7 relative:
 * Cody-Waite reduction x = n ln2 + r, n rounded by the 1.5 * 2^23 trick, and a
 * degree-6 polynomial for e^r (the Cephes coefficients). Branch-free, so the
 * compiler vectorises loops over it. */
static inline float cpu_expf(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  float shifted = x * 1.44269504088896341f + 12582912.0f; /* n in the low mantissa bits */
  float n = shifted - 12582912.0f;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits;
  memcpy(&bits, &shifted, sizeof bits);
  bits = (bits - 0x4B400000 + 127) * (1 << 23);
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* out[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight, for n rows. */
void cpu_rmsnorm(float *out /* (n, dim) */, const float *x /* (n, dim) */,
                 const float *weight /* (dim) */, size_t n, size_t dim, double eps);

/* Rotates every head of n rows in place; row t sits at position pos0 + t.
 * cos/sin tables hold angle position * inv_freq[i]. interleaved: pairs
 * (2i, 2i+1); else halves (i, i + head_dim/2). */
void cpu_rope(float *x /* (n, n_heads * head_dim) */, size_t n, size_t n_heads, size_t head_dim,
              size_t pos0, const float *cos_table /* (max_context, head_dim/2) */,
              const float *sin_table /* (max_context, head_dim/2) */, int interleaved);

/* gate[i] = silu(gate[i]) * up[i]. */
void cpu_swiglu(float *gate /* (count) */, const float *up /* (count) */, size_t count);

/* out[t] = table[tokens[t]], each row dequantised from the table's type. */
void cpu_embed(float *out /* (n, dim) */, const ModelMatrix *table /* (vocab, dim) */,
               const int32_t *tokens /* (n) */, size_t n);

/* rows[t] += bias for n rows. */
void cpu_add_bias(float *rows /* (n, width) */, const float *bias /* (width) */, size_t n,
                  size_t width);

/* What comes between the Q/K/V projections of n rows and RoPE: the biases
 * (Qwen2) and the per-head RMSNorm of every query and key head (Qwen3), each
 * when the layer has it. */
void cpu_attention_inputs(const ModelConfig *config, const ModelLayerWeights *w,
                          float *q /* (n, n_heads * head_dim) */,
                          float *k /* (n, n_kv_heads * head_dim) */,
                          float *v /* (n, n_kv_heads * head_dim) */, size_t n);

/* Up to this many activation rows, a weight matrix in a quantised type is
 * multiplied by quant_dot_rows (dot products on the stored blocks, reading
 * each weight byte once); above it, by dequantised tiles and sgemm. Why 16:
 * quant_dot decodes each block once for all n rows, while a tile costs a
 * dequantisation and a 4-byte write and read per weight that sgemm's 2n
 * flops per weight amortise only for larger n. Measured with the AVX2 kernels
 * (bench_model, SmolLM2's layer-0 w_gate, Q4_1, 1536 x 576, per call, dot |
 * tiles): n = 1 0.05 | 0.33 ms, 8 0.16 | 0.36, 16 0.33 | 0.46, 32 0.66 | 0.69.
 * Re-measure when the kernels change. */
enum { CPU_GEMM_DOT_MAX_ROWS = 16 };

/* c = a * w^T + beta * c, with w a weight matrix (out, in) = (w->rows,
 * w->cols): a (n, in), c (n, out). F32: OpenBLAS sgemm (sgemv when n == 1).
 * Other types: n <= CPU_GEMM_DOT_MAX_ROWS, quant_dot_rows over blocks of
 * output rows split over OpenMP threads; else tiles of whole weight rows
 * dequantised into a per-thread scratch buffer, each times a by one
 * single-threaded sgemm. Tile and block boundaries depend only on the matrix,
 * so the result does not depend on the thread count. Adds its wall time to
 * *seconds. */
void cpu_gemm_weight(float *c, const float *a, const ModelMatrix *w, size_t n, float beta,
                     double *seconds);

/* The path cpu_gemm_weight takes for a quantised matrix, forced (tests and
 * bench/bench_model compare both at the same n; AUTO is cpu_gemm_weight's
 * choice). F32 matrices always go to OpenBLAS directly. */
typedef enum { CPU_GEMM_AUTO, CPU_GEMM_DOT, CPU_GEMM_TILES } CpuGemmPath;
void cpu_gemm_weight_path(float *c, const float *a, const ModelMatrix *w, size_t n, float beta,
                          CpuGemmPath path);

#endif
