/* Op-by-op check of the CUDA kernels against their C twins (runtime/cpu_ops.h,
 * runtime/cpu_attention.h, runtime/cuda/twins.h) on seeded random inputs of
 * awkward sizes (rows not a multiple of a tile, GQA groups of 3, a chunk that
 * starts after cached rows). Prints one line per tensor with its normalised
 * error; exits 1 on any failure, 77 (skipped) without a CUDA device.
 *
 * Tolerances: pure data movement (embedding, bf16 conversion, K/V store,
 * gathers, argmax) must match exactly. Element-wise arithmetic differs only by
 * the GPU's expf vs. cpu_expf (<= 2 ulp each) and FMA contraction: 1e-6 of
 * the tensor's scale. Attention sums up to a few hundred exp-weighted terms in
 * a different order (online softmax, tile by tile): 1e-5. The capture's
 * device sums (cuda_sums.h) spell out every rounding as their twins do, so
 * they should be bit-equal; each line says whether they are, and 1e-6 (a
 * float rounding, e.g. one exponential) is the tolerance. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu_attention.h"
#include "runtime/cpu_ops.h"
#include "runtime/cuda/cuda_attention.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/cuda_sums.h"
#include "runtime/cuda/twins.h"
#include "tests/gpu/gpu_common.h"

static int failures;

static void check(int ok) { failures += !ok; }

static void *dev_upload(const void *host, size_t bytes) {
  void *dev = NULL;
  if (cudaMalloc(&dev, bytes ? bytes : 1) != cudaSuccess) {
    fprintf(stderr, "gpu_ops: cudaMalloc of %zu bytes failed\n", bytes);
    exit(1);
  }
  if (host) cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
  return dev;
}

static void dev_download(void *host, const void *dev, size_t bytes) {
  cudaError_t status = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
  if (status != cudaSuccess) {
    fprintf(stderr, "gpu_ops: a kernel failed: %s\n", cudaGetErrorString(status));
    exit(1);
  }
}

static void require(int rc) {
  if (rc < 0) {
    fprintf(stderr, "gpu_ops: %s\n", obc_error_message());
    exit(1);
  }
}

static float *random_floats(size_t count, float scale, uint64_t seed) {
  float *x = malloc(count * sizeof(float));
  gpu_fill(x, count, scale, seed);
  return x;
}

static void check_rmsnorm(void) {
  size_t n = 37, dim = 576;
  float *x = random_floats(n * dim, 2.0f, 1), *w = random_floats(dim, 1.0f, 2);
  float *ref = malloc(n * dim * sizeof(float)), *got = malloc(n * dim * sizeof(float));
  cpu_rmsnorm(ref, x, w, n, dim, 1e-5);
  float *dx = dev_upload(x, n * dim * 4), *dw = dev_upload(w, dim * 4),
        *dout = dev_upload(NULL, n * dim * 4);
  require(cuda_rmsnorm(dout, dx, dw, n, dim, 1e-5, 0));
  dev_download(got, dout, n * dim * 4);
  check(gpu_compare("rmsnorm (37 x 576)", got, ref, n * dim, 1e-6));
  cudaFree(dx), cudaFree(dw), cudaFree(dout);
  free(x), free(w), free(ref), free(got);
}

/* Qwen3's Q/K norms: cuda_rmsnorm in place over one row per head (37 tokens
 * of 8 heads of 128), as the backend calls it. */
static void check_head_rmsnorm(void) {
  size_t rows = 37 * 8, hd = 128;
  float *x = random_floats(rows * hd, 2.0f, 11), *w = random_floats(hd, 1.0f, 12);
  float *ref = malloc(rows * hd * sizeof(float)), *got = malloc(rows * hd * sizeof(float));
  cpu_rmsnorm(ref, x, w, rows, hd, 1e-6);
  float *dx = dev_upload(x, rows * hd * 4), *dw = dev_upload(w, hd * 4);
  require(cuda_rmsnorm(dx, dx, dw, rows, hd, 1e-6, 0));
  dev_download(got, dx, rows * hd * 4);
  check(gpu_compare("per-head rmsnorm in place (296 x 128)", got, ref, rows * hd, 1e-6));
  cudaFree(dx), cudaFree(dw);
  free(x), free(w), free(ref), free(got);
}

