/* Check suite for traces/: the writer and reader round-trip every field and
 * tensor (f32 and f16, compressed or not), files appear only on commit, the
 * synthetic generator is deterministic and its O/lse match a brute-force
 * recomputation, and every kind of bad input fails with the right code and a
 * message naming the file. Bad files are made by editing a good trace with
 * the HDF5 API. */
#include <check.h>
#include <hdf5.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_startup.h"
#include "traces/synth.h"
#include "traces/trace.h"
#include "traces/trace_h5.h"
#include "tests/test_env.h"

/* One scratch folder per run, named by main() before the tests fork, inside
 * the suite's (test_scratch_begin), which main() removes when every test
 * passed. */
static char scratch[4096];

static void make_scratch(void) { ck_assert_int_eq(obc_make_dirs(scratch), 0); }

static void scratch_path(char *out, size_t size, const char *name) {
  make_scratch();
  snprintf(out, size, "%s/%s", scratch, name);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void assert_message_names(const char *path) {
  const char *msg = obc_error_message();
  ck_assert_msg(strstr(msg, path) != NULL, "message '%s' does not name '%s'", msg, path);
  ck_assert_msg(strchr(msg, '\n') == NULL, "message '%s' is not one line", msg);
}

/* ---- a hand-made trace with every optional part -------------------------------- */

enum { L = 2, H = 4, KVH = 2, D = 8, S = 12, T = 3, R = 5, VOCAB = 7 };
#define NP (S + T)

/* A value that differs for every (tensor, layer, head, index) and is not
 * exactly representable in half precision. */
static float fixture_value(int tensor, size_t layer, size_t head, size_t i) {
  return (float)(sin(0.37 * (double)(i + 1) + 1.3 * (double)tensor + 0.7 * (double)layer +
                     0.11 * (double)head) *
                 (1.0 + 0.001 * (double)i));
}

static void fixture_fill(float *x, size_t n, int tensor, size_t layer, size_t head) {
  for (size_t i = 0; i < n; i++) x[i] = fixture_value(tensor, layer, head, i);
}

static void fixture_meta(TraceMeta *m, int64_t *rows, int32_t *tokens) {
  memset(m, 0, sizeof *m);
  snprintf(m->model.name, sizeof m->model.name, "fixture-model");
  snprintf(m->model.architecture, sizeof m->model.architecture, "llama");
  m->model.n_layers = L, m->model.n_heads = H, m->model.n_kv_heads = KVH, m->model.head_dim = D;
  m->model.vocab_size = VOCAB;
  m->model.rope_theta = 500000.0;
  snprintf(m->model.rope_scaling, sizeof m->model.rope_scaling, "llama3");
  m->model.rope_factor = 8.0, m->model.rope_low_freq_factor = 1.0,
  m->model.rope_high_freq_factor = 4.0;
  m->model.rope_original_context = 8192;
  m->model.attn_scale = 1.0 / sqrt((double)D);
  snprintf(m->producer, sizeof m->producer, "test_traces fixture");
  m->n_prompt = S, m->n_decode = T, m->n_positions = NP, m->n_rows = R + T;
  for (size_t i = 0; i < R + T; i++) rows[i] = (int64_t)(S - R + i);
  for (size_t p = 0; p < NP; p++) tokens[p] = (int32_t)((p * 5 + 3) % VOCAB);
  m->row_positions = rows;
  m->tokens = tokens;
  m->prompt_text = "a prompt with \"quotes\"\nand a newline";
  m->generated_text = NULL;
  m->needle_found = 1;
  m->n_spans = 3;
  const char *names[3] = {"needle", "question", "empty"};
  int64_t ranges[3][2] = {{2, 5}, {9, 12}, {7, 7}};
  for (int i = 0; i < 3; i++) {
    snprintf(m->spans[i].name, sizeof m->spans[i].name, "%s", names[i]);
    m->spans[i].begin = ranges[i][0], m->spans[i].end = ranges[i][1];
  }
}

/* K, V, Q, O, lse (and A) of one layer of the fixture. */
static void fixture_write_layer(TraceWriter *w, size_t layer, bool with_attn) {
  float kv[2][NP * D], q[2][(R + T) * D], lse[R + T], attn[(R + T) * NP];
  for (size_t g = 0; g < KVH; g++) {
    fixture_fill(kv[0], NP * D, 0, layer, g), fixture_fill(kv[1], NP * D, 1, layer, g);
    ck_assert_int_eq(trace_write_kv(w, layer, g, kv[0], kv[1]), 0);
  }
  for (size_t h = 0; h < H; h++) {
    fixture_fill(q[0], (R + T) * D, 2, layer, h), fixture_fill(q[1], (R + T) * D, 3, layer, h);
    fixture_fill(lse, R + T, 4, layer, h), fixture_fill(attn, (R + T) * NP, 5, layer, h);
    ck_assert_int_eq(trace_write_rows(w, layer, h, q[0], q[1], lse), 0);
    if (with_attn) ck_assert_int_eq(trace_write_attn(w, layer, h, attn), 0);
  }
}

static int fixture_write(const char *path, bool f16, int level) {
  TraceMeta meta;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&meta, rows, tokens);
  TraceWriteOptions opt = {
      .store_f16 = f16, .compression_level = level, .store_attn = true, .store_logits = true};
  TraceWriter *w = NULL;
  int rc = trace_create(path, &meta, &opt, &w);
  if (rc) return rc;
  float logits[T * VOCAB];
  for (size_t layer = 0; layer < L; layer++) fixture_write_layer(w, layer, true);
  fixture_fill(logits, T * VOCAB, 6, 0, 0);
  ck_assert_int_eq(trace_write_logits(w, logits), 0);
  ck_assert_int_eq(trace_set_result(w, "the answer is 42", 0), 0); /* meta said 1 */
  return trace_commit(w);
}

/* Stored values: exact for f32, the nearest half for f16 (lse and logits are
 * always f32). */
static void assert_tensor(const float *got, size_t n, int tensor, size_t layer, size_t head,
                          bool half) {
  for (size_t i = 0; i < n; i++) {
    float want = fixture_value(tensor, layer, head, i);
    if (half) want = trace_h5_float_from_half(trace_h5_half_from_float(want));
    ck_assert_msg(got[i] == want, "tensor %d layer %zu head %zu [%zu]: %.9g != %.9g", tensor, layer,
                  head, i, (double)got[i], (double)want);
  }
}

