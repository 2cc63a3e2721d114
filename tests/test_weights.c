/* Check suite of stored-type weights (model/model.h ModelMatrix,
 * runtime/cpu_ops.h cpu_gemm_weight): every ggml type's product agrees with
 * the exact product of the dequantised weights within the fp32 summation
 * bound, for the decode (quant_dot) and prefill (dequantised tiles) paths,
 * results do not depend on the thread count, and on the real SmolLM2 file the
 * native and --weights f32 models give the same logits within the tolerance
 * derived in docs/SCIENCE.md ("Stored-type weights") and the same argmax
 * wherever the f32 top-2 margin exceeds twice that tolerance. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "formats/float16.h"
#include "formats/gguf.h"
#include "model/model_load.h"
#include "runtime/cpu_ops.h"
#include "runtime/runtime.h"
#include "test_env.h"

static uint64_t rng_state = 7;

static uint32_t next_u32(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (uint32_t)(rng_state >> 32);
}

static float next_uniform(void) { return (float)next_u32() / 4294967296.0f * 2.0f - 1.0f; }

static void put_f16(uint8_t *p, uint16_t bits) {
  p[0] = (uint8_t)bits;
  p[1] = (uint8_t)(bits >> 8);
}

/* rows x cols weights of type: random bytes with finite f16 scales (about
 * 0.01 .. 0.02, the magnitude of real weight blocks), or random finite
 * values for F32/F16/BF16. */
static uint8_t *random_matrix(uint32_t type, size_t rows, size_t cols, size_t *row_bytes) {
  size_t block = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  *row_bytes = cols / block * block_bytes;
  size_t n_units = rows * cols / block;
  uint8_t *data = malloc(rows * *row_bytes);
  ck_assert_ptr_nonnull(data);
  for (size_t i = 0; i < rows * *row_bytes; i++) data[i] = (uint8_t)next_u32();
  for (size_t u = 0; u < n_units; u++) {
    uint8_t *b = data + u * block_bytes;
    uint16_t scale = (uint16_t)(0x2000 + (next_u32() & 0x3FF)); /* 2^-7 .. 2^-6 */
    switch (type) {
      case GGML_TYPE_F32: {
        float v = next_uniform();
        memcpy(b, &v, 4);
        break;
      }
      case GGML_TYPE_F16:
        put_f16(b, (uint16_t)(0x3000 + (next_u32() & 0x7FF) + (next_u32() & 0x8000)));
        break;
      case GGML_TYPE_BF16:
        put_f16(b, (uint16_t)(0x3C00 + (next_u32() & 0x3FF) + (next_u32() & 0x8000)));
        break;
      case GGML_TYPE_Q6_K: put_f16(b + 208, scale); break;
      case GGML_TYPE_Q4_1:
      case GGML_TYPE_Q5_1:
      case GGML_TYPE_Q4_K:
      case GGML_TYPE_Q5_K:
        put_f16(b, scale);
        put_f16(b + 2, (uint16_t)(scale ^ 0x8000)); /* a negative min */
        break;
      default: put_f16(b, scale); /* Q4_0, Q5_0, Q8_0 */
    }
  }
  return data;
}

static const uint32_t types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                                 GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                 GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

/* Whether every c[b, r] is within the fp32 bound of the exact product.
 * Any order of summing K products in fp32 is within gamma_K * sum |a_k w_k|
 * of the exact sum, gamma_K = K u / (1 - K u), u = 2^-24 (Higham, Accuracy
 * and Stability, 3.1); beta * c0 adds one more rounding of the result (u |c|)
 * and one of beta * c0 (u |beta c0|). */
static double worst_excess(const float *c, const float *c0, float beta, const float *a,
                           const float *w, size_t n, size_t rows, size_t cols) {
  double u = ldexp(1.0, -24), gamma = (double)cols * u / (1.0 - (double)cols * u), worst = 0.0;
  for (size_t b = 0; b < n; b++)
    for (size_t r = 0; r < rows; r++) {
      double exact = 0.0, magnitude = 0.0;
      for (size_t k = 0; k < cols; k++) {
        double term = (double)a[b * cols + k] * w[r * cols + k];
        exact += term;
        magnitude += fabs(term);
      }
      double base = beta * (double)c0[b * rows + r];
      double bound = gamma * magnitude + u * fabs(exact + base) + u * fabs(base) + 1e-30;
      double excess = fabs((double)c[b * rows + r] - (exact + base)) / bound;
      if (excess > worst) worst = excess;
    }
  return worst;
}