static void check_rope(int interleaved) {
  size_t n = 19, heads = 9, hd = 64, half = hd / 2, pos0 = 5, max_ctx = 64;
  float *x = random_floats(n * heads * hd, 1.0f, 3);
  float *cos_t = malloc(max_ctx * half * 4), *sin_t = malloc(max_ctx * half * 4);
  for (size_t p = 0; p < max_ctx; p++)
    for (size_t i = 0; i < half; i++) {
      double angle = (double)p * pow(10000.0, -2.0 * (double)i / (double)hd);
      cos_t[p * half + i] = (float)cos(angle);
      sin_t[p * half + i] = (float)sin(angle);
    }
  float *dx = dev_upload(x, n * heads * hd * 4), *dc = dev_upload(cos_t, max_ctx * half * 4),
        *ds = dev_upload(sin_t, max_ctx * half * 4);
  require(cuda_rope(dx, n, heads, hd, pos0, dc, ds, interleaved, 0));
  cpu_rope(x, n, heads, hd, pos0, cos_t, sin_t, interleaved);
  float *got = malloc(n * heads * hd * 4);
  dev_download(got, dx, n * heads * hd * 4);
  check(
      gpu_compare(interleaved ? "rope interleaved (19 x 9 x 64)" : "rope half-split (19 x 9 x 64)",
                  got, x, n * heads * hd, 1e-6));
  cudaFree(dx), cudaFree(dc), cudaFree(ds);
  free(x), free(cos_t), free(sin_t), free(got);
}

static void check_elementwise(void) {
  size_t count = 100003, n = 97, width = 331;
  float *gate = random_floats(count, 8.0f, 4), *up = random_floats(count, 2.0f, 5);
  float *dg = dev_upload(gate, count * 4), *du = dev_upload(up, count * 4);
  require(cuda_swiglu(dg, du, count, 0));
  cpu_swiglu(gate, up, count);
  float *got = malloc(count * 4);
  dev_download(got, dg, count * 4);
  check(gpu_compare("swiglu (100003)", got, gate, count, 1e-6));

  float *rows = random_floats(n * width, 1.0f, 6), *bias = random_floats(width, 1.0f, 7);
  float *dr = dev_upload(rows, n * width * 4), *db = dev_upload(bias, width * 4);
  require(cuda_add_bias(dr, db, n, width, 0));
  cpu_add_bias(rows, bias, n, width);
  dev_download(got, dr, n * width * 4);
  check(gpu_compare("add_bias (97 x 331)", got, rows, n * width, 0.0));

  uint16_t *h16 = malloc(count * 2), *ref16 = malloc(count * 2);
  uint16_t *d16 = dev_upload(NULL, count * 2);
  require(cuda_to_bf16(d16, du, count, 0));
  twin_to_bf16(ref16, up, count);
  dev_download(h16, d16, count * 2);
  size_t mismatches = 0;
  for (size_t i = 0; i < count; i++) mismatches += h16[i] != ref16[i];
  printf("  %-40s n=%-10zu mismatched bit patterns=%zu %s\n", "to_bf16 (round to nearest even)",
         count, mismatches, mismatches ? "FAIL" : "OK");
  check(mismatches == 0);
  cudaFree(dg), cudaFree(du), cudaFree(dr), cudaFree(db), cudaFree(d16);
  free(gate), free(up), free(got), free(rows), free(bias), free(h16), free(ref16);
}