static void check_round_trip(bool f16, int level) {
  char path[4200];
  snprintf(path, sizeof path, "%s/fixture-%s-%d.h5", (make_scratch(), scratch), f16 ? "f16" : "f32",
           level);
  ck_assert_msg(fixture_write(path, f16, level) == 0, "%s", obc_error_message());
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  const TraceMeta *m = trace_meta(r);
  TraceMeta want;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&want, rows, tokens);
  ck_assert_int_eq(m->schema_version, OBC_TRACE_SCHEMA_VERSION_PLAIN);
  ck_assert_int_eq(strlen(m->content_hash), 16);
  char recomputed[17];
  ck_assert_msg(trace_compute_hash(r, recomputed) == 0, "%s", obc_error_message());
  ck_assert_str_eq(recomputed, m->content_hash);
  ck_assert_str_eq(m->tool_version, OBC_VERSION);
  ck_assert_str_eq(m->producer, want.producer);
  ck_assert_int_eq(strlen(m->created), 20); /* 2026-01-01T00:00:00Z */
  ck_assert_str_eq(m->dtype, f16 ? "f16" : "f32");
  ck_assert(m->complete && m->has_attn && m->has_logits);
  ck_assert_str_eq(m->model.name, want.model.name);
  ck_assert_str_eq(m->model.architecture, want.model.architecture);
  ck_assert_uint_eq(m->model.n_layers, L);
  ck_assert_uint_eq(m->model.n_heads, H);
  ck_assert_uint_eq(m->model.n_kv_heads, KVH);
  ck_assert_uint_eq(m->model.head_dim, D);
  ck_assert_uint_eq(m->model.vocab_size, VOCAB);
  ck_assert(m->model.rope_theta == want.model.rope_theta);
  ck_assert_str_eq(m->model.rope_scaling, "llama3");
  ck_assert(m->model.rope_factor == 8.0 && m->model.rope_low_freq_factor == 1.0 &&
            m->model.rope_high_freq_factor == 4.0);
  ck_assert_uint_eq(m->model.rope_original_context, 8192);
  ck_assert(m->model.attn_scale == want.model.attn_scale);
  ck_assert_uint_eq(m->n_prompt, S);
  ck_assert_uint_eq(m->n_decode, T);
  ck_assert_uint_eq(m->n_positions, NP);
  ck_assert_uint_eq(m->n_rows, R + T);
  for (size_t i = 0; i < R + T; i++) ck_assert_int_eq(m->row_positions[i], rows[i]);
  ck_assert_ptr_nonnull(m->tokens);
  for (size_t p = 0; p < NP; p++) ck_assert_int_eq(m->tokens[p], tokens[p]);
  ck_assert_str_eq(m->prompt_text, want.prompt_text);
  ck_assert_str_eq(m->generated_text, "the answer is 42");
  ck_assert_int_eq(m->needle_found, 0); /* trace_set_result wins over the meta given at create */
  ck_assert_uint_eq(m->n_spans, 3);
  for (size_t i = 0; i < 3; i++) { /* in the order written, not alphabetical */
    ck_assert_str_eq(m->spans[i].name, want.spans[i].name);
    ck_assert_int_eq(m->spans[i].begin, want.spans[i].begin);
    ck_assert_int_eq(m->spans[i].end, want.spans[i].end);
  }
  float K[NP * D], V[NP * D], Q[(R + T) * D], O[(R + T) * D], lse[R + T], A[(R + T) * NP],
      logits[T * VOCAB];
  for (size_t layer = 0; layer < L; layer++) {
    for (size_t g = 0; g < KVH; g++) {
      ck_assert_int_eq(trace_read_kv(r, layer, g, K, V), 0);
      assert_tensor(K, NP * D, 0, layer, g, f16), assert_tensor(V, NP * D, 1, layer, g, f16);
      ck_assert_int_eq(trace_read_kv(r, layer, g, NULL, V), 0); /* either may be skipped */
    }
    for (size_t h = 0; h < H; h++) {
      ck_assert_int_eq(trace_read_rows(r, layer, h, Q, O, lse), 0);
      assert_tensor(Q, (R + T) * D, 2, layer, h, f16),
          assert_tensor(O, (R + T) * D, 3, layer, h, f16);
      assert_tensor(lse, R + T, 4, layer, h, false);
      ck_assert_int_eq(trace_read_attn(r, layer, h, A), 0);
      assert_tensor(A, (R + T) * NP, 5, layer, h, f16);
    }
  }
  ck_assert_int_eq(trace_read_logits(r, logits), 0);
  assert_tensor(logits, T * VOCAB, 6, 0, 0, false);
  trace_close(r);
}

/* Every K, V, Q, O and lse slab read twice, by several threads at once,
 * with slabs kept in memory up to limit bytes: what a kept slab gives is
 * what the file gives, whether the limit kept none, some or all of them. */
static void check_kept_slabs(const char *path, size_t limit) {
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  ck_assert_int_eq(trace_keep_slabs(r, limit), 0);
  int failures = 0;
#pragma omp parallel for num_threads(4) reduction(+ : failures) schedule(static, 1)
  for (int pass = 0; pass < 8; pass++) {
    float K[NP * D], V[NP * D], Q[(R + T) * D], O[(R + T) * D], lse[R + T];
    for (size_t layer = 0; layer < L; layer++) {
      for (size_t g = 0; g < KVH; g++) {
        failures += trace_read_kv(r, layer, g, K, V) != 0;
        for (size_t i = 0; i < NP * D; i++)
          failures += K[i] != trace_h5_float_from_half(
                                  trace_h5_half_from_float(fixture_value(0, layer, g, i))) ||
                      V[i] != trace_h5_float_from_half(
                                  trace_h5_half_from_float(fixture_value(1, layer, g, i)));
      }
      for (size_t h = 0; h < H; h++) {
        failures += trace_read_rows(r, layer, h, Q, O, lse) != 0;
        for (size_t i = 0; i < (R + T) * D; i++)
          failures += Q[i] != trace_h5_float_from_half(
                                  trace_h5_half_from_float(fixture_value(2, layer, h, i))) ||
                      O[i] != trace_h5_float_from_half(
                                  trace_h5_half_from_float(fixture_value(3, layer, h, i)));
        for (size_t i = 0; i < R + T; i++) failures += lse[i] != fixture_value(4, layer, h, i);
      }
    }
  }
  ck_assert_int_eq(failures, 0);
  trace_close(r);
}

START_TEST(kept_slabs_read_as_the_file_below_and_above_their_limit) {
  char path[4200];
  scratch_path(path, sizeof path, "kept.h5");
  ck_assert_msg(fixture_write(path, true, 1) == 0, "%s", obc_error_message());
  check_kept_slabs(path, 0);                          /* none kept */
  check_kept_slabs(path, 3 * NP * D * sizeof(float)); /* the first three */
  check_kept_slabs(path, SIZE_MAX);                   /* all */
  unlink(path);
}
END_TEST

START_TEST(round_trip_preserves_every_field_and_tensor_f32) { check_round_trip(false, 0); }
END_TEST
START_TEST(round_trip_preserves_every_field_and_tensor_f32_compressed) {
  check_round_trip(false, 6);
}
END_TEST
START_TEST(round_trip_preserves_every_field_and_tensor_f16) { check_round_trip(true, 0); }
END_TEST
START_TEST(round_trip_preserves_every_field_and_tensor_f16_compressed) {
  check_round_trip(true, 9);
}
END_TEST

START_TEST(half_conversion_rounds_to_nearest_even_and_keeps_specials) {
  ck_assert_uint_eq(trace_h5_half_from_float(1.0f), 0x3c00);
  ck_assert_uint_eq(trace_h5_half_from_float(-2.0f), 0xc000);
  ck_assert_uint_eq(trace_h5_half_from_float(65504.0f), 0x7bff);
  ck_assert_uint_eq(trace_h5_half_from_float(1e6f), 0x7c00);            /* overflow -> inf */
  ck_assert_uint_eq(trace_h5_half_from_float(1.0f + 0x1p-11f), 0x3c00); /* tie -> even */
  ck_assert_uint_eq(trace_h5_half_from_float(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  ck_assert_uint_eq(trace_h5_half_from_float(0x1p-24f), 0x0001); /* smallest subnormal */
  ck_assert(trace_h5_float_from_half(0x0001) == 0x1p-24f);
  ck_assert(isnan(trace_h5_float_from_half(trace_h5_half_from_float(NAN))));
  for (uint32_t bits = 0; bits < 0x10000; bits++) { /* every finite half survives the round trip */
    if ((bits & 0x7c00) == 0x7c00) continue;
    ck_assert_uint_eq(trace_h5_half_from_float(trace_h5_float_from_half((uint16_t)bits)), bits);
  }
}
END_TEST

/* ---- write-then-rename ------------------------------------------------------------- */

START_TEST(trace_appears_only_on_commit_and_abort_leaves_nothing) {
  char path[4200];
  scratch_path(path, sizeof path, "pending.h5");
  TraceMeta meta;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&meta, rows, tokens);
  TraceWriteOptions opt = {0};
  TraceWriter *w = NULL;
  ck_assert_int_eq(trace_create(path, &meta, &opt, &w), 0);
  char temp[4300];
  snprintf(temp, sizeof temp, "%s.tmp.%ld", path, (long)getpid());
  ck_assert(!exists(path));
  ck_assert(exists(temp));
  trace_abort(w);
  ck_assert(!exists(path));
  ck_assert(!exists(temp));

  ck_assert_int_eq(fixture_write(path, false, 0), 0);
  ck_assert(exists(path));
  ck_assert(!exists(temp));
}
END_TEST

START_TEST(interrupt_removes_the_temporary_file) {
  char path[4200];
  scratch_path(path, sizeof path, "interrupted.h5");
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) { /* create, then get Ctrl-C before committing */
    TraceMeta meta;
    int64_t rows[R + T];
    int32_t tokens[NP];
    fixture_meta(&meta, rows, tokens);
    TraceWriteOptions opt = {0};
    TraceWriter *w = NULL;
    if (trace_create(path, &meta, &opt, &w)) _exit(3);
    raise(SIGINT);
    _exit(4); /* not reached: the handler re-raises with the default action */
  }
  int status = 0;
  ck_assert_int_eq(waitpid(child, &status, 0), child);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "child status %d", status);
  char temp[4300];
  snprintf(temp, sizeof temp, "%s.tmp.%ld", path, (long)child);
  ck_assert(!exists(temp));
  ck_assert(!exists(path));
}
END_TEST