START_TEST(every_type_agrees_with_the_dequantised_product_within_the_fp32_bound) {
  const size_t rows = 70, cols = 512; /* two K super-blocks per row; 70: a partial row block */
  const size_t counts[] = {1, 2, 5, 8, 9, 33};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    size_t row_bytes;
    uint8_t *data = random_matrix(types[t], rows, cols, &row_bytes);
    float *w = malloc(rows * cols * sizeof(float));
    ck_assert_int_eq(dequant_gguf(types[t], data, w, rows * cols), 0);
    ModelMatrix m = {types[t], rows, cols, row_bytes, data};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
      size_t n = counts[i];
      float *a = malloc(n * cols * sizeof(float)), *c = malloc(n * rows * sizeof(float));
      float *c0 = malloc(n * rows * sizeof(float));
      for (size_t j = 0; j < n * cols; j++) a[j] = next_uniform();
      for (size_t j = 0; j < n * rows; j++) c0[j] = next_uniform();
      /* both paths at every n: quant_dot and dequantised tiles */
      for (int path = CPU_GEMM_DOT; path <= CPU_GEMM_TILES; path++)
        for (int with_beta = 0; with_beta < 2; with_beta++) {
          memcpy(c, c0, n * rows * sizeof(float));
          cpu_gemm_weight_path(c, a, &m, n, with_beta ? 1.0f : 0.0f, (CpuGemmPath)path);
          double excess = worst_excess(c, c0, with_beta ? 1.0f : 0.0f, a, w, n, rows, cols);
          ck_assert_msg(excess <= 1.0, "%s, n %zu, %s, beta %d: error %.3g of the fp32 bound",
                        gguf_type_name(types[t]), n, path == CPU_GEMM_DOT ? "dot" : "tiles",
                        with_beta, excess);
        }
      free(a);
      free(c);
      free(c0);
    }
    printf("%-5s: n = 1..33, both paths, beta 0/1 within the fp32 summation bound\n",
           gguf_type_name(types[t]));
    free(w);
    free(data);
  }
}
END_TEST

START_TEST(results_do_not_depend_on_the_thread_count) {
  const size_t rows = 300, cols = 1024; /* enough work to use every thread */
  const size_t counts[] = {1, 8, 40};
  int saved = omp_get_max_threads();
  for (size_t t = 1; t < sizeof types / sizeof types[0]; t++) {
    size_t row_bytes;
    uint8_t *data = random_matrix(types[t], rows, cols, &row_bytes);
    ModelMatrix m = {types[t], rows, cols, row_bytes, data};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
      size_t n = counts[i];
      float *a = malloc(n * cols * sizeof(float));
      float *one = malloc(n * rows * sizeof(float)), *many = malloc(n * rows * sizeof(float));
      for (size_t j = 0; j < n * cols; j++) a[j] = next_uniform();
      for (int path = CPU_GEMM_DOT; path <= CPU_GEMM_TILES; path++) {
        omp_set_num_threads(1);
        cpu_gemm_weight_path(one, a, &m, n, 0.0f, (CpuGemmPath)path);
        omp_set_num_threads(3);
        cpu_gemm_weight_path(many, a, &m, n, 0.0f, (CpuGemmPath)path);
        ck_assert_msg(!memcmp(one, many, n * rows * sizeof(float)), "%s, n %zu, %s: 1 vs 3 threads",
                      gguf_type_name(types[t]), n, path == CPU_GEMM_DOT ? "dot" : "tiles");
      }
      free(a);
      free(one);
      free(many);
    }
    free(data);
  }
  omp_set_num_threads(saved);
}
END_TEST

START_TEST(a_non_finite_scale_is_named_with_its_element) {
  static const struct {
    uint32_t type;
    size_t offset; /* of an f16 scale (or value) in block 5 */
    uint16_t bits;
  } cases[] = {{GGML_TYPE_Q4_K, 2, 0x7E00},
               {GGML_TYPE_Q6_K, 208, 0x7C00},
               {GGML_TYPE_Q8_0, 0, 0xFC00},
               {GGML_TYPE_F16, 0, 0x7C01}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t row_bytes, block = gguf_type_block_size(cases[i].type);
    uint8_t *data = random_matrix(cases[i].type, 4, 512, &row_bytes);
    ck_assert_int_eq(
        model_check_finite_stored("m.gguf", "blk.0.ffn_up.weight", cases[i].type, data, 4 * 512),
        0);
    put_f16(data + 5 * gguf_type_block_bytes(cases[i].type) + cases[i].offset, cases[i].bits);
    ck_assert_int_eq(
        model_check_finite_stored("m.gguf", "blk.0.ffn_up.weight", cases[i].type, data, 4 * 512),
        OBC_EVALUE);
    char expected[128];
    snprintf(expected, sizeof expected, "at element %zu (corrupt weights?)", 5 * block);
    const char *message = obc_error_message();
    printf("%s: %s\n", gguf_type_name(cases[i].type), message);
    ck_assert(strstr(message, "m.gguf: tensor blk.0.ffn_up.weight holds a non-finite value"));
    ck_assert_msg(strstr(message, expected), "%s", message);
    free(data);
  }
}
END_TEST