static void check_embed_and_argmax(void) {
  size_t vocab = 301, dim = 96, n = 23;
  int32_t tokens[23];
  for (size_t t = 0; t < n; t++) tokens[t] = (int32_t)((t * 37 + 11) % vocab);
  float *table = random_floats(vocab * dim, 1.0f, 8);
  float *ref = malloc(n * dim * 4), *got = malloc(n * dim * 4);
  float *dt = dev_upload(table, vocab * dim * 4), *dout = dev_upload(NULL, n * dim * 4);
  int32_t *dtok = dev_upload(tokens, sizeof tokens);
  require(cuda_embed(dout, dt, 0, dtok, n, dim, 0));
  ModelMatrix table_matrix = model_matrix_f32(table, vocab, dim);
  cpu_embed(ref, &table_matrix, tokens, n);
  dev_download(got, dout, n * dim * 4);
  check(gpu_compare("embed fp32 (23 x 96)", got, ref, n * dim, 0.0));
  uint16_t *t16 = malloc(vocab * dim * 2);
  twin_to_bf16(t16, table, vocab * dim);
  uint16_t *dt16 = dev_upload(t16, vocab * dim * 2);
  require(cuda_embed(dout, dt16, 1, dtok, n, dim, 0));
  twin_embed_bf16(ref, t16, tokens, n, dim);
  dev_download(got, dout, n * dim * 4);
  check(gpu_compare("embed bf16 (23 x 96)", got, ref, n * dim, 0.0));

  size_t rows = 7, width = 50021;
  float *x = random_floats(rows * width, 1.0f, 9);
  x[2 * width + 777] = x[2 * width + 40000] = 5.0f; /* a tie: the first index wins */
  x[5 * width + width - 1] = 9.0f;
  int32_t got_i[7], ref_i[7];
  float *dx = dev_upload(x, rows * width * 4);
  int32_t *di = dev_upload(NULL, sizeof got_i);
  require(cuda_argmax(di, dx, rows, width, 0));
  twin_argmax(ref_i, x, rows, width);
  dev_download(got_i, di, sizeof got_i);
  int same = !memcmp(got_i, ref_i, sizeof got_i);
  printf("  %-40s rows=%zu %s (row 2: %d, expected 777)\n", "argmax (7 x 50021, ties)", rows,
         same ? "OK" : "FAIL", got_i[2]);
  check(same && got_i[2] == 777);
  cudaFree(dt), cudaFree(dout), cudaFree(dtok), cudaFree(dt16), cudaFree(dx), cudaFree(di);
  free(table), free(ref), free(got), free(t16), free(x);
}

static void check_store_and_gather(void) {
  size_t n = 21, g = 3, hd = 64, stride = 50, pos0 = 17, heads = 6;
  float *rows = random_floats(n * g * hd, 1.0f, 10);
  float *cache = calloc(g * stride * hd, 4), *got = calloc(g * stride * hd, 4);
  float *dc = dev_upload(cache, g * stride * hd * 4), *dr = dev_upload(rows, n * g * hd * 4);
  require(cuda_store_kv(dc, dr, n, g, hd, stride, pos0, 0));
  twin_store_kv(cache, rows, n, g, hd, stride, pos0);
  dev_download(got, dc, g * stride * hd * 4);
  check(gpu_compare("store_kv (21 rows at 17, 3 heads)", got, cache, g * stride * hd, 0.0));

  int32_t row_t[4] = {0, 5, 6, 20};
  size_t R = 4;
  float *src = random_floats(n * heads * hd, 1.0f, 11), *lse = random_floats(heads * n, 5.0f, 12);
  float *ref = malloc(heads * R * hd * 4), *out = malloc(heads * R * hd * 4);
  float *ds = dev_upload(src, n * heads * hd * 4), *dl = dev_upload(lse, heads * n * 4);
  float *dd = dev_upload(NULL, heads * R * hd * 4);
  int32_t *drt = dev_upload(row_t, sizeof row_t);
  require(cuda_gather_rows(dd, ds, drt, R, heads, hd, 0));
  twin_gather_rows(ref, src, row_t, R, heads, hd);
  dev_download(out, dd, heads * R * hd * 4);
  check(gpu_compare("gather_rows (4 of 21, 6 heads)", out, ref, heads * R * hd, 0.0));
  require(cuda_gather_lse(dd, dl, drt, R, heads, n, 0));
  twin_gather_lse(ref, lse, row_t, R, heads, n);
  dev_download(out, dd, heads * R * 4);
  check(gpu_compare("gather_lse (4 of 21, 6 heads)", out, ref, heads * R, 0.0));
  cudaFree(dc), cudaFree(dr), cudaFree(ds), cudaFree(dl), cudaFree(dd), cudaFree(drt);
  free(rows), free(cache), free(got), free(src), free(lse), free(ref), free(out);
}

/* Attention of a chunk of n queries after pos0 cached rows, with captured rows;
 * evict: every third cached row of KV head g (offset g) is marked evicted. */