START_TEST(commit_refuses_a_trace_with_a_tensor_never_written) {
  char path[4200];
  scratch_path(path, sizeof path, "partial.h5");
  TraceMeta meta;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&meta, rows, tokens);
  TraceWriteOptions opt = {0};
  TraceWriter *w = NULL;
  ck_assert_int_eq(trace_create(path, &meta, &opt, &w), 0);
  float kv[NP * D] = {0};
  ck_assert_int_eq(trace_write_kv(w, 0, 0, kv, kv), 0);
  ck_assert_int_eq(trace_commit(w), OBC_EINVAL);
  assert_message_names(path);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "never written"));
  ck_assert(!exists(path));
}
END_TEST

START_TEST(unwritable_output_path_fails_with_the_path_and_leaves_nothing) {
  const char *path = "/nonexistent-obc-folder/trace.h5";
  TraceMeta meta;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&meta, rows, tokens);
  TraceWriteOptions opt = {0};
  TraceWriter *w = NULL;
  ck_assert_int_eq(trace_create(path, &meta, &opt, &w), OBC_EIO);
  ck_assert_ptr_null(w);
  assert_message_names(path);
  SynthOptions so;
  synth_options_default(&so);
  ck_assert_int_eq(synth_generate(&so, path), OBC_EIO);
  assert_message_names(path);
  ck_assert(!exists(path));
}
END_TEST

/* ---- meta helpers ---------------------------------------------------------------------- */

START_TEST(meta_helpers_find_window_decode_rows_and_spans) {
  TraceMeta m;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&m, rows, tokens);
  ck_assert_uint_eq(trace_meta_window_rows(&m), R);
  size_t first = 0;
  ck_assert_uint_eq(trace_meta_decode_rows(&m, &first), T);
  ck_assert_uint_eq(first, R);
  ck_assert_uint_eq(trace_meta_row_index(&m, 0), 0);
  ck_assert_uint_eq(trace_meta_row_index(&m, S - 1), R - 1);
  ck_assert_uint_eq(trace_meta_row_index(&m, NP), R + T);
  ck_assert_int_eq(trace_meta_find_span(&m, "question")->begin, 9);
  ck_assert_ptr_null(trace_meta_find_span(&m, "nothing"));
  /* A gap before the last prompt row: the contiguous window is what follows it. */
  int64_t gappy[4] = {2, 9, 10, 11};
  m.row_positions = gappy, m.n_rows = 4;
  ck_assert_uint_eq(trace_meta_window_rows(&m), 3);
  TraceMeta copy;
  m.row_positions = rows, m.n_rows = R + T;
  ck_assert_int_eq(trace_meta_copy(&copy, &m), 0);
  ck_assert_ptr_ne(copy.row_positions, m.row_positions);
  ck_assert_int_eq(copy.row_positions[R], S);
  ck_assert_str_eq(copy.prompt_text, m.prompt_text);
  trace_meta_free(&copy);
}
END_TEST

/* ---- synthetic traces ----------------------------------------------------------------------- */

static void synth_small(const char *name, uint64_t seed, int threads, bool attn, char *path,
                        size_t size) {
  scratch_path(path, size, name);
  SynthOptions o;
  synth_options_default(&o);
  o.seed = seed;
  o.store_attn = attn;
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  int rc = synth_generate(&o, path);
  omp_set_num_threads(saved);
  ck_assert_msg(rc == 0, "%s", obc_error_message());
}

/* Compares every tensor of two traces; returns the number of differing values. */
static size_t count_differences(const char *a_path, const char *b_path) {
  TraceReader *a = NULL, *b = NULL;
  ck_assert_int_eq(trace_open(a_path, &a), 0);
  ck_assert_int_eq(trace_open(b_path, &b), 0);
  const TraceMeta *m = trace_meta(a);
  size_t P = m->n_positions, Rn = m->n_rows, d = m->model.head_dim, n_diff = 0;
  size_t nk = P * d, nq = Rn * d;
  float *x = malloc((4 * nk + 4 * nq + 2 * Rn) * sizeof *x);
  float *Ka = x, *Va = Ka + nk, *Kb = Va + nk, *Vb = Kb + nk;
  float *Qa = Vb + nk, *Oa = Qa + nq, *Qb = Oa + nq, *Ob = Qb + nq, *la = Ob + nq, *lb = la + Rn;
  for (size_t layer = 0; layer < m->model.n_layers; layer++) {
    for (size_t g = 0; g < m->model.n_kv_heads; g++) {
      ck_assert_int_eq(trace_read_kv(a, layer, g, Ka, Va), 0);
      ck_assert_int_eq(trace_read_kv(b, layer, g, Kb, Vb), 0);
      for (size_t i = 0; i < nk; i++) n_diff += (Ka[i] != Kb[i]) + (Va[i] != Vb[i]);
    }
    for (size_t h = 0; h < m->model.n_heads; h++) {
      ck_assert_int_eq(trace_read_rows(a, layer, h, Qa, Oa, la), 0);
      ck_assert_int_eq(trace_read_rows(b, layer, h, Qb, Ob, lb), 0);
      for (size_t i = 0; i < nq; i++) n_diff += (Qa[i] != Qb[i]) + (Oa[i] != Ob[i]);
      for (size_t i = 0; i < Rn; i++) n_diff += la[i] != lb[i];
    }
  }
  free(x);
  trace_close(a), trace_close(b);
  return n_diff;
}

START_TEST(synth_same_seed_gives_identical_tensors_whatever_the_thread_count) {
  char a[4200], b[4200], c[4200];
  synth_small("seed1-a.h5", 1, 1, false, a, sizeof a);
  synth_small("seed1-b.h5", 1, 2, false, b, sizeof b);
  synth_small("seed2.h5", 2, 2, false, c, sizeof c);
  ck_assert_uint_eq(count_differences(a, b), 0);
  ck_assert_uint_gt(count_differences(a, c), 1000);
}
END_TEST

/* Brute force: plain loops in double, straight from the definitions. */
START_TEST(synth_outputs_equal_a_brute_force_recomputation) {
  char path[4200];
  synth_small("brute.h5", 7, 2, true, path, sizeof path);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  const TraceMeta *m = trace_meta(r);
  size_t P = m->n_positions, Rn = m->n_rows, d = m->model.head_dim;
  size_t group = m->model.n_heads / m->model.n_kv_heads;
  float *K = malloc(P * d * sizeof *K), *V = malloc(P * d * sizeof *V),
        *Q = malloc(Rn * d * sizeof *Q);
  float *O = malloc(Rn * d * sizeof *O), *lse = malloc(Rn * sizeof *lse),
        *A = malloc(Rn * P * sizeof *A);
  double *z = malloc(P * sizeof *z), worst_lse = 0, worst_o = 0, worst_a = 0;
  for (size_t layer = 0; layer < m->model.n_layers; layer++)
    for (size_t h = 0; h < m->model.n_heads; h++) {
      ck_assert_int_eq(trace_read_kv(r, layer, h / group, K, V), 0);
      ck_assert_int_eq(trace_read_rows(r, layer, h, Q, O, lse), 0);
      ck_assert_int_eq(trace_read_attn(r, layer, h, A), 0);
      for (size_t i = 0; i < Rn; i++) {
        size_t live = (size_t)m->row_positions[i] + 1;
        double sum = 0.0;
        for (size_t p = 0; p < live; p++) {
          z[p] = 0.0;
          for (size_t j = 0; j < d; j++) z[p] += (double)Q[i * d + j] * K[p * d + j];
          z[p] *= m->model.attn_scale;
          sum += exp(z[p]); /* the logits here are small: no overflow */
        }
        double l = log(sum);
        worst_lse = fmax(worst_lse, fabs(l - lse[i]) / fmax(1.0, fabs(l)));
        double diff2 = 0.0, norm2 = 0.0;
        for (size_t j = 0; j < d; j++) {
          double o = 0.0;
          for (size_t p = 0; p < live; p++) o += exp(z[p] - l) * V[p * d + j];
          diff2 += (o - O[i * d + j]) * (o - O[i * d + j]), norm2 += o * o;
        }
        worst_o = fmax(worst_o, sqrt(diff2 / norm2));
        for (size_t p = 0; p < P; p++)
          worst_a = fmax(worst_a, fabs((p < live ? exp(z[p] - l) : 0.0) - A[i * P + p]));
      }
    }
  printf("synth vs brute force: worst lse %.3g, O %.3g, A %.3g\n", worst_lse, worst_o, worst_a);
  ck_assert_msg(worst_lse < 1e-6 && worst_o < 1e-6 && worst_a < 1e-6, "lse %g O %g A %g", worst_lse,
                worst_o, worst_a);
  free(K), free(V), free(Q), free(O), free(lse), free(A), free(z);
  trace_close(r);
}
END_TEST