/* Prefill `prefill` tokens (logits of each), then decode the rest one at a
 * time: the prefill path (n > 8, tiles) and the decode path (quant_dot). */
static float *run_logits(const Model *model, const int32_t *tokens, size_t prefill, size_t n) {
  size_t vocab = model->config.vocab_size;
  float *logits = malloc(n * vocab * sizeof(float));
  ck_assert_ptr_nonnull(logits);
  RuntimeOptions options = {.max_context = n};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, prefill, RUNTIME_LOGITS_ALL, logits, NULL), 0);
  for (size_t t = prefill; t < n; t++)
    ck_assert_int_eq(
        runtime_forward(rt, tokens + t, 1, RUNTIME_LOGITS_LAST, logits + t * vocab, NULL), 0);
  runtime_free(rt);
  return logits;
}

START_TEST(smollm2_native_and_f32_weights_give_the_same_logits) {
  const char *path = test_real_model();
  if (!path) return;
  Model *native = NULL, *f32 = NULL;
  ModelLoadOptions o_native = {.weights = MODEL_WEIGHTS_NATIVE},
                   o_f32 = {.weights = MODEL_WEIGHTS_F32};
  ck_assert_msg(model_load_with(path, &o_native, &native) == 0, "%s", obc_error_message());
  ck_assert_msg(model_load_with(path, &o_f32, &f32) == 0, "%s", obc_error_message());
  ck_assert_uint_ne(native->weights.layers[0].wq.type, GGML_TYPE_F32);
  ck_assert_uint_eq(f32->weights.layers[0].wq.type, GGML_TYPE_F32);
  const char *text =
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
      "the face of the waters. And God said, Let there be light";
  int32_t *tokens = NULL;
  size_t n = 0;
  ck_assert_int_eq(tokenizer_encode(native->tokenizer, text, strlen(text), &tokens, &n), 0);
  ck_assert_uint_ge(n, 30);
  size_t prefill = n - 6, vocab = native->config.vocab_size;
  float *a = run_logits(native, tokens, prefill, n), *b = run_logits(f32, tokens, prefill, n);

  /* docs/SCIENCE.md, "Stored-type weights": relative to the largest |logit|,
   * 2 lambda sqrt(K) u per weight product (each path within lambda sqrt(K) u
   * of the exact sum, probabilistic bound with lambda = 7), added over the
   * 7 L + 1 products in series along the residual stream. */
  const ModelConfig *c = &native->config;
  double k = (double)(c->ffn_dim > c->dim ? c->ffn_dim : c->dim), u = ldexp(1.0, -24);
  double products = 7.0 * (double)c->n_layers + 1.0, lambda = 7.0;
  double rel_tol = 2.0 * lambda * sqrt(k) * u * products;
  double worst = 0.0;
  size_t checked = 0, skipped = 0;
  for (size_t t = 0; t < n; t++) {
    const float *x = a + t * vocab, *y = b + t * vocab;
    double peak = 0.0, diff = 0.0;
    size_t best = 0, second = 1, best_native = 0;
    for (size_t v = 0; v < vocab; v++) {
      peak = fmax(peak, fabs(y[v]));
      diff = fmax(diff, fabs((double)x[v] - y[v]));
      if (x[v] > x[best_native]) best_native = v;
    }
    for (size_t v = 1; v < vocab; v++)
      if (y[v] > y[best]) {
        second = best;
        best = v;
      } else if (v != best && (second == best || y[v] > y[second])) {
        second = v;
      }
    worst = fmax(worst, diff / peak);
    ck_assert_msg(diff <= rel_tol * peak, "position %zu: |native - f32| %.3g > %.3g", t, diff,
                  rel_tol * peak);
    /* each of the two top logits may move by the tolerance */
    if ((double)y[best] - y[second] > 2.0 * rel_tol * peak) {
      ck_assert_uint_eq(best_native, best);
      checked++;
    } else {
      skipped++;
    }
  }
  printf(
      "SmolLM2 native vs f32: %zu positions (%zu prefill, %zu decode), max |diff| %.3g of the "
      "largest logit (tolerance %.3g); argmax equal at %zu positions, %zu within the margin\n",
      n, prefill, n - prefill, worst, rel_tol, checked, skipped);
  free(a);
  free(b);
  free(tokens);
  model_free(native);
  model_free(f32);
}
END_TEST

static Suite *weights_suite(void) {
  Suite *s = suite_create("weights");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(tc, every_type_agrees_with_the_dequantised_product_within_the_fp32_bound);
  tcase_add_test(tc, results_do_not_depend_on_the_thread_count);
  tcase_add_test(tc, a_non_finite_scale_is_named_with_its_element);
  tcase_add_test(tc, smollm2_native_and_f32_weights_give_the_same_logits);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  SRunner *runner = srunner_create(weights_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