static void check_attention(size_t hd, size_t heads, size_t kv_heads, size_t pos0, size_t n,
                            int evict) {
  size_t stride = pos0 + n + 7, q_dim = heads * hd, n_keys = pos0 + n;
  unsigned char *marks = calloc(kv_heads * stride, 1);
  for (size_t g = 0; evict && g < kv_heads; g++)
    for (size_t p = g; p < pos0; p += 3) marks[g * stride + p] = 1;
  CpuAttentionShape shape = {heads, kv_heads, hd, stride, pos0, n, evict ? marks : NULL};
  float *q = random_floats(n * q_dim, 1.5f, 13 + hd),
        *k = random_floats(kv_heads * stride * hd, 1.5f, 14),
        *v = random_floats(kv_heads * stride * hd, 1.0f, 15);
  /* Captured rows: the first, middle and last query, each once (with n = 1
   * they are one row: a repeated row would leave reference rows unwritten). */
  int32_t row_of[1024], row_t[3];
  size_t R = 0;
  for (size_t t = 0; t < n; t++) row_of[t] = -1;
  const size_t wanted[3] = {0, n / 2, n - 1};
  for (size_t i = 0; i < 3; i++)
    if (row_of[wanted[i]] < 0) {
      row_of[wanted[i]] = (int32_t)R;
      row_t[R++] = (int32_t)wanted[i];
    }
  float *ref_out = malloc(n * q_dim * 4), *ref_lse = malloc(heads * n * 4);
  float *ref_attn = malloc(heads * R * n_keys * 4);
  CpuAttentionRows rows = {row_of, R, ref_attn};
  double gemm_seconds = 0.0;
  require(cpu_attention(&shape, q, k, v, ref_out, ref_lse, &rows, &gemm_seconds));

  float *dq = dev_upload(q, n * q_dim * 4), *dk = dev_upload(k, kv_heads * stride * hd * 4),
        *dv = dev_upload(v, kv_heads * stride * hd * 4), *dout = dev_upload(NULL, n * q_dim * 4),
        *dlse = dev_upload(NULL, heads * n * 4), *dattn = dev_upload(NULL, heads * R * n_keys * 4);
  int32_t *drt = dev_upload(row_t, sizeof row_t);
  unsigned char *dmarks = dev_upload(marks, kv_heads * stride);
  CpuAttentionShape device_shape = shape;
  device_shape.evicted = evict ? dmarks : NULL;
  require(cuda_attention(&device_shape, dq, dk, dv, dout, dlse, 0));
  require(cuda_attention_rows(&device_shape, dq, dk, dlse, drt, R, dattn, 0));
  float *out = malloc(n * q_dim * 4), *lse = malloc(heads * n * 4),
        *attn = malloc(heads * R * n_keys * 4);
  dev_download(out, dout, n * q_dim * 4);
  dev_download(lse, dlse, heads * n * 4);
  dev_download(attn, dattn, heads * R * n_keys * 4);
  char label[96];
  snprintf(label, sizeof label, "attention out hd%zu %zu:%zu heads %zu+%zu%s", hd, heads, kv_heads,
           pos0, n, evict ? " evicted" : "");
  check(gpu_compare(label, out, ref_out, n * q_dim, 1e-5));
  snprintf(label, sizeof label, "attention lse hd%zu", hd);
  check(gpu_compare(label, lse, ref_lse, heads * n, 1e-5));
  snprintf(label, sizeof label, "attention rows A hd%zu (%zu rows)", hd, R);
  check(gpu_compare(label, attn, ref_attn, heads * R * n_keys, 1e-5));
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout), cudaFree(dlse), cudaFree(dattn),
      cudaFree(drt), cudaFree(dmarks);
  free(marks);
  free(q), free(k), free(v), free(ref_out), free(ref_lse), free(ref_attn), free(out), free(lse),
      free(attn);
}

/* The capture's device sums of one chunk (pos0 cached rows, n queries of
 * which the first `prompt` are prompt rows) against twin_column_sums_add and
 * twin_query_stats_add, added onto non-zero sums. */