/* The planted structure shows in A: decode rows (which "ask") put several
 * times the uniform share on the needle, and far more than the first captured
 * prompt row (which does not ask, and is as far from the needle); every row
 * gives the sink far more than a uniform share. Averaged over 16 heads. */
START_TEST(synth_records_spans_and_plants_sink_and_needle_attention) {
  char path[4200];
  scratch_path(path, sizeof path, "structure.h5");
  SynthOptions o;
  synth_options_default(&o);
  o.n_prompt = 256, o.n_heads = 8, o.store_attn = true, o.seed = 3;
  ck_assert_int_eq(synth_generate(&o, path), 0);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  const TraceMeta *m = trace_meta(r);
  const TraceSpan *needle = trace_meta_find_span(m, "needle"),
                  *question = trace_meta_find_span(m, "question");
  ck_assert_ptr_nonnull(needle);
  ck_assert_ptr_nonnull(question);
  ck_assert_int_eq(needle->end - needle->begin, 16);
  ck_assert_int_eq(needle->begin,
                   1 + 116); /* 1 + round(50% of the 256 - 8 - 1 - 16 free positions) */
  ck_assert_int_eq(question->end, (int64_t)m->n_prompt);
  ck_assert_int_le(needle->end, question->begin);
  size_t P = m->n_positions, Rn = m->n_rows;
  float *A = malloc(Rn * P * sizeof *A);
  size_t first_decode = 0;
  trace_meta_decode_rows(m, &first_decode);
  double needle_decode = 0.0, needle_first = 0.0, sink = 0.0, n_decode = 0.0, n_heads = 0.0;
  for (size_t layer = 0; layer < m->model.n_layers; layer++)
    for (size_t h = 0; h < m->model.n_heads; h++, n_heads++) {
      ck_assert_int_eq(trace_read_attn(r, layer, h, A), 0);
      for (size_t i = 0; i < Rn; i++) {
        double mass = 0.0;
        for (int64_t p = needle->begin; p < needle->end; p++) mass += A[i * P + (size_t)p];
        if (i >= first_decode) needle_decode += mass, n_decode++;
        if (i == 0) needle_first += mass;
        sink += A[i * P];
      }
    }
  needle_decode /= n_decode, needle_first /= n_heads, sink /= n_heads * (double)Rn;
  double uniform = 1.0 / (double)P;
  printf(
      "needle mass: decode rows %.3f, first prompt row %.3f, uniform %.3f; sink mass %.3f, uniform "
      "%.4f\n",
      needle_decode, needle_first, 16 * uniform, sink, uniform);
  ck_assert(needle_decode > 3.0 * 16 * uniform);
  ck_assert(needle_decode > 2.0 * needle_first);
  ck_assert(sink > 10.0 * uniform);
  free(A);
  trace_close(r);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------ */

static void good_copy(const char *name, char *path, size_t size) {
  scratch_path(path, size, name);
  ck_assert_int_eq(fixture_write(path, false, 0), 0);
}

static hid_t open_rw(const char *path) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  ck_assert_int_ge(f, 0);
  return f;
}

static void expect_open_failure(const char *path, int code, const char *phrase) {
  TraceReader *r = NULL;
  int rc = trace_open(path, &r);
  ck_assert_msg(rc == code, "%s: got %d (%s), expected %d", path, rc, obc_error_message(), code);
  ck_assert_ptr_null(r);
  assert_message_names(path);
  if (phrase)
    ck_assert_msg(strstr(obc_error_message(), phrase), "'%s' lacks '%s'", obc_error_message(),
                  phrase);
}

START_TEST(missing_file_fails_with_eio_naming_it) {
  char path[4200];
  scratch_path(path, sizeof path, "does-not-exist.h5");
  expect_open_failure(path, OBC_EIO, "No such file");
}
END_TEST

START_TEST(text_file_fails_as_not_hdf5) {
  char path[4200];
  scratch_path(path, sizeof path, "text.h5");
  FILE *fp = fopen(path, "w");
  fputs("this is not a trace\n", fp);
  fclose(fp);
  expect_open_failure(path, OBC_EFORMAT, "not an HDF5 file");
}
END_TEST

START_TEST(other_schema_version_is_unsupported) {
  char path[4200];
  good_copy("schema4.h5", path, sizeof path);
  hid_t f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "schema_version", OBC_TRACE_SCHEMA_VERSION + 1),
                   0);
  H5Fclose(f);
  char phrase[64];
  snprintf(phrase, sizeof phrase, "schema version %d", OBC_TRACE_SCHEMA_VERSION + 1);
  expect_open_failure(path, OBC_EUNSUPPORTED, phrase);
}
END_TEST

/* ---- column sums (schema 3) ------------------------------------------------------------------- */

enum { AGNOSTIC = 9 }; /* the fixture's question begins at 9 */

/* Sum plane values: non-negative, the agnostic plane a part of the all-rows
 * one and 0 from AGNOSTIC on. The attention sums (term 0) are those of an
 * attention a row i spreads over positions 0..i in proportion to
 * 1 + |fixture value|: each row's weights add up to 1, as the reader
 * checks. */
static double fixture_sum(int term, size_t layer, int variant, size_t head, size_t p) {
  size_t end = variant == TRACE_ROWS_ALL ? S : AGNOSTIC;
  if (term == 0) {
    double sum = 0.0;
    for (size_t i = p; i < end; i++) {
      double total = 0.0;
      for (size_t q = 0; q <= i; q++)
        total += 1.0 + fabs((double)fixture_value(10, layer, head, q));
      sum += (1.0 + fabs((double)fixture_value(10, layer, head, p))) / total;
    }
    return sum;
  }
  double all = 1.0 + fabs((double)fixture_value(10 + term, layer, head, p));
  if (variant == TRACE_ROWS_ALL) return all;
  return p < AGNOSTIC ? 0.5 * all : 0.0;
}

static int fixture_write_sums(const char *path) {
  TraceMeta meta;
  int64_t rows[R + T];
  int32_t tokens[NP];
  fixture_meta(&meta, rows, tokens);
  meta.agnostic_rows = AGNOSTIC;
  TraceWriteOptions opt = {.store_logits = true, .store_column_sums = true};
  TraceWriter *w = NULL;
  int rc = trace_create(path, &meta, &opt, &w);
  if (rc) return rc;
  float logits[T * VOCAB];
  double attn[TRACE_ROWS_VARIANTS * H * S], obc[TRACE_ROWS_VARIANTS * TRACE_OBC_TERMS * H * S];
  for (size_t layer = 0; layer < L; layer++) {
    fixture_write_layer(w, layer, false);
    for (int v = 0; v < TRACE_ROWS_VARIANTS; v++)
      for (size_t h = 0; h < H; h++)
        for (size_t p = 0; p < S; p++) {
          attn[(v * H + h) * S + p] = fixture_sum(0, layer, v, h, p);
          for (int t = 0; t < TRACE_OBC_TERMS; t++)
            obc[((v * TRACE_OBC_TERMS + t) * H + h) * S + p] = fixture_sum(1 + t, layer, v, h, p);
        }
    ck_assert_int_eq(trace_write_column_sums(w, layer, attn, obc), 0);
  }
  int64_t counts[TRACE_ROWS_VARIANTS * S];
  for (size_t p = 0; p < S; p++)
    counts[p] = p < AGNOSTIC ? AGNOSTIC - (int64_t)p : 0, counts[S + p] = S - (int64_t)p;
  ck_assert_int_eq(trace_write_column_counts(w, counts), 0);
  fixture_fill(logits, T * VOCAB, 6, 0, 0);
  ck_assert_int_eq(trace_write_logits(w, logits), 0);
  return trace_commit(w);
}

