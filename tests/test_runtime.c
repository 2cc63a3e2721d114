/* Check suite of the model runtime (runtime/runtime.h) on tiny random-weight
 * models built in memory: incremental decoding equals one long prefill, the
 * capture seam reports Q/O/lse/A that a direct recomputation from the cache
 * confirms without changing the logits, thread count and chunk size change
 * nothing beyond rounding, and the two RoPE layouts give the same model. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "runtime/runtime.h"

/* A tiny model: weights drawn from a fixed-seed generator. */
typedef struct {
  Model model;
  ModelLayerWeights layers[2];
  float *blocks[32];
  size_t n_blocks;
  uint64_t seed;
} TinyModel;

static float next_uniform(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(*state >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static float *tiny_array(TinyModel *m, size_t count, float scale, float offset) {
  float *a = malloc(count * sizeof(float));
  ck_assert_ptr_nonnull(a);
  for (size_t i = 0; i < count; i++) a[i] = offset + scale * next_uniform(&m->seed);
  m->blocks[m->n_blocks++] = a;
  return a;
}

static void tiny_build(TinyModel *m, size_t n_heads, size_t n_kv_heads, int interleaved,
                       int biases) {
  memset(m, 0, sizeof(*m));
  m->seed = 42;
  ModelConfig *c = &m->model.config;
  strcpy(c->name, "tiny");
  strcpy(c->architecture, biases ? "qwen2" : "llama");
  c->n_layers = 2;
  c->head_dim = 8;
  c->n_heads = n_heads;
  c->n_kv_heads = n_kv_heads;
  c->dim = 32;
  c->ffn_dim = 48;
  c->vocab_size = 50;
  c->context_length = 64;
  c->norm_eps = 1e-5;
  c->rope_theta = 10000.0;
  c->rope_interleaved = interleaved;
  c->qkv_bias = biases;
  size_t q_dim = n_heads * c->head_dim, kv_dim = n_kv_heads * c->head_dim;
  ModelWeights *w = &m->model.weights;
  w->token_embedding =
      model_matrix_f32(tiny_array(m, c->vocab_size * c->dim, 1.0f, 0.0f), c->vocab_size, c->dim);
  w->output_norm = tiny_array(m, c->dim, 0.2f, 1.0f);
  w->output =
      model_matrix_f32(tiny_array(m, c->vocab_size * c->dim, 0.3f, 0.0f), c->vocab_size, c->dim);
  w->layers = m->layers;
  for (size_t l = 0; l < c->n_layers; l++) {
    ModelLayerWeights *lw = &m->layers[l];
    lw->attn_norm = tiny_array(m, c->dim, 0.2f, 1.0f);
    lw->wq = model_matrix_f32(tiny_array(m, q_dim * c->dim, 0.5f, 0.0f), q_dim, c->dim);
    lw->wk = model_matrix_f32(tiny_array(m, kv_dim * c->dim, 0.5f, 0.0f), kv_dim, c->dim);
    lw->wv = model_matrix_f32(tiny_array(m, kv_dim * c->dim, 0.3f, 0.0f), kv_dim, c->dim);
    if (biases) {
      lw->bq = tiny_array(m, q_dim, 0.5f, 0.0f);
      lw->bk = tiny_array(m, kv_dim, 0.5f, 0.0f);
      lw->bv = tiny_array(m, kv_dim, 0.5f, 0.0f);
    }
    lw->wo = model_matrix_f32(tiny_array(m, c->dim * q_dim, 0.3f, 0.0f), c->dim, q_dim);
    lw->ffn_norm = tiny_array(m, c->dim, 0.2f, 1.0f);
    lw->w_gate =
        model_matrix_f32(tiny_array(m, c->ffn_dim * c->dim, 0.3f, 0.0f), c->ffn_dim, c->dim);
    lw->w_up = model_matrix_f32(tiny_array(m, c->ffn_dim * c->dim, 0.3f, 0.0f), c->ffn_dim, c->dim);
    lw->w_down =
        model_matrix_f32(tiny_array(m, c->dim * c->ffn_dim, 0.3f, 0.0f), c->dim, c->ffn_dim);
  }
}

static void tiny_free(TinyModel *m) {
  for (size_t i = 0; i < m->n_blocks; i++) free(m->blocks[i]);
}

static void tokens_fill(int32_t *tokens, size_t n) {
  for (size_t t = 0; t < n; t++) tokens[t] = (int32_t)((t * 7 + 3) % 50);
}

/* max |a - b| / max |b| */
static double relative_error(const float *a, const float *b, size_t count) {
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < count; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    ref = fmax(ref, fabs((double)b[i]));
  }
  return diff / ref;
}

/* Logits of every position of tokens, run in one call. */
static float *logits_all(const Model *model, const RuntimeOptions *options, const int32_t *tokens,
                         size_t n) {
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, options, &rt), 0);
  float *logits = malloc(n * model->config.vocab_size * sizeof(float));
  ck_assert_int_eq(runtime_forward(rt, tokens, n, RUNTIME_LOGITS_ALL, logits, NULL), 0);
  runtime_free(rt);
  return logits;
}

