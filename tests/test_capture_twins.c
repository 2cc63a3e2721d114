/* The C twins of the capture's CUDA sums (runtime/cuda/twins.h: the column
 * sums of attention and the pre-RoPE query statistics, and the per-layer plan
 * the CUDA backend follows) against the capture's own host sums
 * (capture/capture_sums.c, capture/capture_qstats.c) on seeded random K/V and
 * queries with their true attention outputs and lse (cpu_attention), prompts
 * cut into chunks as the runtime cuts them, over layers, GQA groups and every
 * place the question can start. No model, no GPU: tests/gpu/gpu_ops.c checks
 * the kernels against the same twins on the device. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture_qstats.h"
#include "capture/capture_sums.h"
#include "common/obc_startup.h"
#include "runtime/cpu_attention.h"
#include "runtime/cuda/twins.h"
#include "tests/test_env.h"

/* splitmix64, uniform in [-scale, scale). */
static void fill(float *x, size_t count, float scale, uint64_t seed) {
  uint64_t state = seed;
  for (size_t i = 0; i < count; i++) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x[i] = scale * ((float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

/* max |a - b| / max |b|: the error on the tensor's scale. */
static double normalised_error(const double *a, const double *b, size_t count) {
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < count; i++) {
    diff = fmax(diff, fabs(a[i] - b[i]));
    ref = fmax(ref, fabs(b[i]));
  }
  return ref > 0.0 ? diff / ref : diff;
}

typedef struct {
  size_t n_layers, n_heads, n_kv_heads, head_dim, n_prompt, chunk, agnostic_rows;
  int interleaved;
} SumsCase;

/* Both paths over one random prompt; checks they agree. */
static void run_case(const SumsCase *c) {
  size_t L = c->n_layers, H = c->n_heads, G = c->n_kv_heads, hd = c->head_dim, n = c->n_prompt;
  size_t half = hd / 2, q_dim = H * hd;
  float scale = (float)(1.0 / sqrt((double)hd));
  RuntimeCache cache = {.n_layers = L, .n_kv_heads = G, .max_context = n, .head_dim = hd};
  cache.k = malloc(L * G * n * hd * sizeof(float));
  cache.v = malloc(L * G * n * hd * sizeof(float));
  float *q = malloc(L * n * q_dim * sizeof(float));
  fill(cache.k, L * G * n * hd, 1.5f, 1);
  fill(cache.v, L * G * n * hd, 1.0f, 2);
  fill(q, L * n * q_dim, 1.5f, 3);
  /* The runtime's RoPE tables (runtime/cuda/backend_cuda.cu, capture_qstats). */
  double *inv_freq = malloc(half * sizeof(double));
  float *cos_table = malloc(n * half * sizeof(float)),
        *sin_table = malloc(n * half * sizeof(float));
  for (size_t j = 0; j < half; j++) inv_freq[j] = pow(10000.0, -2.0 * (double)j / (double)hd);
  for (size_t p = 0; p < n; p++)
    for (size_t j = 0; j < half; j++) {
      cos_table[p * half + j] = (float)cos((double)p * inv_freq[j]);
      sin_table[p * half + j] = (float)sin((double)p * inv_freq[j]);
    }

  CaptureSums host, twin;
  CaptureQueryStats host_stats, twin_stats;
  ck_assert_int_eq(capture_sums_init(&host, L, H, G, hd, n, c->agnostic_rows, scale), 0);
  ck_assert_int_eq(capture_sums_init(&twin, L, H, G, hd, n, c->agnostic_rows, scale), 0);
  ck_assert_int_eq(
      capture_qstats_init(&host_stats, L, H, hd, n, c->agnostic_rows, inv_freq, c->interleaved), 0);
  ck_assert_int_eq(
      capture_qstats_init(&twin_stats, L, H, hd, n, c->agnostic_rows, inv_freq, c->interleaved), 0);
  RuntimeSums request = {.n_prompt = n,
                         .agnostic_rows = c->agnostic_rows,
                         .qstats_first_row = TRACE_QSTATS_FIRST_ROW,
                         .scale = scale,
                         .attn = twin.attn,
                         .obc = twin.obc,
                         .q_sum = twin_stats.sum,
                         .q_outer = twin_stats.outer};

  float *out = malloc(c->chunk * q_dim * sizeof(float)),
        *lse = malloc(H * c->chunk * sizeof(float));
  float *view_q = malloc(c->chunk * q_dim * sizeof(float));
  float *view_o = malloc(c->chunk * q_dim * sizeof(float));
  size_t *positions = malloc(c->chunk * sizeof(size_t));
  int32_t *row_t = malloc(c->chunk * sizeof(int32_t));
  for (size_t pos0 = 0; pos0 < n; pos0 += c->chunk) {
    size_t m = n - pos0 < c->chunk ? n - pos0 : c->chunk;
    for (size_t t = 0; t < m; t++) {
      positions[t] = pos0 + t;
      row_t[t] = (int32_t)t;
    }
    for (size_t layer = 0; layer < L; layer++) {
      const float *k = runtime_cache_k(&cache, layer, 0), *v = runtime_cache_v(&cache, layer, 0);
      const float *qc = q + (layer * n + pos0) * q_dim;
      CpuAttentionShape shape = {H, G, hd, n, pos0, m, NULL};
      double gemm_seconds = 0.0;
      ck_assert_int_eq(cpu_attention(&shape, qc, k, v, out, lse, NULL, &gemm_seconds), 0);
      /* the host sums read the capture seam's (n_heads, n_rows, head_dim) view */
      twin_gather_rows(view_q, qc, row_t, m, H, hd);
      twin_gather_rows(view_o, out, row_t, m, H, hd);
      RuntimeLayerCapture view = {.layer = layer,
                                  .n_heads = H,
                                  .n_kv_heads = G,
                                  .head_dim = hd,
                                  .pos0 = pos0,
                                  .n_tokens = m,
                                  .n_rows = m,
                                  .row_positions = positions,
                                  .q = view_q,
                                  .o = view_o,
                                  .lse = lse};
      ck_assert_int_eq(capture_sums_add(&host, &view, &cache), 0);
      ck_assert_int_eq(capture_qstats_add(&host_stats, &view), 0);
      TwinSumsShape twin_shape = {H, G, hd, n, pos0, m, n, scale};
      twin_sums_layer(&request, &twin_shape, layer, qc, out, lse, k, v, cos_table, sin_table,
                      c->interleaved);
    }
  }
  capture_sums_count(&twin, 0, n);
  capture_qstats_count(&twin_stats, 0, n);
  capture_sums_finish(&host);
  capture_sums_finish(&twin);
  capture_qstats_finish(&host_stats);
  capture_qstats_finish(&twin_stats);

  /* Counts: row i sees positions p <= i, so n - p rows saw p, and
   * agnostic_rows - p of the rows before the question (all rows when the
   * prompt has none). */
  for (size_t p = 0; p < n; p++) {
    size_t agnostic = c->agnostic_rows < n ? c->agnostic_rows : n;
    ck_assert_int_eq(host.counts[TRACE_ROWS_ALL * n + p], (int64_t)(n - p));
    ck_assert_int_eq(host.counts[TRACE_ROWS_AGNOSTIC * n + p],
                     (int64_t)(agnostic > p ? agnostic - p : 0));
  }
  /* Counts are integers: equal. */
  ck_assert_mem_eq(host.counts, twin.counts, TRACE_ROWS_VARIANTS * n * sizeof *host.counts);
  ck_assert_mem_eq(host_stats.counts, twin_stats.counts, sizeof host_stats.counts);
  /* Query sums: the same double rotation (each product of two floats is
   * exact in double, so one rounding per component) added row by row in the
   * same order: bit-equal. */
  size_t stats = L * TRACE_ROWS_VARIANTS * H * hd;
  ck_assert_mem_eq(host_stats.sum, twin_stats.sum, stats * sizeof(double));
  /* Outer products: the host's dsyrk blocks and fuses the sum over rows.
   * Each entry is a sum of at most n products of doubles, so the two differ
   * by at most 2 n eps_64 sum|u_a u_b|, and sum|u_a u_b| <= the largest
   * diagonal entry (Cauchy-Schwarz): on the tensor's scale, 2 n eps_64. */
  double err = normalised_error(twin_stats.outer, host_stats.outer, stats * hd);
  ck_assert_msg(err <= 2.0 * (double)n * DBL_EPSILON, "query outer products: error %.3g", err);
  /* Column sums: both take each pair's logit as a float dot product of hd
   * terms (sgemm's order vs. an fmaf chain) and its a through cpu_expf; the
   * host adds a block of up to 64 rows in float before double, and takes
   * ||v - o||^2 as vv - 2 v.o + oo in float except for the row's largest
   * a. Every term is >= 0, so on the tensor's scale the error is bounded by
   * the per-term relative error: 64 eps_32 (the block sum) + hd eps_32 |z|max
   * (the logit through exp; |z| <= hd * 1.5^2 * scale here, 17 at hd 64)
   * for attn; the cancellation in dd adds a few eps_32 (vv + oo) / dd where
   * dd is small, and such pairs have small terms. 64 eps_32 + hd |z|max
   * eps_32, doubled for the cancellation, is the bound below. */
  double zmax = (double)hd * 1.5 * 1.5 * scale;
  double bound = 2.0 * (64.0 + (double)hd * zmax) * FLT_EPSILON;
  size_t plane = L * TRACE_ROWS_VARIANTS * H * n;
  err = normalised_error(twin.attn, host.attn, plane);
  printf("hd %zu, %zu rows, agnostic %zu: A %.3g, ", hd, n, c->agnostic_rows, err);
  ck_assert_msg(err <= bound, "column sums of A: error %.3g > %.3g", err, bound);
  for (size_t term = 0; term < TRACE_OBC_TERMS; term++) {
    double worst = 0.0, ref = 0.0;
    for (size_t lv = 0; lv < L * TRACE_ROWS_VARIANTS; lv++)
      for (size_t i = 0; i < H * n; i++) {
        size_t at = (lv * TRACE_OBC_TERMS + term) * H * n + i;
        worst = fmax(worst, fabs(twin.obc[at] - host.obc[at]));
        ref = fmax(ref, fabs(host.obc[at]));
      }
    printf("obc[%zu] %.3g%s", term, worst / ref, term + 1 < TRACE_OBC_TERMS ? ", " : "");
    ck_assert_msg(worst <= bound * ref, "OBCache column sums, term %zu: error %.3g > %.3g", term,
                  worst / ref, bound);
  }
  printf(" (bound %.3g)\n", bound);
  capture_sums_free(&host);
  capture_sums_free(&twin);
  capture_qstats_free(&host_stats);
  capture_qstats_free(&twin_stats);
  free(cache.k), free(cache.v), free(q), free(inv_freq), free(cos_table), free(sin_table);
  free(out), free(lse), free(view_q), free(view_o), free(positions), free(row_t);
}

START_TEST(test_twins_equal_host_sums_question_inside_a_chunk) {
  SumsCase c = {.n_layers = 2,
                .n_heads = 6,
                .n_kv_heads = 2,
                .head_dim = 64,
                .n_prompt = 150,
                .chunk = 64,
                .agnostic_rows = 100,
                .interleaved = 0};
  run_case(&c);
}
END_TEST

START_TEST(test_twins_equal_host_sums_question_at_a_chunk_start_interleaved) {
  SumsCase c = {.n_layers = 2,
                .n_heads = 4,
                .n_kv_heads = 4,
                .head_dim = 32,
                .n_prompt = 130,
                .chunk = 64,
                .agnostic_rows = 64,
                .interleaved = 1};
  run_case(&c);
}
END_TEST

START_TEST(test_twins_equal_host_sums_without_a_question) {
  SumsCase c = {.n_layers = 1,
                .n_heads = 6,
                .n_kv_heads = 3,
                .head_dim = 64,
                .n_prompt = 97,
                .chunk = 40,
                .agnostic_rows = 97,
                .interleaved = 0};
  run_case(&c);
}
END_TEST

START_TEST(test_twins_equal_host_sums_question_before_the_first_query_row) {
  SumsCase c = {.n_layers = 1,
                .n_heads = 2,
                .n_kv_heads = 1,
                .head_dim = 128,
                .n_prompt = 70,
                .chunk = 512,
                .agnostic_rows = 2,
                .interleaved = 0};
  run_case(&c);
}
END_TEST

START_TEST(test_plan_cuts_at_the_question_and_stops_at_the_prompt_end) {
  RuntimeSums sums = {.n_prompt = 100, .agnostic_rows = 70, .qstats_first_row = 4};
  TwinSumsPlan p = twin_sums_plan(&sums, 64, 64);
  ck_assert_uint_eq(p.rows, 36);
  ck_assert_uint_eq(p.cut, 6);
  ck_assert_int_eq(p.snapshot, 1);
  ck_assert_uint_eq(p.stats_first, 0);
  p = twin_sums_plan(&sums, 0, 64);
  ck_assert_uint_eq(p.rows, 64);
  ck_assert_uint_eq(p.cut, 64);
  ck_assert_int_eq(p.snapshot, 0);
  ck_assert_uint_eq(p.stats_first, 4);
  p = twin_sums_plan(&sums, 100, 1); /* a decode step: nothing */
  ck_assert_uint_eq(p.rows, 0);
  ck_assert_int_eq(p.snapshot, 0);
  sums.agnostic_rows = 100; /* no question: the caller's finish takes the copy */
  p = twin_sums_plan(&sums, 64, 64);
  ck_assert_int_eq(p.snapshot, 0);
  ck_assert_uint_eq(p.cut, 36);
}
END_TEST

static Suite *capture_twins_suite(void) {
  Suite *s = suite_create("capture_twins");
  TCase *tc = tcase_create("sums");
  tcase_set_timeout(tc, TEST_TIMEOUT_S);
  tcase_add_test(tc, test_plan_cuts_at_the_question_and_stops_at_the_prompt_end);
  tcase_add_test(tc, test_twins_equal_host_sums_question_inside_a_chunk);
  tcase_add_test(tc, test_twins_equal_host_sums_question_at_a_chunk_start_interleaved);
  tcase_add_test(tc, test_twins_equal_host_sums_without_a_question);
  tcase_add_test(tc, test_twins_equal_host_sums_question_before_the_first_query_row);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  (void)argc;
  obc_startup_defaults(argv);
  test_scratch_begin("capture_twins");
  SRunner *runner = srunner_create(capture_twins_suite());
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