START_TEST(column_sums_round_trip_both_variants_and_counts) {
  char path[4200];
  scratch_path(path, sizeof path, "sums.h5");
  ck_assert_msg(fixture_write_sums(path) == 0, "%s", obc_error_message());
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  const TraceMeta *m = trace_meta(r);
  ck_assert_int_eq(m->schema_version, OBC_TRACE_SCHEMA_VERSION);
  ck_assert(m->has_column_sums);
  ck_assert_uint_eq(m->agnostic_rows, AGNOSTIC);
  char recomputed[17];
  ck_assert_msg(trace_compute_hash(r, recomputed) == 0, "%s", obc_error_message());
  ck_assert_str_eq(recomputed, m->content_hash);
  double attn[H * S], obc[TRACE_OBC_TERMS * H * S];
  int64_t counts[S];
  for (size_t layer = 0; layer < L; layer++)
    for (int v = 0; v < TRACE_ROWS_VARIANTS; v++) {
      ck_assert_msg(trace_read_column_sums(r, layer, (TraceSumRows)v, attn, obc, counts) == 0, "%s",
                    obc_error_message());
      for (size_t h = 0; h < H; h++)
        for (size_t p = 0; p < S; p++) {
          ck_assert_double_eq(attn[h * S + p], (float)fixture_sum(0, layer, v, h, p));
          for (int t = 0; t < TRACE_OBC_TERMS; t++)
            ck_assert_double_eq(obc[(t * H + h) * S + p],
                                (float)fixture_sum(1 + t, layer, v, h, p));
        }
      for (size_t p = 0; p < S; p++) {
        size_t end = v == TRACE_ROWS_AGNOSTIC ? AGNOSTIC : S;
        ck_assert_int_eq(counts[p], p < end ? (int64_t)(end - p) : 0);
      }
    }
  trace_close(r);
  unlink(path);
}
END_TEST

START_TEST(trace_without_column_sums_says_so) {
  char path[4200];
  scratch_path(path, sizeof path, "no-sums.h5");
  ck_assert_int_eq(fixture_write(path, false, 0), 0);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  ck_assert(!trace_meta(r)->has_column_sums);
  double attn[H * S];
  ck_assert_int_eq(trace_read_column_sums(r, 0, TRACE_ROWS_ALL, attn, NULL, NULL), OBC_ENOTFOUND);
  assert_message_names(path);
  ck_assert(strstr(obc_error_message(), "no column sums"));
  trace_close(r);
  unlink(path);
}
END_TEST

/* Overwrites element `index` of a whole dataset with value (through HDF5's
 * conversion from double). */
static void overwrite_element(const char *path, const char *name, hid_t mem_type, size_t index,
                              const void *value) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  ck_assert_int_ge(f, 0);
  hid_t dset = H5Dopen2(f, name, H5P_DEFAULT);
  ck_assert_int_ge(dset, 0);
  hid_t space = H5Dget_space(dset);
  hsize_t dims[3];
  int rank = H5Sget_simple_extent_dims(space, dims, NULL);
  hsize_t coord[3], rest = index;
  for (int i = rank - 1; i >= 0; i--) coord[i] = rest % dims[i], rest /= dims[i];
  H5Sselect_elements(space, H5S_SELECT_SET, 1, coord);
  hsize_t one = 1;
  hid_t mem = H5Screate_simple(1, &one, NULL);
  ck_assert_int_ge(H5Dwrite(dset, mem_type, mem, space, H5P_DEFAULT, value), 0);
  H5Sclose(mem), H5Sclose(space), H5Dclose(dset), H5Fclose(f);
}

static void expect_sums_refused(const char *path, const char *phrase) {
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  double attn[H * S], obc[TRACE_OBC_TERMS * H * S];
  int64_t counts[S];
  int rc = OBC_OK;
  for (size_t layer = 0; !rc && layer < L; layer++)
    for (int v = 0; !rc && v < TRACE_ROWS_VARIANTS; v++)
      rc = trace_read_column_sums(r, layer, (TraceSumRows)v, attn, obc, counts);
  ck_assert_msg(rc == OBC_EVALUE, "got %d (%s)", rc, obc_error_message());
  assert_message_names(path);
  ck_assert_msg(strstr(obc_error_message(), phrase), "'%s' lacks '%s'", obc_error_message(),
                phrase);
  trace_close(r);
}

START_TEST(damaged_column_sums_are_refused) {
  char path[4200];
  scratch_path(path, sizeof path, "bad-sums.h5");
  const struct {
    const char *dataset;
    double value;
    const char *phrase;
  } floats[] = {
      {"/layers/001/col_attn", NAN, "NaN"},
      {"/layers/000/col_obc_k", -1.0, "negative"},
      {"/layers/001/col_obc_vk", INFINITY, "Inf"},
      {"/layers/000/col_obc_v", -0.0 - 1e-30, "negative"},
  };
  for (size_t i = 0; i < sizeof floats / sizeof *floats; i++) {
    ck_assert_int_eq(fixture_write_sums(path), 0);
    overwrite_element(path, floats[i].dataset, H5T_NATIVE_DOUBLE, 3 * S + 4, &floats[i].value);
    expect_sums_refused(path, floats[i].phrase);
  }
  const struct {
    size_t index;
    int64_t value;
  } counts[] = {{2, 0}, {S + 0, S + 1}, {AGNOSTIC + 1, 1}, {S - 1, -5}};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    ck_assert_int_eq(fixture_write_sums(path), 0);
    overwrite_element(path, "/column_counts", H5T_NATIVE_INT64, counts[i].index, &counts[i].value);
    expect_sums_refused(path, "/column_counts");
  }
  unlink(path);
}
END_TEST

START_TEST(inconsistent_column_sum_attributes_are_refused) {
  char path[4200];
  scratch_path(path, sizeof path, "bad-sums-attrs.h5");
  ck_assert_int_eq(fixture_write_sums(path), 0);
  hid_t f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "agnostic_rows", S + 1), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "agnostic_rows");
  ck_assert_int_eq(fixture_write_sums(path), 0);
  f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "has_column_sums", 0), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "has_column_sums");
  ck_assert_int_eq(fixture_write_sums(path), 0);
  f = open_rw(path);
  ck_assert_int_ge(H5Ldelete(f, "/layers/001/col_obc_k", H5P_DEFAULT), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "/layers/001/col_obc_k");
  unlink(path);
}
END_TEST

START_TEST(missing_complete_flag_means_incomplete) {
  char path[4200];
  good_copy("incomplete.h5", path, sizeof path);
  hid_t f = open_rw(path);
  ck_assert_int_ge(H5Adelete(f, "complete"), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "complete");
}
END_TEST

START_TEST(missing_dataset_is_named) {
  char path[4200];
  good_copy("missing-v.h5", path, sizeof path);
  hid_t f = open_rw(path);
  ck_assert_int_ge(H5Ldelete(f, "/layers/001/V", H5P_DEFAULT), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "/layers/001/V is missing");
}
END_TEST

START_TEST(missing_attribute_is_named) {
  char path[4200];
  good_copy("missing-heads.h5", path, sizeof path);
  hid_t f = open_rw(path);
  ck_assert_int_ge(H5Adelete(f, "n_kv_heads"), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "'n_kv_heads' is missing");
}
END_TEST

START_TEST(inconsistent_shapes_are_named_precisely) {
  char path[4200];
  good_copy("bad-shape.h5", path, sizeof path);
  hid_t f = open_rw(path);
  /* Replace Q of layer 1 by one with a row too few. */
  ck_assert_int_ge(H5Ldelete(f, "/layers/001/Q", H5P_DEFAULT), 0);
  hsize_t dims[3] = {H, R + T - 1, D};
  hid_t space = H5Screate_simple(3, dims, NULL);
  hid_t dset =
      H5Dcreate2(f, "/layers/001/Q", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ck_assert_int_ge(dset, 0);
  H5Dclose(dset), H5Sclose(space), H5Fclose(f);
  expect_open_failure(
      path, OBC_EFORMAT,
      "/layers/001/Q has shape (4, 7, 8), expected (4, 8, 8) = (n_heads, n_rows, head_dim)");

  /* Attributes that disagree with each other. */
  good_copy("bad-positions.h5", path, sizeof path);
  f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_positions", NP + 1), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "n_positions is 16, expected n_prompt + n_decode = 15");

  /* Attributes that disagree with the datasets. */
  good_copy("bad-decode.h5", path, sizeof path);
  f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_decode", T + 1), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_positions", NP + 1), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "/tokens has shape (15,), expected (16,) = (n_positions)");
}
END_TEST