START_TEST(test_prefill_then_decode_equals_one_prefill) {
  TinyModel m;
  tiny_build(&m, 4, 2, 0, 0);
  size_t n = 20, extra = 6, vocab = m.model.config.vocab_size;
  int32_t tokens[26];
  tokens_fill(tokens, n + extra);
  RuntimeOptions options = {.max_context = 64};
  float *full = logits_all(&m.model, &options, tokens, n + extra);

  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(&m.model, &options, &rt), 0);
  float *step = malloc(vocab * sizeof(float));
  ck_assert_int_eq(runtime_forward(rt, tokens, n, RUNTIME_LOGITS_LAST, step, NULL), 0);
  double worst = relative_error(step, full + (n - 1) * vocab, vocab);
  for (size_t t = n; t < n + extra; t++) {
    ck_assert_int_eq(runtime_forward(rt, tokens + t, 1, RUNTIME_LOGITS_LAST, step, NULL), 0);
    worst = fmax(worst, relative_error(step, full + t * vocab, vocab));
  }
  ck_assert_uint_eq(runtime_position(rt), n + extra);
  printf("prefill %zu + decode %zu vs prefill %zu: max relative error %.3g\n", n, extra, n + extra,
         worst);
  ck_assert_double_le(worst, 1e-5);
  free(step);
  free(full);
  runtime_free(rt);
  tiny_free(&m);
}
END_TEST

START_TEST(test_chunked_prefill_equals_one_chunk) {
  TinyModel m;
  tiny_build(&m, 8, 2, 1, 1);
  size_t n = 40, vocab = m.model.config.vocab_size;
  int32_t tokens[40];
  tokens_fill(tokens, n);
  RuntimeOptions whole = {.max_context = 64}, chunked = {.max_context = 64, .max_batch = 7};
  float *a = logits_all(&m.model, &whole, tokens, n);
  float *b = logits_all(&m.model, &chunked, tokens, n);
  double err = relative_error(b, a, n * vocab);
  printf("chunks of 7 vs one chunk of 40: max relative error %.3g\n", err);
  ck_assert_double_le(err, 1e-5);
  free(a);
  free(b);
  tiny_free(&m);
}
END_TEST

START_TEST(test_one_and_two_threads_agree) {
  TinyModel m;
  tiny_build(&m, 4, 1, 0, 0);
  size_t n = 33, vocab = m.model.config.vocab_size;
  int32_t tokens[33];
  tokens_fill(tokens, n);
  RuntimeOptions one = {.max_context = 64, .threads = 1}, two = {.max_context = 64, .threads = 2};
  float *a = logits_all(&m.model, &one, tokens, n);
  float *b = logits_all(&m.model, &two, tokens, n);
  double err = relative_error(b, a, n * vocab);
  printf("1 vs 2 threads: max relative error %.3g\n", err);
  ck_assert_double_le(err, 1e-6);
  free(a);
  free(b);
  tiny_free(&m);
}
END_TEST

/* Swaps the half-split rows of every head of a (heads * head_dim, dim) matrix
 * into the interleaved order: new row 2i = old row i, 2i + 1 = old i + d/2. */
static void permute_rows(float *w, size_t n_heads, size_t head_dim, size_t dim) {
  float *copy = malloc(n_heads * head_dim * dim * sizeof(float));
  memcpy(copy, w, n_heads * head_dim * dim * sizeof(float));
  for (size_t h = 0; h < n_heads; h++)
    for (size_t i = 0; i < head_dim / 2; i++) {
      memcpy(w + (h * head_dim + 2 * i) * dim, copy + (h * head_dim + i) * dim,
             dim * sizeof(float));
      memcpy(w + (h * head_dim + 2 * i + 1) * dim, copy + (h * head_dim + i + head_dim / 2) * dim,
             dim * sizeof(float));
    }
  free(copy);
}