static void check_sums(size_t hd, size_t heads, size_t kv_heads, size_t pos0, size_t n,
                       size_t prompt, int interleaved) {
  size_t stride = pos0 + n + 5, q_dim = heads * hd, half = hd / 2, n_prompt = pos0 + prompt;
  CpuAttentionShape shape = {heads, kv_heads, hd, stride, pos0, n, NULL};
  float *q = random_floats(n * q_dim, 1.5f, 40 + hd),
        *k = random_floats(kv_heads * stride * hd, 1.5f, 41),
        *v = random_floats(kv_heads * stride * hd, 1.0f, 42);
  float *o = malloc(n * q_dim * 4), *lse = malloc(heads * n * 4);
  double gemm_seconds = 0.0;
  require(cpu_attention(&shape, q, k, v, o, lse, NULL, &gemm_seconds));
  float *cos_table = malloc(stride * half * 4), *sin_table = malloc(stride * half * 4);
  for (size_t p = 0; p < stride; p++)
    for (size_t j = 0; j < half; j++) {
      double angle = (double)p * pow(10000.0, -2.0 * (double)j / (double)hd);
      cos_table[p * half + j] = (float)cos(angle);
      sin_table[p * half + j] = (float)sin(angle);
    }
  size_t n_attn = heads * n_prompt, n_obc = 3 * n_attn, n_sum = heads * hd, n_outer = n_sum * hd;
  double *start = malloc(n_outer * sizeof(double)), *ref[4], *got[4];
  float *noise = random_floats(n_outer, 1.0f, 43);
  for (size_t i = 0; i < n_outer; i++) start[i] = fabs((double)noise[i]);
  size_t counts[4] = {n_attn, n_obc, n_sum, n_outer};
  for (int i = 0; i < 4; i++) {
    ref[i] = malloc(counts[i] * sizeof(double));
    got[i] = malloc(counts[i] * sizeof(double));
    memcpy(ref[i], start, counts[i] * sizeof(double));
  }
  TwinSumsShape sums = {heads, kv_heads, hd,       stride,
                        pos0,  n,        n_prompt, (float)(1.0 / sqrt((double)hd))};
  size_t t_begin = prompt / 3; /* rows before it were added by an earlier call */
  twin_column_sums_add(&sums, q, o, lse, k, v, t_begin, prompt, ref[0], ref[1]);
  twin_query_stats_add(&sums, q, cos_table, sin_table, interleaved, t_begin, prompt, ref[2],
                       ref[3]);
  float *dq = dev_upload(q, n * q_dim * 4), *do_ = dev_upload(o, n * q_dim * 4),
        *dl = dev_upload(lse, heads * n * 4), *dk = dev_upload(k, kv_heads * stride * hd * 4),
        *dv = dev_upload(v, kv_heads * stride * hd * 4),
        *dc = dev_upload(cos_table, stride * half * 4),
        *ds = dev_upload(sin_table, stride * half * 4);
  double *dsums[4];
  for (int i = 0; i < 4; i++) dsums[i] = dev_upload(start, counts[i] * sizeof(double));
  require(cuda_column_sums_add(&sums, dq, do_, dl, dk, dv, t_begin, prompt, dsums[0], dsums[1], 0));
  require(
      cuda_query_stats_add(&sums, dq, dc, ds, interleaved, t_begin, prompt, dsums[2], dsums[3], 0));
  for (int i = 0; i < 4; i++) dev_download(got[i], dsums[i], counts[i] * sizeof(double));
  static const char *const names[4] = {"column sums A", "column sums obc (v, k, vk)", "query sums",
                                       "query outer products"};
  for (int i = 0; i < 4; i++) {
    char label[128];
    snprintf(label, sizeof label, "%s hd%zu %zu:%zu rows %zu..%zu at %zu%s", names[i], hd, heads,
             kv_heads, t_begin, prompt, pos0, interleaved ? " interleaved" : "");
    check(gpu_compare_doubles(label, got[i], ref[i], counts[i], 1e-6));
  }
  cudaFree(dq), cudaFree(do_), cudaFree(dl), cudaFree(dk), cudaFree(dv), cudaFree(dc), cudaFree(ds);
  for (int i = 0; i < 4; i++) cudaFree(dsums[i]), free(ref[i]), free(got[i]);
  free(q), free(k), free(v), free(o), free(lse), free(cos_table), free(sin_table), free(start),
      free(noise);
}

int main(void) {
  gpu_require_device("gpu_ops");
  printf("CUDA kernels vs. C twins (normalised max error = max|gpu - cpu| / max|cpu|):\n");
  check_rmsnorm();
  check_head_rmsnorm();
  check_rope(1);
  check_rope(0);
  check_elementwise();
  check_embed_and_argmax();
  check_store_and_gather();
  check_attention(64, 9, 3, 0, 200, 0);  /* prefill from empty, n not a tile multiple */
  check_attention(64, 9, 3, 300, 77, 0); /* a chunk after cached rows */
  check_attention(128, 8, 2, 131, 250, 0);
  check_attention(32, 4, 4, 5, 1, 0); /* one decode token, no GQA */
  check_attention(96, 6, 2, 40, 33, 0);
  check_attention(64, 9, 3, 300, 77, 1); /* runtime_evict marks on cached rows */
  check_attention(128, 8, 2, 70, 1, 1);
  check_sums(64, 9, 3, 100, 77, 50, 0); /* a chunk that runs past the prompt's end */
  check_sums(128, 8, 2, 0, 200, 200, 1);
  check_sums(32, 4, 4, 37, 64, 64, 0);
  printf("gpu_ops: %s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