START_TEST(nan_and_inf_values_fail_on_read_naming_dataset_layer_and_head) {
  char path[4200];
  good_copy("nan.h5", path, sizeof path);
  hid_t f = open_rw(path);
  hid_t dset = H5Dopen2(f, "/layers/001/K", H5P_DEFAULT);
  hid_t space = H5Dget_space(dset);
  hsize_t start[3] = {1, 3, 2}, count[3] = {1, 1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
  hid_t mem = H5Screate_simple(1, count, NULL);
  float bad = NAN;
  ck_assert_int_ge(H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &bad), 0);
  H5Sclose(mem), H5Sclose(space), H5Dclose(dset);
  dset = H5Dopen2(f, "/layers/000/O", H5P_DEFAULT);
  space = H5Dget_space(dset);
  hsize_t start_o[3] = {2, 4, 0};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start_o, NULL, count, NULL);
  mem = H5Screate_simple(1, count, NULL);
  bad = INFINITY;
  ck_assert_int_ge(H5Dwrite(dset, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &bad), 0);
  H5Sclose(mem), H5Sclose(space), H5Dclose(dset), H5Fclose(f);

  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0); /* values are checked as they are read */
  float K[NP * D], Q[(R + T) * D], O[(R + T) * D];
  ck_assert_int_eq(trace_read_kv(r, 1, 0, K, NULL), 0);
  ck_assert_int_eq(trace_read_kv(r, 1, 1, K, NULL), OBC_EVALUE);
  assert_message_names(path);
  ck_assert_ptr_nonnull(
      strstr(obc_error_message(), "/layers/001/K, layer 1, KV head 1: NaN at position 3"));
  ck_assert_int_eq(trace_read_rows(r, 0, 2, Q, NULL, NULL), 0);
  ck_assert_int_eq(trace_read_rows(r, 0, 2, Q, O, NULL), OBC_EVALUE);
  ck_assert_ptr_nonnull(
      strstr(obc_error_message(), "/layers/000/O, layer 0, head 2: Inf at row 4"));
  trace_close(r);
}
END_TEST

START_TEST(trace_without_attention_rows_reports_not_found) {
  char path[4200];
  synth_small("no-attn.h5", 1, 1, false, path, sizeof path);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  const TraceMeta *m = trace_meta(r);
  ck_assert(!m->has_attn && !m->has_logits);
  ck_assert_ptr_null(m->tokens);
  float *A = malloc(m->n_rows * m->n_positions * sizeof *A);
  ck_assert_int_eq(trace_read_attn(r, 0, 0, A), OBC_ENOTFOUND);
  assert_message_names(path);
  free(A);
  trace_close(r);
}
END_TEST


/* ---- forged shapes and values -------------------------------------------------------------- */

/* The good fixture opened for writing in the format of schema 2 (HDF5 1.10
 * objects), so that what a test adds is in that format too. */
static hid_t open_rw_v110(const char *path) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  ck_assert_int_ge(H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110), 0);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, fapl);
  H5Pclose(fapl);
  ck_assert_int_ge(f, 0);
  return f;
}

/* Replaces dataset `name` by a float32 one of shape dims, never written:
 * chunked by chunk with Fletcher32 like the writer's, or contiguous when
 * chunk is NULL. A forger's few KiB declaring any shape. */
static void forge_unwritten(hid_t f, const char *name, int rank, const hsize_t *dims,
                            const hsize_t *chunk) {
  if (H5Lexists(f, name, H5P_DEFAULT) > 0) ck_assert_int_ge(H5Ldelete(f, name, H5P_DEFAULT), 0);
  hid_t space = H5Screate_simple(rank, dims, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunk) {
    ck_assert_int_ge(H5Pset_chunk(dcpl, rank, chunk), 0);
    ck_assert_int_ge(H5Pset_fletcher32(dcpl), 0);
  }
  hid_t dset = H5Dcreate2(f, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ck_assert_int_ge(dset, 0);
  H5Dclose(dset), H5Pclose(dcpl), H5Sclose(space);
}

/* Sets the positions to n_positions (n_decode stays T), drops the tokens
 * and forges K, V (and A) of every layer at that many positions, chunked
 * as the writer chunks them; the attributes stay consistent. */
static void forge_positions(const char *path, uint64_t n_positions) {
  hid_t f = open_rw_v110(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_prompt", (int64_t)(n_positions - T)), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_positions", (int64_t)n_positions), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "has_tokens", 0), 0);
  hsize_t kv[3] = {KVH, n_positions, D}, kv_chunk[3] = {1, 4096, D};
  hsize_t attn[3] = {H, R + T, n_positions}, attn_chunk[3] = {1, R + T, 4096};
  for (size_t layer = 0; layer < L; layer++) {
    char name[64];
    trace_h5_layer_dataset(name, sizeof name, layer, "K");
    forge_unwritten(f, name, 3, kv, kv_chunk);
    trace_h5_layer_dataset(name, sizeof name, layer, "V");
    forge_unwritten(f, name, 3, kv, kv_chunk);
    trace_h5_layer_dataset(name, sizeof name, layer, "A");
    forge_unwritten(f, name, 3, attn, attn_chunk);
  }
  H5Fclose(f);
}

START_TEST(shapes_too_large_to_address_are_refused_at_open) {
  char path[4200];
  good_copy("forged-kv.h5", path, sizeof path); /* K/V (2, 2^60, 8), A (4, 8, 2^60) */
  forge_positions(path, (uint64_t)1 << 60);
  expect_open_failure(path, OBC_EFORMAT, "n_prompt is 1152921504606846973 (at most 2147483647)");

  good_copy("forged-logits.h5", path, sizeof path); /* /logits (3, 2^61) */
  hid_t f = open_rw_v110(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "vocab_size", (int64_t)1 << 61), 0);
  hsize_t logits[2] = {T, (hsize_t)1 << 61}, logits_chunk[2] = {1, 4096};
  forge_unwritten(f, "/logits", 2, logits, logits_chunk);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "vocab_size is 2305843009213693952");

  /* Every extent fits an int, their product does not fit 64 bits. */
  good_copy("forged-product.h5", path, sizeof path);
  f = open_rw_v110(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_heads", 1 << 21), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_kv_heads", 1 << 21), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "head_dim", 1 << 21), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_prompt", (1 << 21) - T), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "n_positions", 1 << 21), 0);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "has_tokens", 0), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT,
                      "K, V of shape (n_kv_heads, n_positions, head_dim) = (2097152, 2097152, "
                      "2097152) would need more than 2^64 bytes");
}
END_TEST

START_TEST(tensors_whose_chunks_are_not_in_the_file_are_refused_at_open) {
  char path[4200];
  good_copy("forged-unwritten.h5", path, sizeof path); /* 2^30 positions: 2^37 bytes of K */
  forge_positions(path, (uint64_t)1 << 30);
  expect_open_failure(path, OBC_EFORMAT,
                      "/layers/000/K declares shape (2, 1073741824, 8) in 524288 chunks, but the "
                      "file stores 0 of them");

  /* The writer's shape, contiguous and never allocated. */
  good_copy("forged-contiguous.h5", path, sizeof path);
  hid_t f = open_rw_v110(path);
  hsize_t kv[3] = {KVH, NP, D};
  forge_unwritten(f, "/layers/001/V", 3, kv, NULL);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT,
                      "/layers/001/V declares shape (2, 15, 8) (960 bytes), but the file stores 0 "
                      "bytes of it");
}
END_TEST

START_TEST(an_allocation_that_fails_names_the_file_and_the_tensor) {
  char path[4200];
  good_copy("alloc.h5", path, sizeof path);
  TraceReader *r = NULL;
  ck_assert_int_eq(trace_open(path, &r), 0);
  ck_assert_ptr_null(trace_alloc(r, SIZE_MAX / 2, 8, "K of one KV head")); /* the product wraps */
  assert_message_names(path);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "out of memory allocating"));
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "for K of one KV head"));
  trace_close(r);
}
END_TEST

/* good_copy with the real attribute `name` set to value. */
static void copy_with_real(const char *file, const char *name, double value, char *path,
                           size_t size) {
  good_copy(file, path, size);
  hid_t f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_f64(path, f, name, value), 0);
  H5Fclose(f);
}

START_TEST(non_finite_or_non_positive_scales_are_refused_at_open) {
  char path[4200];
  const double scales[] = {NAN, 0.0, -0.25, INFINITY};
  for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
    copy_with_real("scale.h5", "attn_scale", scales[i], path, sizeof path);
    expect_open_failure(path, OBC_EFORMAT, "attn_scale is");
  }
  const double thetas[] = {-INFINITY, NAN, -10000.0};
  for (size_t i = 0; i < sizeof thetas / sizeof thetas[0]; i++) {
    copy_with_real("theta.h5", "rope_theta", thetas[i], path, sizeof path);
    expect_open_failure(path, OBC_EFORMAT, "rope_theta is");
  }
  copy_with_real("theta0.h5", "rope_theta", 0.0, path, sizeof path); /* with RoPE pairs */
  hid_t f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_str(path, f, "rope_layout", "half"), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "rope_theta is 0 (expected a finite RoPE base > 0)");
  copy_with_real("factor.h5", "rope_factor", NAN, path, sizeof path);
  expect_open_failure(path, OBC_EFORMAT, "rope_factor is nan");
  /* 0 is a trace without RoPE: a synthetic one. */
  synth_small("no-rope.h5", 1, 1, false, path, sizeof path);
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  ck_assert(trace_meta(r)->model.rope_theta == 0.0);
  trace_close(r);
}
END_TEST