START_TEST(test_interleaved_rope_on_permuted_weights_gives_same_logits) {
  TinyModel half, inter;
  tiny_build(&half, 4, 2, 0, 1);
  tiny_build(&inter, 4, 2, 1, 1);
  const ModelConfig *c = &half.model.config;
  for (size_t l = 0; l < c->n_layers; l++) {
    permute_rows((float *)inter.layers[l].wq.data, c->n_heads, c->head_dim, c->dim);
    permute_rows((float *)inter.layers[l].wk.data, c->n_kv_heads, c->head_dim, c->dim);
    permute_rows(inter.layers[l].bq, c->n_heads, c->head_dim, 1);
    permute_rows(inter.layers[l].bk, c->n_kv_heads, c->head_dim, 1);
  }
  size_t n = 30;
  int32_t tokens[30];
  tokens_fill(tokens, n);
  RuntimeOptions options = {.max_context = 64};
  float *a = logits_all(&half.model, &options, tokens, n);
  float *b = logits_all(&inter.model, &options, tokens, n);
  double err = relative_error(b, a, n * c->vocab_size);
  printf("interleaved RoPE on permuted Q/K vs half-split: max relative error %.3g\n", err);
  ck_assert_double_le(err, 1e-5);
  free(a);
  free(b);
  tiny_free(&half);
  tiny_free(&inter);
}
END_TEST

/* Capture callback: recomputes every captured row from the cache. */
typedef struct {
  Runtime *rt;
  size_t calls;
  size_t rows_seen;
  const Model *model;
  const int32_t *tokens; /* (positions) the sequence run so far */
  double worst_q;        /* layer 0 only: its input is the embedding */
  double worst_lse;
  double worst_attn;
  double worst_o;
} CaptureCheck;

/* Q of layer 0, head h, at a position: RoPE(W_q RMSNorm(embedding)), in
 * double, with the interleaved-pair rotation of the model under test. */
static void layer0_query(const Model *m, int32_t token, size_t pos, size_t h, double *q) {
  const ModelConfig *c = &m->config;
  const ModelLayerWeights *w = &m->weights.layers[0];
  const float *x = (const float *)m->weights.token_embedding.data + (size_t)token * c->dim;
  double ms = 0.0;
  for (size_t i = 0; i < c->dim; i++) ms += (double)x[i] * x[i];
  double scale = 1.0 / sqrt(ms / (double)c->dim + c->norm_eps);
  size_t hd = c->head_dim;
  for (size_t d = 0; d < hd; d++) {
    const float *row = (const float *)w->wq.data + (h * hd + d) * c->dim;
    q[d] = 0.0;
    for (size_t i = 0; i < c->dim; i++) q[d] += row[i] * (x[i] * scale * w->attn_norm[i]);
  }
  ck_assert(c->rope_interleaved);
  for (size_t i = 0; i < hd / 2; i++) {
    double angle = (double)pos * pow(c->rope_theta, -2.0 * (double)i / (double)hd);
    double a = q[2 * i], b = q[2 * i + 1];
    q[2 * i] = a * cos(angle) - b * sin(angle);
    q[2 * i + 1] = a * sin(angle) + b * cos(angle);
  }
}

static int check_layer(void *user, const RuntimeLayerCapture *view) {
  CaptureCheck *cc = user;
  const RuntimeCache *cache = runtime_cache(cc->rt);
  size_t hd = view->head_dim, group = view->n_heads / view->n_kv_heads;
  cc->calls++;
  /* The view's new K rows are the cache rows of this chunk. */
  for (size_t g = 0; g < view->n_kv_heads; g++)
    ck_assert(view->k + g * view->kv_stride * hd ==
              runtime_cache_k(cache, view->layer, g) + view->pos0 * hd);
  for (size_t h = 0; h < view->n_heads; h++) {
    const float *k = runtime_cache_k(cache, view->layer, h / group);
    const float *v = runtime_cache_v(cache, view->layer, h / group);
    for (size_t r = 0; r < view->n_rows; r++) {
      size_t pos = view->row_positions[r];
      const float *q = view->q + (h * view->n_rows + r) * hd;
      if (view->layer == 0) {
        double want[64];
        layer0_query(cc->model, cc->tokens[pos], pos, h, want);
        for (size_t d = 0; d < hd; d++) cc->worst_q = fmax(cc->worst_q, fabs(q[d] - want[d]));
      }
      double z[64], max = -INFINITY, sum = 0.0;
      for (size_t p = 0; p <= pos; p++) {
        z[p] = 0.0;
        for (size_t d = 0; d < hd; d++) z[p] += (double)q[d] * k[p * hd + d];
        z[p] /= sqrt((double)hd);
        max = fmax(max, z[p]);
      }
      for (size_t p = 0; p <= pos; p++) sum += exp(z[p] - max);
      double lse = max + log(sum);
      double got_lse = view->lse[h * view->n_rows + r];
      cc->worst_lse = fmax(cc->worst_lse, fabs(got_lse - lse));
      const float *a = view->attn + (h * view->n_rows + r) * view->n_keys;
      for (size_t p = 0; p < view->n_keys; p++) {
        double want = p <= pos ? exp(z[p] - lse) : 0.0;
        cc->worst_attn = fmax(cc->worst_attn, fabs(a[p] - want));
      }
      for (size_t d = 0; d < hd; d++) {
        double o = 0.0;
        for (size_t p = 0; p <= pos; p++) o += exp(z[p] - lse) * v[p * hd + d];
        cc->worst_o = fmax(cc->worst_o, fabs(view->o[(h * view->n_rows + r) * hd + d] - o));
      }
      cc->rows_seen++;
    }
  }
  return 0;
}

START_TEST(test_capture_reports_consistent_rows_and_keeps_logits) {
  TinyModel m;
  tiny_build(&m, 6, 2, 1, 0);
  size_t n = 24, vocab = m.model.config.vocab_size;
  int32_t tokens[25];
  tokens_fill(tokens, n + 1);
  RuntimeOptions options = {.max_context = 64, .max_batch = 10};
  Runtime *rt = NULL;
  float *plain = malloc((n + 1) * vocab * sizeof(float));
  ck_assert_int_eq(runtime_create(&m.model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, n, RUNTIME_LOGITS_ALL, plain, NULL), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens + n, 1, RUNTIME_LOGITS_ALL, plain + n * vocab, NULL),
                   0);
  runtime_free(rt);

  ck_assert_int_eq(runtime_create(&m.model, &options, &rt), 0);
  size_t positions[] = {0, 9, 10, 17, 23, 24};
  CaptureCheck cc = {.rt = rt, .model = &m.model, .tokens = tokens};
  RuntimeCapture capture = {.row_positions = positions,
                            .n_rows = 6,
                            .want_attn = true,
                            .user = &cc,
                            .on_layer = check_layer};
  float *captured = malloc((n + 1) * vocab * sizeof(float));
  ck_assert_int_eq(runtime_forward(rt, tokens, n, RUNTIME_LOGITS_ALL, captured, &capture), 0);
  ck_assert_int_eq(
      runtime_forward(rt, tokens + n, 1, RUNTIME_LOGITS_ALL, captured + n * vocab, &capture), 0);
  printf(
      "capture: %zu calls, %zu rows; max |Q| diff (layer 0) %.3g, |lse| diff %.3g, "
      "|A| diff %.3g, |O| diff %.3g\n",
      cc.calls, cc.rows_seen, cc.worst_q, cc.worst_lse, cc.worst_attn, cc.worst_o);
  ck_assert_double_le(cc.worst_q, 1e-5);
  /* 3 chunks of the prefill + 1 decode step, each per layer. */
  ck_assert_uint_eq(cc.calls, 4 * m.model.config.n_layers);
  ck_assert_uint_eq(cc.rows_seen, 6 * 6 * m.model.config.n_layers);
  ck_assert_double_le(cc.worst_lse, 1e-5);
  ck_assert_double_le(cc.worst_attn, 1e-6);
  ck_assert_double_le(cc.worst_o, 1e-5);
  /* Capture only reads: the same calls without it give the same bits. */
  ck_assert_int_eq(memcmp(plain, captured, (n + 1) * vocab * sizeof(float)), 0);
  free(plain);
  free(captured);
  runtime_free(rt);
  tiny_free(&m);
}
END_TEST

static int failing_layer(void *user, const RuntimeLayerCapture *view) {
  (void)user;
  return view->layer == 1 ? obc_fail(OBC_EIO, "capture: disk full") : 0;
}

START_TEST(test_failed_capture_and_overlong_input_leave_cache_unchanged) {
  TinyModel m;
  tiny_build(&m, 4, 2, 0, 0);
  int32_t tokens[64];
  tokens_fill(tokens, 64);
  RuntimeOptions options = {.max_context = 16};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(&m.model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, 10, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, 7, RUNTIME_LOGITS_NONE, NULL, NULL), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "context"));
  size_t row = 11;
  RuntimeCapture capture = {.row_positions = &row, .n_rows = 1, .on_layer = failing_layer};
  ck_assert_int_eq(runtime_forward(rt, tokens, 2, RUNTIME_LOGITS_NONE, NULL, &capture), OBC_EIO);
  int32_t bad = 50;
  ck_assert_int_eq(runtime_forward(rt, &bad, 1, RUNTIME_LOGITS_NONE, NULL, NULL), OBC_EINVAL);
  ck_assert_uint_eq(runtime_position(rt), 10);
  runtime_free(rt);
  tiny_free(&m);
}
END_TEST