START_TEST(a_dtype_other_than_the_stored_floats_is_refused_at_open) {
  char path[4200];
  good_copy("dtype-f16.h5", path, sizeof path); /* f32 datasets */
  hid_t f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_str(path, f, "dtype", "f16"), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "/layers/000/K has 4-byte floats, but dtype 'f16' says 2");
  scratch_path(path, sizeof path, "dtype-f32.h5");
  ck_assert_int_eq(fixture_write(path, true, 0), 0); /* f16 datasets */
  f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_str(path, f, "dtype", "f32"), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "/layers/000/K has 2-byte floats, but dtype 'f32' says 4");
}
END_TEST

START_TEST(a_span_beyond_the_prompt_and_a_needle_flag_other_than_0_1_are_refused) {
  char path[4200];
  good_copy("span-decode.h5", path, sizeof path);
  hid_t f = open_rw(path);
  hid_t dset = H5Dopen2(f, "/spans/question", H5P_DEFAULT);
  int64_t range[2] = {9, S + 2}; /* two decode positions */
  ck_assert_int_ge(H5Dwrite(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, range), 0);
  H5Dclose(dset), H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT,
                      "span /spans/question = [9, 14) is outside the prompt [0, 12)");
  good_copy("needle7.h5", path, sizeof path);
  f = open_rw(path);
  ck_assert_int_eq(trace_h5_attr_write_i64(path, f, "needle_found", 7), 0);
  H5Fclose(f);
  expect_open_failure(path, OBC_EFORMAT, "needle_found is 7");
}
END_TEST

/* ---- schema 2: checksums, content hash, damage ------------------------------------------------- */

/* tests/data/trace_v1.h5 was written by obcache synth before schema 2 (--layers 1 --heads 2
 * --kv-heads 1 --head-dim 4 --length 12 --rows 4 --decode 2 --vocab 16 --needle-length 2). */
START_TEST(schema1_trace_still_opens_and_reads) {
  const char *source = getenv("OBC_SOURCE_DIR");
  char path[4200];
  snprintf(path, sizeof path, "%s/tests/data/trace_v1.h5", source ? source : ".");
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  const TraceMeta *m = trace_meta(r);
  ck_assert_int_eq(m->schema_version, 1);
  ck_assert_str_eq(m->content_hash, ""); /* schema 1 records none */
  ck_assert_uint_eq(m->model.n_layers, 1);
  ck_assert_uint_eq(m->model.n_heads, 2);
  ck_assert_uint_eq(m->n_positions, 14);
  ck_assert_uint_eq(m->n_rows, 6);
  ck_assert_uint_eq(m->n_spans, 2);
  ck_assert_str_eq(m->spans[0].name, "needle");
  ck_assert_str_eq(m->spans[1].name, "question");
  ck_assert_ptr_nonnull(m->tokens);
  float K[14 * 4], V[14 * 4], Q[6 * 4], O[6 * 4], lse[6], logits[2 * 16];
  ck_assert_msg(trace_read_kv(r, 0, 0, K, V) == 0, "%s", obc_error_message());
  ck_assert_msg(trace_read_rows(r, 0, 1, Q, O, lse) == 0, "%s", obc_error_message());
  ck_assert_msg(trace_read_logits(r, logits) == 0, "%s", obc_error_message());
  char hash[17];
  ck_assert_msg(trace_compute_hash(r, hash) == 0, "%s", obc_error_message());
  ck_assert_int_eq(strlen(hash), 16);
  trace_close(r);
}
END_TEST

static void hash_of(const char *path, char out[17]) {
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message());
  char recomputed[17];
  ck_assert_msg(trace_compute_hash(r, recomputed) == 0, "%s", obc_error_message());
  ck_assert_str_eq(recomputed, trace_meta(r)->content_hash);
  memcpy(out, recomputed, 17);
  trace_close(r);
}

START_TEST(content_hash_is_the_same_for_the_same_trace_and_differs_otherwise) {
  char a[4200], b[4200], c[4200], d[4200], ha[17], hb[17], hc[17], hd[17];
  synth_small("hash-a.h5", 5, 1, true, a, sizeof a);
  synth_small("hash-b.h5", 5, 3, true, b, sizeof b); /* other thread count, other write order */
  synth_small("hash-c.h5", 6, 1, true, c, sizeof c); /* same shape, other seed */
  synth_small("hash-d.h5", 5, 1, false, d, sizeof d);
  hash_of(a, ha), hash_of(b, hb), hash_of(c, hc), hash_of(d, hd);
  ck_assert_str_eq(ha, hb);
  ck_assert_str_ne(ha, hc);
  ck_assert_str_ne(ha, hd);
  char f32[4200], f16[4200], h32[17], h16[17];
  good_copy("hash-f32.h5", f32, sizeof f32);
  scratch_path(f16, sizeof f16, "hash-f16.h5");
  ck_assert_int_eq(fixture_write(f16, true, 3), 0);
  hash_of(f32, h32), hash_of(f16, h16);
  ck_assert_str_ne(h32, h16);
}
END_TEST

/* H5Ovisit callback: fails the test on any variable-length type and on any
 * chunked dataset without Fletcher32; counts the datasets. */
static herr_t check_object(hid_t root, const char *name, const H5O_info_t *info, void *count) {
  if (info->type != H5O_TYPE_DATASET) return 0;
  hid_t dset = H5Dopen2(root, name, H5P_DEFAULT);
  hid_t type = H5Dget_type(dset), plist = H5Dget_create_plist(dset);
  ck_assert_msg(H5Tis_variable_str(type) == 0 && H5Tget_class(type) != H5T_VLEN,
                "%s is variable-length", name);
  if (H5Pget_layout(plist) == H5D_CHUNKED) {
    bool fletcher = false;
    for (int i = 0; i < H5Pget_nfilters(plist); i++)
      fletcher |= H5Pget_filter2(plist, (unsigned)i, NULL, NULL, NULL, 0, NULL, NULL) ==
                  H5Z_FILTER_FLETCHER32;
    ck_assert_msg(fletcher, "%s is chunked without Fletcher32", name);
    ++*(int *)count;
  }
  H5Pclose(plist), H5Tclose(type), H5Dclose(dset);
  return 0;
}

static herr_t check_attribute(hid_t obj, const char *name, const H5A_info_t *info, void *unused) {
  (void)info, (void)unused;
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT), type = H5Aget_type(attr);
  ck_assert_msg(H5Tis_variable_str(type) == 0, "attribute %s is a variable-length string", name);
  H5Tclose(type), H5Aclose(attr);
  return 0;
}

START_TEST(schema2_has_checksummed_metadata_checksummed_chunks_and_no_variable_length_data) {
  char path[4200];
  good_copy("schema2-layout.h5", path, sizeof path);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  H5F_info2_t info;
  ck_assert_int_ge(H5Fget_info2(f, &info), 0);
  ck_assert_uint_ge(info.super.version, 2); /* superblock 2+: checksummed */
  int chunked = 0;
  ck_assert_int_ge(H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, check_object, &chunked), 0);
  /* every dataset of the fixture is non-empty, hence chunked: row_positions, tokens, two texts,
   * three spans, logits, and 6 per layer */
  ck_assert_int_eq(chunked, 4 + 3 + 1 + 6 * L);
  ck_assert_int_ge(H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, check_attribute, NULL), 0);
  hid_t spans = H5Gopen2(f, "/spans", H5P_DEFAULT);
  ck_assert_int_ge(H5Aiterate2(spans, H5_INDEX_NAME, H5_ITER_INC, NULL, check_attribute, NULL), 0);
  H5Gclose(spans);
  H5Fclose(f);
}
END_TEST

/* LeakSanitizer's switch for allocations of this thread, when it is linked
 * (GCC says __SANITIZE_ADDRESS__, clang __has_feature). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(__SANITIZE_ADDRESS__)
#define __SANITIZE_ADDRESS__ 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
static void test_lsan_disable(void) { __lsan_disable(); }
static void test_lsan_enable(void) { __lsan_enable(); }
#else
static void test_lsan_disable(void) {}
static void test_lsan_enable(void) {}
#endif

/* Flips one bit of the byte at offset. */
static void flip_bit(const char *path, long offset, int bit) {
  FILE *fp = fopen(path, "r+b");
  ck_assert_ptr_nonnull(fp);
  fseek(fp, offset, SEEK_SET);
  int byte = fgetc(fp);
  ck_assert_int_ne(byte, EOF);
  fseek(fp, offset, SEEK_SET);
  fputc(byte ^ (1 << bit), fp);
  fclose(fp);
}

START_TEST(flipped_chunk_byte_is_a_checksum_mismatch_naming_the_dataset) {
  char path[4200];
  good_copy("flipped-chunk.h5", path, sizeof path);
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5Dopen2(f, "/layers/001/K", H5P_DEFAULT);
  hsize_t origin[3] = {1, 0, 0}; /* the chunk of KV head 1 */
  haddr_t address = 0;
  hsize_t size = 0;
  ck_assert_int_ge(H5Dget_chunk_info_by_coord(dset, origin, NULL, &address, &size), 0);
  H5Dclose(dset), H5Fclose(f);
  flip_bit(path, (long)address + 7, 3);
  TraceReader *r = NULL;
  ck_assert_msg(trace_open(path, &r) == 0, "%s", obc_error_message()); /* metadata intact */
  float K[NP * D];
  ck_assert_int_eq(trace_read_kv(r, 1, 0, K, NULL), 0); /* another chunk */
  ck_assert_int_eq(trace_read_kv(r, 1, 1, K, NULL), OBC_EFORMAT);
  assert_message_names(path);
  ck_assert_msg(strstr(obc_error_message(), "/layers/001/K: checksum mismatch"), "%s",
                obc_error_message());
  char hash[17];
  ck_assert_int_eq(trace_compute_hash(r, hash), OBC_EFORMAT);
  ck_assert_msg(strstr(obc_error_message(), "/layers/001/K: checksum mismatch"), "%s",
                obc_error_message());
  trace_close(r);
}
END_TEST

/* Every byte of a small trace flipped in turn (one bit, varying; every third byte under the
 * sanitizers, tests/test_env.h says why that still reaches every structure), and the file cut
 * at many lengths: trace_open and trace_compute_hash either fail with one line naming the file or
 * succeed and read exactly the original (its content hash). A crash fails the test (Check
 * forks each test); so does a hang (the test case's timeout). Not in the @CORE twins. */
START_TEST(damaged_copies_fail_naming_the_file_or_read_the_original) {
  if (test_blas_twin()) {
    printf("SKIP: damaged copies in an OpenBLAS twin (no BLAS in them; test_traces runs them)\n");
    return;
  }
  char good[4200], copy[4200], original[17];
  scratch_path(good, sizeof good, "damage-good.h5");
  SynthOptions o;
  synth_options_default(&o);
  o.n_layers = 1, o.n_heads = 2, o.n_kv_heads = 1, o.head_dim = 4, o.n_prompt = 12;
  o.n_prompt_rows = 3, o.n_decode = 2, o.vocab_size = 5, o.needle_length = 2, o.store_attn = true;
  ck_assert_msg(synth_generate(&o, good) == 0, "%s", obc_error_message());
  hash_of(good, original);
  scratch_path(copy, sizeof copy, "damage-copy.h5");
  FILE *fp = fopen(good, "rb");
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  unsigned char *bytes = malloc((size_t)size);
  fseek(fp, 0, SEEK_SET);
  ck_assert_int_eq(fread(bytes, 1, (size_t)size, fp), size);
  fclose(fp);
  size_t failed = 0, intact = 0;
  /* HDF5 1.10 loses the object headers whose checksum fails (allocated while
   * loading them, never freed on that error path): not our leaks. Without its
   * free lists, every block HDF5 loses here is allocated here. */
  H5set_free_list_limits(0, 0, 0, 0, 0, 0);
  test_lsan_disable();
  /* every byte (every third under the sanitizers: test_damage_stride), then 64 truncations */
  long stride = test_damage_stride(), flips = (size + stride - 1) / stride;
  for (long k = 0; k < flips + 64; k++) {
    long i = k < flips ? k * stride : size + (k - flips); /* the offset flipped, or size + cut */
    fp = fopen(copy, "wb");
    long length = i < size ? size : (i - size) * size / 64; /* then 64 truncations */
    fwrite(bytes, 1, (size_t)length, fp);
    fclose(fp);
    if (i < size) flip_bit(copy, i, (int)(i % 8));
    TraceReader *r = NULL;
    char hash[17];
    int rc = trace_open(copy, &r);
    if (!rc) rc = trace_compute_hash(r, hash);
    if (rc) {
      assert_message_names(copy);
      failed++;
    } else {
      ck_assert_msg(!strcmp(hash, original), "byte %ld: read %s, not the original %s", i, hash,
                    original);
      intact++;
    }
    trace_close(r);
  }
  test_lsan_enable();
  free(bytes);
  printf(
      "damaged copies of a %ld-byte trace (a flip every %ld bytes): %zu failed naming the file, "
      "%zu read intact\n",
      size, stride, failed, intact);
  ck_assert_uint_gt(failed, (size_t)flips / 2);
}
END_TEST

static Suite *traces_suite(void) {
  Suite *s = suite_create("traces");
  TCase *tc = tcase_create("traces");
  tcase_set_timeout(tc, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(tc, round_trip_preserves_every_field_and_tensor_f32);
  tcase_add_test(tc, round_trip_preserves_every_field_and_tensor_f32_compressed);
  tcase_add_test(tc, round_trip_preserves_every_field_and_tensor_f16);
  tcase_add_test(tc, round_trip_preserves_every_field_and_tensor_f16_compressed);
  tcase_add_test(tc, kept_slabs_read_as_the_file_below_and_above_their_limit);
  tcase_add_test(tc, half_conversion_rounds_to_nearest_even_and_keeps_specials);
  tcase_add_test(tc, trace_appears_only_on_commit_and_abort_leaves_nothing);
  tcase_add_test(tc, interrupt_removes_the_temporary_file);
  tcase_add_test(tc, commit_refuses_a_trace_with_a_tensor_never_written);
  tcase_add_test(tc, unwritable_output_path_fails_with_the_path_and_leaves_nothing);
  tcase_add_test(tc, meta_helpers_find_window_decode_rows_and_spans);
  tcase_add_test(tc, synth_same_seed_gives_identical_tensors_whatever_the_thread_count);
  tcase_add_test(tc, synth_outputs_equal_a_brute_force_recomputation);
  tcase_add_test(tc, synth_records_spans_and_plants_sink_and_needle_attention);
  tcase_add_test(tc, missing_file_fails_with_eio_naming_it);
  tcase_add_test(tc, text_file_fails_as_not_hdf5);
  tcase_add_test(tc, other_schema_version_is_unsupported);
  tcase_add_test(tc, missing_complete_flag_means_incomplete);
  tcase_add_test(tc, column_sums_round_trip_both_variants_and_counts);
  tcase_add_test(tc, trace_without_column_sums_says_so);
  tcase_add_test(tc, damaged_column_sums_are_refused);
  tcase_add_test(tc, inconsistent_column_sum_attributes_are_refused);
  tcase_add_test(tc, missing_dataset_is_named);
  tcase_add_test(tc, missing_attribute_is_named);
  tcase_add_test(tc, inconsistent_shapes_are_named_precisely);
  tcase_add_test(tc, nan_and_inf_values_fail_on_read_naming_dataset_layer_and_head);
  tcase_add_test(tc, trace_without_attention_rows_reports_not_found);
  tcase_add_test(tc, schema1_trace_still_opens_and_reads);
  tcase_add_test(tc, content_hash_is_the_same_for_the_same_trace_and_differs_otherwise);
  tcase_add_test(tc,
                 schema2_has_checksummed_metadata_checksummed_chunks_and_no_variable_length_data);
  tcase_add_test(tc, flipped_chunk_byte_is_a_checksum_mismatch_naming_the_dataset);
  tcase_add_test(tc, damaged_copies_fail_naming_the_file_or_read_the_original);
  suite_add_tcase(s, tc);
  TCase *forged = tcase_create("forged");
  tcase_add_test(forged, shapes_too_large_to_address_are_refused_at_open);
  tcase_add_test(forged, tensors_whose_chunks_are_not_in_the_file_are_refused_at_open);
  tcase_add_test(forged, an_allocation_that_fails_names_the_file_and_the_tensor);
  tcase_add_test(forged, non_finite_or_non_positive_scales_are_refused_at_open);
  tcase_add_test(forged, a_dtype_other_than_the_stored_floats_is_refused_at_open);
  tcase_add_test(forged, a_span_beyond_the_prompt_and_a_needle_flag_other_than_0_1_are_refused);
  suite_add_tcase(s, forged);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  test_scratch_begin("traces");
  test_scratch_path("traces", scratch, sizeof scratch, 0);
  SRunner *runner = srunner_create(traces_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