/* Device sums (RuntimeSums) are a request only a backend with device_sums
 * takes: the CPU backend refuses it with a message, runs nothing and leaves
 * the cache as it was. */
START_TEST(test_device_sums_refused_by_the_cpu_backend) {
  TinyModel m;
  tiny_build(&m, 4, 2, 0, 0);
  int32_t tokens[8];
  tokens_fill(tokens, 8);
  RuntimeOptions options = {.max_context = 16};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(&m.model, &options, &rt), 0);
  ck_assert(!runtime_device_sums(rt));
  double sink[1];
  RuntimeSums sums = {.n_prompt = 8, .attn = sink, .obc = sink, .q_sum = sink, .q_outer = sink};
  RuntimeCapture capture = {.on_layer = failing_layer, .sums = &sums};
  ck_assert_int_eq(runtime_forward(rt, tokens, 8, RUNTIME_LOGITS_NONE, NULL, &capture), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "device sums"));
  ck_assert_uint_eq(runtime_position(rt), 0);
  runtime_free(rt);
  tiny_free(&m);
}
END_TEST

/* What a backend with its own cache copy (CUDA) reads to upload only what
 * changed: rows written on the host (runtime_set_position) against a rewind
 * (runtime_rewind), and a version that every change of the marks advances,
 * including the clearing of marks at appended positions. */
START_TEST(test_rewind_and_the_change_records_of_the_cache) {
  TinyModel m;
  tiny_build(&m, 4, 2, 0, 0);
  int32_t tokens[12];
  tokens_fill(tokens, 12);
  RuntimeOptions options = {.max_context = 32};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(&m.model, &options, &rt), 0);
  RuntimeCache *cache = runtime_cache(rt);
  ck_assert_int_eq(runtime_set_position(rt, 8), 0);
  ck_assert_uint_eq(cache->host_written, 8);
  ck_assert_int_eq(runtime_rewind(rt, 5), 0);
  ck_assert_uint_eq(runtime_position(rt), 5);
  ck_assert_uint_eq(cache->host_written, 5);
  ck_assert_int_eq(runtime_rewind(rt, 6), OBC_EINVAL); /* only backwards */
  ck_assert_int_eq(runtime_forward(rt, tokens, 5, RUNTIME_LOGITS_NONE, NULL, NULL), 0);

  uint64_t version = cache->marks_version;
  ck_assert_int_eq(runtime_evict(rt, 0, 1, 3), 0);
  ck_assert_uint_gt(cache->marks_version, version);
  version = cache->marks_version;
  unsigned char keep[10] = {1, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  ck_assert_int_eq(runtime_set_kept(rt, 1, 0, keep, 10), 0);
  ck_assert_uint_gt(cache->marks_version, version);
  version = cache->marks_version;
  ck_assert_int_eq(runtime_forward(rt, tokens, 1, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_uint_eq(cache->marks_version, version); /* position 10 had no mark */
  ck_assert_int_eq(runtime_evict(rt, 0, 0, 10), 0);
  ck_assert_int_eq(runtime_rewind(rt, 10), 0);
  version = cache->marks_version;
  ck_assert_int_eq(runtime_forward(rt, tokens, 1, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_uint_gt(cache->marks_version, version); /* its mark at 10 was cleared */
  version = cache->marks_version;
  runtime_clear_evictions(rt);
  ck_assert_uint_gt(cache->marks_version, version);
  runtime_free(rt);
  tiny_free(&m);
}
END_TEST

static Suite *runtime_suite(void) {
  Suite *s = suite_create("runtime");
  TCase *tc = tcase_create("cpu");
  tcase_add_test(tc, test_prefill_then_decode_equals_one_prefill);
  tcase_add_test(tc, test_chunked_prefill_equals_one_chunk);
  tcase_add_test(tc, test_one_and_two_threads_agree);
  tcase_add_test(tc, test_interleaved_rope_on_permuted_weights_gives_same_logits);
  tcase_add_test(tc, test_capture_reports_consistent_rows_and_keeps_logits);
  tcase_add_test(tc, test_failed_capture_and_overlong_input_leave_cache_unchanged);
  tcase_add_test(tc, test_device_sums_refused_by_the_cpu_backend);
  tcase_add_test(tc, test_rewind_and_the_change_records_of_the_cache);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  SRunner *runner = srunner_create(runtime_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
