/* Check suite of eviction and replay (evict/): the runtime's
 * per-(layer, KV head) eviction marks drop exactly the marked keys from the
 * softmax (checked against the full-cache attention renormalised by hand);
 * policies keep sets of the requested size that hold the sinks and the
 * recent window, without duplicates; offline replay equals brute-force
 * attention over the kept set; the oracle's single eviction is never worse
 * than another policy's at decode step 1. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "common/obc_startup.h"
#include "scores/score_head.h"
#include "common/obc_error.h"
#include "evict/dynamic.h"
#include "replay/model_replay.h"
#include "replay/offline.h"
#include "evict/policy.h"
#include "replay/replay_metrics.h"
#include "oracle/decode_attention.h"
#include "oracle/oracle_steps.h"
#include "runtime/generate.h"
#include "model/model.h"
#include "runtime/runtime.h"
#include "tests/fixture_attention.h"
#include "tests/tiny_gguf.h"
#include "traces/synth.h"
#include "tests/test_env.h"

/* ---- runtime eviction ------------------------------------------------------ */

typedef struct {
  size_t n_keys;
  float attn[TINY_LAYERS][TINY_HEADS][64]; /* the captured row's softmax, per layer */
} AttnRow;

static int keep_attn_row(void *user, const RuntimeLayerCapture *view) {
  AttnRow *row = user;
  ck_assert_uint_eq(view->n_rows, 1);
  row->n_keys = view->n_keys;
  for (size_t h = 0; h < view->n_heads; h++)
    memcpy(row->attn[view->layer][h], view->attn + h * view->n_keys, view->n_keys * sizeof(float));
  return 0;
}

START_TEST(test_evicted_keys_leave_the_softmax_and_new_positions_stay) {
  Model *model = tiny_gguf_model("evict_tiny.gguf");
  enum { N = 20 };
  int32_t tokens[N + 2];
  for (size_t t = 0; t < N + 2; t++) tokens[t] = (int32_t)((t * 11 + 5) % TINY_VOCAB);
  RuntimeOptions options = {.max_context = 32};
  size_t row = N;
  AttnRow full, evicted;
  RuntimeCapture capture_full = {.row_positions = &row,
                                 .n_rows = 1,
                                 .want_attn = true,
                                 .user = &full,
                                 .on_layer = keep_attn_row};
  RuntimeCapture capture_evicted = {.row_positions = &row,
                                    .n_rows = 1,
                                    .want_attn = true,
                                    .user = &evicted,
                                    .on_layer = keep_attn_row};

  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, N, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens + N, 1, RUNTIME_LOGITS_NONE, NULL, &capture_full), 0);
  runtime_free(rt);

  const size_t dropped[] = {0, 3, 7, 19};
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, N, RUNTIME_LOGITS_NONE, NULL, NULL), 0);
  ck_assert_int_eq(runtime_evict(rt, 0, 0, N), OBC_EINVAL); /* not cached yet */
  for (size_t i = 0; i < 4; i++) ck_assert_int_eq(runtime_evict(rt, 0, 0, dropped[i]), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens + N, 1, RUNTIME_LOGITS_NONE, NULL, &capture_evicted),
                   0);

  /* Layer 0's queries do not depend on the cache: its rows must be the full
   * ones with the dropped keys removed and the rest renormalised. */
  double worst = 0.0;
  size_t group = TINY_HEADS / TINY_KV;
  for (size_t h = 0; h < TINY_HEADS; h++) {
    double lost = 0.0;
    if (h / group == 0)
      for (size_t i = 0; i < 4; i++) lost += full.attn[0][h][dropped[i]];
    for (size_t p = 0; p <= N; p++) {
      int gone = 0;
      for (size_t i = 0; i < 4; i++) gone |= h / group == 0 && p == dropped[i];
      double expected = gone ? 0.0 : full.attn[0][h][p] / (1.0 - lost);
      if (gone) ck_assert_float_eq(evicted.attn[0][h][p], 0.0f);
      worst = fmax(worst, fabs(evicted.attn[0][h][p] - expected));
    }
  }
  printf("runtime eviction: max |A' - A/(1 - lost)| at layer 0 = %.3g\n", worst);
  ck_assert_double_le(worst, 1e-6);

  /* The next position was appended after the eviction: attended. */
  row = N + 1;
  ck_assert_int_eq(
      runtime_forward(rt, tokens + N + 1, 1, RUNTIME_LOGITS_NONE, NULL, &capture_evicted), 0);
  ck_assert_float_gt(evicted.attn[0][0][N], 0.0f);
  ck_assert_float_eq(evicted.attn[0][0][3], 0.0f);
  runtime_free(rt);
  model_free(model);
}
END_TEST


/* ---- policies, offline replay ---------------------------------------------- */

static void tmp_path(char *out, size_t size, const char *name) {
  test_scratch_file(name, out, size);
}

/* A small synthetic trace (2 layers, 4 heads, 2 KV heads, s = 64, 16 prompt
 * rows, T decode rows) at path. */
static void synth_trace(const char *path, size_t decode, uint64_t seed) {
  SynthOptions o;
  synth_options_default(&o);
  o.n_decode = decode;
  o.seed = seed;
  ck_assert_int_eq(synth_generate(&o, path), 0);
}

static void policy_for(EvictPolicy *p, const char *score, const char *budget, size_t recent,
                       size_t sinks, const char *alloc, const char *protocol) {
  evict_policy_default(p);
  ck_assert_int_eq(evict_policy_set_score(p, score), 0);
  ck_assert_int_eq(evict_policy_set_budget(p, budget), 0);
  ck_assert_int_eq(evict_policy_set_allocation(p, alloc), 0);
  ck_assert_int_eq(evict_policy_set_protocol(p, protocol), 0);
  p->recent = recent;
  p->sinks = sinks;
}

/* The positions dataset of a keep file: strictly increasing, -1 padded. */
static void check_positions_file(const char *path, const EvictKeepSet *k) {
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  ck_assert_int_ge(file, 0);
  hid_t set = H5Dopen2(file, "positions", H5P_DEFAULT);
  hid_t space = H5Dget_space(set);
  hsize_t dims[3];
  H5Sget_simple_extent_dims(space, dims, NULL);
  int64_t *pos = malloc(dims[0] * dims[1] * dims[2] * sizeof *pos);
  ck_assert_int_ge(H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pos), 0);
  for (size_t h = 0; h < dims[0] * dims[1]; h++) {
    size_t n = 0;
    for (size_t j = 0; j < dims[2]; j++) {
      int64_t p = pos[h * dims[2] + j];
      if (p < 0) break;
      if (j > 0) ck_assert_int_gt(p, pos[h * dims[2] + j - 1]); /* no duplicates */
      ck_assert(k->keep[h * k->n_prompt + (size_t)p]);
      n++;
    }
    ck_assert_uint_eq(n, k->n_kept[h] + (k->n_prompt - k->n_candidates));
  }
  free(pos);
  H5Sclose(space);
  H5Dclose(set);
  H5Fclose(file);
}

START_TEST(test_kept_sets_have_the_requested_size_sinks_recent_and_no_duplicates) {
  char trace[4096], keep_path[4096];
  tmp_path(trace, sizeof trace, "evict_sets.h5");
  tmp_path(keep_path, sizeof keep_path, "evict_sets_keep.h5");
  synth_trace(trace, 4, 3);
  TraceReader *reader = NULL;
  ck_assert_int_eq(trace_open(trace, &reader), 0);
  static const char *const scores[] = {"obc_vk", "attn",    "attn_maxpool",
                                       "random", "recency", "oracle"};
  static const char *const budgets[] = {"1", "10", "25%", "0.5", "60"};
  static const char *const allocs[] = {"uniform", "adakv"};
  static const char *const modes[] = {"aware", "agnostic"};
  static const size_t fixed[][2] = {{0, 0}, {3, 2}}; /* recent, sinks */
  size_t checked = 0;
  for (size_t si = 0; si < 6; si++)
    for (size_t bi = 0; bi < 5; bi++)
      for (size_t ai = 0; ai < 2; ai++)
        for (size_t mi = 0; mi < 2; mi++)
          for (size_t fi = 0; fi < 2; fi++) {
            if (!strcmp(scores[si], "recency") && ai == 1) continue;
            EvictPolicy p;
            policy_for(&p, scores[si], budgets[bi], fixed[fi][0], fixed[fi][1], allocs[ai],
                       modes[mi]);
            EvictKeepSet k;
            int rc = evict_policy_apply(reader, &p, &k);
            size_t n_cand = mi ? 60 : 64; /* synth: the question is the last 4 positions */
            size_t budget = !strcmp(budgets[bi], "1")     ? 1
                            : !strcmp(budgets[bi], "10")  ? 10
                            : !strcmp(budgets[bi], "60")  ? 60
                            : !strcmp(budgets[bi], "25%") ? n_cand * 25 / 100 /* floor(n B) */
                                                          : n_cand * 50 / 100;
            size_t recent = fixed[fi][0], sinks = fixed[fi][1];
            bool streaming = !strcmp(scores[si], "recency");
            if (sinks + (streaming ? 0 : recent) > budget || (streaming && sinks >= budget)) {
              ck_assert_int_eq(rc, OBC_EINVAL); /* no room: refused */
              continue;
            }
            ck_assert_msg(rc == 0, "%s", obc_error_message());
            ck_assert_uint_eq(k.n_candidates, n_cand);
            ck_assert_uint_eq(k.budget, budget);
            size_t G = k.n_kv_heads;
            size_t floor_k = (size_t)ceil(0.2 * budget);
            if (floor_k < sinks + recent) floor_k = sinks + recent;
            for (size_t l = 0; l < k.n_layers; l++) {
              size_t layer_total = 0;
              for (size_t g = 0; g < G; g++) {
                const unsigned char *m = k.keep + (l * G + g) * k.n_prompt;
                size_t count = 0;
                for (size_t q = 0; q < n_cand; q++) count += m[q];
                ck_assert_uint_eq(count, k.n_kept[l * G + g]);
                for (size_t q = n_cand; q < k.n_prompt; q++) ck_assert(m[q]); /* question kept */
                for (size_t q = 0; q < sinks; q++) ck_assert(m[q]);
                size_t r = streaming ? budget - sinks : recent;
                for (size_t q = n_cand - r; q < n_cand; q++) ck_assert(m[q]);
                if (ai == 0)
                  ck_assert_uint_eq(count, budget);
                else
                  ck_assert_uint_ge(count, floor_k < budget ? floor_k : budget);
                layer_total += count;
              }
              if (ai == 1) ck_assert_uint_eq(layer_total, budget * G);
            }
            ck_assert_int_eq(evict_keep_write(keep_path, &k, trace, "test"), 0);
            check_positions_file(keep_path, &k);
            EvictKeepSet back;
            ck_assert_int_eq(evict_keep_read(keep_path, trace_meta(reader), &back), 0);
            ck_assert_int_eq(memcmp(back.keep, k.keep, k.n_layers * G * k.n_prompt), 0);
            ck_assert_uint_eq(back.n_candidates, k.n_candidates);
            evict_keep_set_free(&back);
            evict_keep_set_free(&k);
            checked++;
          }
  printf("kept sets: %zu policies checked (size, sinks, recent, question, no duplicates)\n",
         checked);
  ck_assert_uint_gt(checked, 150);
  trace_close(reader);
}
END_TEST

/* ---- keep files: bound to their trace, every value checked ----------------- */

/* A keep file (at keep_path) of an agnostic policy (60 candidates of 64)
 * for a new synthetic trace (open in *reader), written with trace_hash. */
static void keep_fixture(const char *name, const char *trace_hash, char *keep_path, size_t size,
                         TraceReader **reader) {
  char trace[4096];
  tmp_path(trace, sizeof trace, name);
  synth_trace(trace, 2, 11);
  ck_assert_int_eq(trace_open(trace, reader), 0);
  EvictPolicy p;
  policy_for(&p, "attn", "10", 2, 1, "uniform", "agnostic");
  EvictKeepSet k;
  ck_assert_int_eq(evict_policy_apply(*reader, &p, &k), 0);
  ck_assert_uint_eq(k.n_candidates, 60);
  snprintf(k.trace_hash, sizeof k.trace_hash, "%s", trace_hash);
  snprintf(keep_path, size, "%s.keep.h5", trace);
  ck_assert_int_eq(evict_keep_write(keep_path, &k, trace, "test"), 0);
  evict_keep_set_free(&k);
}

/* evict_keep_read's result on path for meta, and the message has `expect`. */
static int read_keep_expect(const char *path, const TraceMeta *meta, const char *expect) {
  EvictKeepSet back;
  obc_error_clear();
  int rc = evict_keep_read(path, meta, &back);
  if (!rc) evict_keep_set_free(&back);
  if (expect)
    ck_assert_msg(strstr(obc_error_message(), expect), "expected '%s' in '%s'", expect,
                  obc_error_message());
  return rc;
}

START_TEST(test_keep_file_is_refused_by_a_trace_with_another_content_hash) {
  char keep[4096];
  TraceReader *reader = NULL;
  keep_fixture("evict_bound.h5", "0123456789abcdef", keep, sizeof keep, &reader);
  TraceMeta meta = *trace_meta(reader); /* shallow: only content_hash changes */
  snprintf(meta.content_hash, sizeof meta.content_hash, "0123456789abcdef");
  EvictKeepSet back;
  ck_assert_int_eq(evict_keep_read(keep, &meta, &back), 0);
  ck_assert_str_eq(back.trace_hash, "0123456789abcdef");
  evict_keep_set_free(&back);
  /* Same shape, another trace: refused, naming the keep file and both hashes. */
  snprintf(meta.content_hash, sizeof meta.content_hash, "fedcba9876543210");
  ck_assert_int_eq(
      read_keep_expect(keep, &meta, "made for trace 0123456789abcdef (") /* its path */,
      OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "not this trace fedcba9876543210"));
  ck_assert_ptr_nonnull(strstr(obc_error_message(), keep));
  /* A schema-1 trace (no hash): the shape alone, accepted with a warning. */
  meta.content_hash[0] = '\0';
  ck_assert_int_eq(read_keep_expect(keep, &meta, NULL), 0);
  trace_close(reader);
  /* A keep file without a hash on a trace with one: accepted. */
  keep_fixture("evict_unbound.h5", "", keep, sizeof keep, &reader);
  meta = *trace_meta(reader);
  snprintf(meta.content_hash, sizeof meta.content_hash, "fedcba9876543210");
  ck_assert_int_eq(read_keep_expect(keep, &meta, NULL), 0);
  trace_close(reader);
}
END_TEST

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  ck_assert(in && out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  ck_assert_int_eq(fclose(out), 0);
}

/* Replaces attribute name of the file at path by a float64 value, or by
 * text when given (a variable-length string as schema 1 wrote them when
 * variable, else fixed-length as schema 2 does); deletes it when remove. */
static void set_attr_as(const char *path, const char *name, double value, const char *text,
                        bool remove, bool variable) {
  hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  ck_assert_int_ge(file, 0);
  if (H5Aexists(file, name) > 0) ck_assert_int_ge(H5Adelete(file, name), 0);
  if (!remove) {
    hid_t type = H5Tcopy(text ? H5T_C_S1 : H5T_IEEE_F64LE);
    if (text) H5Tset_size(type, variable ? H5T_VARIABLE : strlen(text) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    const void *data = !text ? (const void *)&value : variable ? (const void *)&text : text;
    ck_assert_int_ge(H5Awrite(attr, text ? type : H5T_NATIVE_DOUBLE, data), 0);
    H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
  }
  ck_assert_int_ge(H5Fclose(file), 0);
}

static void set_attr(const char *path, const char *name, double value, const char *text,
                     bool remove) {
  set_attr_as(path, name, value, text, remove, false);
}

/* Rewrites dataset keep with file type `type`, element `index` set to value. */
static void set_keep(const char *path, hid_t type, size_t index, int64_t value) {
  hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t set = H5Dopen2(file, "keep", H5P_DEFAULT);
  hid_t space = H5Dget_space(set);
  hsize_t dims[3];
  H5Sget_simple_extent_dims(space, dims, NULL);
  size_t n = dims[0] * dims[1] * dims[2];
  int64_t *mask = malloc(n * sizeof *mask);
  ck_assert_int_ge(H5Dread(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask), 0);
  H5Dclose(set);
  ck_assert_int_ge(H5Ldelete(file, "keep", H5P_DEFAULT), 0);
  mask[index] = value;
  set = H5Dcreate2(file, "keep", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ck_assert_int_ge(H5Dwrite(set, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask), 0);
  free(mask);
  H5Dclose(set);
  H5Sclose(space);
  ck_assert_int_ge(H5Fclose(file), 0);
}

/* Sets keep[., ., q] to 0 for every head and every candidate q < n. */
static void zero_candidates(const char *path, size_t n) {
  hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t set = H5Dopen2(file, "keep", H5P_DEFAULT);
  hid_t space = H5Dget_space(set);
  hsize_t dims[3];
  H5Sget_simple_extent_dims(space, dims, NULL);
  size_t total = dims[0] * dims[1] * dims[2];
  unsigned char *mask = malloc(total);
  ck_assert_int_ge(H5Dread(set, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask), 0);
  for (size_t i = 0; i < total; i++)
    if (i % dims[2] < n) mask[i] = 0;
  ck_assert_int_ge(H5Dwrite(set, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask), 0);
  free(mask);
  H5Sclose(space), H5Dclose(set);
  ck_assert_int_ge(H5Fclose(file), 0);
}

START_TEST(test_keep_file_contradicting_its_own_counts_or_unbound_is_refused) {
  char keep[4096], bad[4200];
  TraceReader *reader = NULL;
  keep_fixture("evict_counts.h5", "0123456789abcdef", keep, sizeof keep, &reader);
  TraceMeta meta = *trace_meta(reader); /* shallow: only content_hash changes */
  snprintf(meta.content_hash, sizeof meta.content_hash, "0123456789abcdef");
  snprintf(bad, sizeof bad, "%s.bad.h5", keep);
  /* Uniform, 10 kept per KV head: a budget of 9 contradicts every head. */
  copy_file(keep, bad);
  set_attr(bad, "budget", 9, NULL, false);
  ck_assert_int_eq(
      read_keep_expect(bad, &meta, "attribute budget is 9, but keep[0][0] keeps 10 candidates"),
      OBC_EFORMAT);
  /* AdaKV: every layer keeps budget x n_kv_heads. */
  copy_file(keep, bad);
  set_attr(bad, "allocation", 0, "adakv", false);
  set_attr(bad, "budget", 9, NULL, false);
  ck_assert_int_eq(read_keep_expect(bad, &meta,
                                    "attribute budget is 9, but layer 0 keeps 20 candidates "
                                    "(adakv allocation keeps budget x 2 KV heads = 18"),
                   OBC_EFORMAT);
  copy_file(keep, bad); /* the same counts under adakv: consistent */
  set_attr(bad, "allocation", 0, "adakv", false);
  ck_assert_int_eq(read_keep_expect(bad, &meta, NULL), 0);
  /* No candidate kept anywhere. */
  copy_file(keep, bad);
  zero_candidates(bad, 60);
  ck_assert_int_eq(read_keep_expect(bad, &meta, "the keep mask keeps none of the 60 candidate"),
                   OBC_EFORMAT);
  /* Schema 2 always writes trace_hash: without it the file would bind to
   * any trace of its shape. */
  copy_file(keep, bad);
  set_attr(bad, "trace_hash", 0, NULL, true);
  ck_assert_int_eq(
      read_keep_expect(bad, &meta, "damaged keep file: attribute trace_hash is missing"),
      OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), bad));
  trace_close(reader);
}
END_TEST

START_TEST(test_keep_file_values_out_of_range_are_refused_not_cast) {
  char keep[4096], bad[4200];
  TraceReader *reader = NULL;
  keep_fixture("evict_values.h5", "", keep, sizeof keep, &reader);
  const TraceMeta *meta = trace_meta(reader);
  snprintf(bad, sizeof bad, "%s.bad.h5", keep);
  const struct {
    const char *attr; /* NULL: the keep dataset */
    double value;
    const char *text;
    bool remove;
    const char *expect;
  } cases[] = {
      {"budget", -5, NULL, false, "budget -5 (expected a whole number in 1..60)"},
      {"budget", 1e30, NULL, false, "budget 1e+30"},
      {"budget", 2.5, NULL, false, "budget 2.5"},
      {"budget", 0, NULL, false, "budget 0"},
      {"budget", 61, NULL, false, "budget 61"},
      {"budget", 0, "ten", false, "attribute budget missing or not a number"},
      {"n_candidates", -1, NULL, false, "n_candidates -1 (expected a whole number in 0..64)"},
      {"n_candidates", NAN, NULL, false, "n_candidates nan"},
      {"window", -1, NULL, false, "window -1"},
      {"recent", 1e20, NULL, false, "recent 1e+20"},
      {"sinks", -2, NULL, false, "sinks -2"},
      {"allocation", 0, "greedy", false,
       "allocation 'greedy' (expected uniform, adakv or pyramid)"},
      {"protocol", 0, "sideways", false,
       "protocol 'sideways' (expected agnostic, aware or agnostic-captured)"},
      {"protect", 0, "a,b,c,d,e,f,g,h,i", false, "attribute protect 'a,b,c,d,e,f,g,h,i' is not a"},
      {"score", 0, "attn\033[2J", false, "attribute score holds control characters"},
      {"trace_hash", 0, "not-a-hash", false, "trace_hash 'not-a-hash' is not a content hash"},
      {"trace_hash", 0, "0123456789abcdef0", false, "is not a content hash"},
      {"complete", 0, NULL, true, "not marked complete"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    copy_file(keep, bad);
    set_attr(bad, cases[i].attr, cases[i].value, cases[i].text, cases[i].remove);
    ck_assert_int_eq(read_keep_expect(bad, meta, cases[i].expect), OBC_EFORMAT);
  }
  /* A variable-length string (its bytes in HDF5's unchecksummed global
   * heap) is refused in a schema 2 file. */
  copy_file(keep, bad);
  set_attr_as(bad, "allocation", 0, "adakv", false, true);
  ck_assert_int_eq(read_keep_expect(bad, meta, "attribute allocation is a variable-length string"),
                   OBC_EFORMAT);
  /* Mask values: only 0 and 1, in any integer type; no floats; positions
   * after the 60 candidates always kept. */
  copy_file(keep, bad);
  set_keep(bad, H5T_STD_U8LE, 5, 7);
  ck_assert_int_eq(read_keep_expect(bad, meta, "keep[0][0][5] is not 0 or 1"), OBC_EFORMAT);
  copy_file(keep, bad);
  set_keep(bad, H5T_STD_I16LE, 64 + 3, -1);
  ck_assert_int_eq(read_keep_expect(bad, meta, "keep[0][1][3] is not 0 or 1"), OBC_EFORMAT);
  copy_file(keep, bad);
  set_keep(bad, H5T_STD_I64LE, 3 * 64 + 7, 257);
  ck_assert_int_eq(read_keep_expect(bad, meta, "keep[1][1][7] is not 0 or 1"), OBC_EFORMAT);
  copy_file(keep, bad);
  set_keep(bad, H5T_STD_U8LE, 62, 0);
  ck_assert_int_eq(
      read_keep_expect(bad, meta, "keep[0][0][62] is 0, but positions after the candidates (60)"),
      OBC_EFORMAT);
  copy_file(keep, bad);
  set_keep(bad, H5T_IEEE_F64LE, 0, 1);
  ck_assert_int_eq(read_keep_expect(bad, meta, "dataset keep is not of integers"), OBC_EFORMAT);
  /* Schema 1 (variable-length strings) reads. */
  copy_file(keep, bad);
  set_attr_as(bad, "schema", 0, "obcache-keep/1", false, true);
  set_attr_as(bad, "complete", 0, "1", false, true);
  set_attr_as(bad, "score", 0, "attn", false, true);
  ck_assert_int_eq(read_keep_expect(bad, meta, NULL), 0);
  /* The same file untouched, and as int16, reads back. */
  copy_file(keep, bad);
  set_keep(bad, H5T_STD_I16LE, 0, 1);
  ck_assert_int_eq(read_keep_expect(bad, meta, NULL), 0);
  ck_assert_int_eq(read_keep_expect(keep, meta, NULL), 0);
  trace_close(reader);
}
END_TEST

/* Attention of query q over the keys marked in keep (n), from scratch. */
static void brute_attention(const double *q, const double *K, const double *V,
                            const unsigned char *keep, size_t n, size_t d, double scale,
                            double *out) {
  double max = -HUGE_VAL, sum = 0.0;
  for (size_t p = 0; p < n; p++) {
    if (!keep[p]) continue;
    double z = 0.0;
    for (size_t e = 0; e < d; e++) z += q[e] * K[p * d + e];
    max = fmax(max, scale * z);
  }
  memset(out, 0, d * sizeof *out);
  for (size_t p = 0; p < n; p++) {
    if (!keep[p]) continue;
    double z = 0.0;
    for (size_t e = 0; e < d; e++) z += q[e] * K[p * d + e];
    double w = exp(scale * z - max);
    sum += w;
    for (size_t e = 0; e < d; e++) out[e] += w * V[p * d + e];
  }
  for (size_t e = 0; e < d; e++) out[e] /= sum;
}

/* The keep file records the protocol and the protected spans and reads them
 * back; a file written before the protocol attribute existed records mode,
 * where "agnostic" meant agnostic's kept set replayed with the captured
 * question K/V (agnostic-captured). */
START_TEST(test_keep_file_records_the_protocol_and_reads_the_old_mode) {
  char keep[4096], old[4200];
  TraceReader *reader = NULL;
  keep_fixture("evict_protocol.h5", "", keep, sizeof keep, &reader);
  const TraceMeta *meta = trace_meta(reader);
  EvictKeepSet back;
  ck_assert_int_eq(evict_keep_read(keep, meta, &back), 0);
  ck_assert_int_eq(back.policy.protocol, EVICT_PROTOCOL_AGNOSTIC);
  ck_assert_uint_eq(back.policy.n_protect, 0);
  evict_keep_set_free(&back);
  /* Every protocol and a protected span, written and read back. */
  static const char *const names[] = {"agnostic", "aware", "agnostic-captured"};
  for (int i = 0; i < 3; i++) {
    EvictPolicy p;
    policy_for(&p, "random", "20", 0, 0, "uniform", names[i]);
    ck_assert_int_eq(evict_policy_set_protect(&p, "needle,question"), 0);
    EvictKeepSet k;
    ck_assert_msg(evict_policy_apply(reader, &p, &k) == 0, "%s", obc_error_message());
    ck_assert_int_eq(evict_keep_write(keep, &k, trace_path(reader), "test"), 0);
    evict_keep_set_free(&k);
    ck_assert_int_eq(evict_keep_read(keep, meta, &back), 0);
    ck_assert_str_eq(evict_protocol_name(back.policy.protocol), names[i]);
    ck_assert_uint_eq(back.policy.n_protect, 2);
    ck_assert_str_eq(back.policy.protect[0], "needle");
    ck_assert_str_eq(back.policy.protect[1], "question");
    for (size_t h = 0; h < back.n_layers * back.n_kv_heads; h++)
      for (size_t q = 23; q < 39; q++) ck_assert(back.keep[h * back.n_prompt + q]);
    evict_keep_set_free(&back);
  }
  /* The old attribute: mode, and no protocol. */
  const struct {
    const char *mode;
    EvictProtocol protocol;
  } old_modes[] = {{"aware", EVICT_PROTOCOL_AWARE},
                   {"agnostic", EVICT_PROTOCOL_AGNOSTIC_CAPTURED},
                   {NULL, EVICT_PROTOCOL_AWARE}};
  snprintf(old, sizeof old, "%s.old.h5", keep);
  for (size_t i = 0; i < 3; i++) {
    copy_file(keep, old);
    set_attr(old, "protocol", 0, NULL, true);
    set_attr(old, "protect", 0, NULL, true);
    if (old_modes[i].mode) set_attr(old, "mode", 0, old_modes[i].mode, false);
    ck_assert_msg(evict_keep_read(old, meta, &back) == 0, "%s", obc_error_message());
    ck_assert_int_eq(back.policy.protocol, old_modes[i].protocol);
    ck_assert_uint_eq(back.policy.n_protect, 0);
    evict_keep_set_free(&back);
  }
  copy_file(keep, old);
  set_attr(old, "protocol", 0, NULL, true);
  set_attr(old, "mode", 0, "sideways", false);
  ck_assert_int_eq(read_keep_expect(old, meta, "mode 'sideways' (expected aware or agnostic)"),
                   OBC_EFORMAT);
  trace_close(reader);
}
END_TEST

/* The policy parsers: protocol names, --protect lists. */
START_TEST(test_protocol_and_protect_parse_and_reject_bad_names) {
  EvictPolicy p;
  evict_policy_default(&p);
  ck_assert_int_eq(p.protocol, EVICT_DEFAULT_PROTOCOL);
  ck_assert_int_eq(EVICT_DEFAULT_PROTOCOL, EVICT_PROTOCOL_AGNOSTIC); /* kvpress's default */
  for (int i = 0; i < EVICT_N_PROTOCOLS; i++) {
    ck_assert_int_eq(evict_policy_set_protocol(&p, evict_protocol_name((EvictProtocol)i)), 0);
    ck_assert_int_eq(p.protocol, i);
  }
  ck_assert(evict_protocol_reruns_tail(EVICT_PROTOCOL_AGNOSTIC));
  ck_assert(evict_protocol_reruns_tail(EVICT_PROTOCOL_AWARE));
  ck_assert(!evict_protocol_reruns_tail(EVICT_PROTOCOL_AGNOSTIC_CAPTURED));
  ck_assert_int_eq(evict_policy_set_protocol(&p, "query-aware"), OBC_EINVAL);
  ck_assert(strstr(obc_error_message(), "--protocol query-aware: expected agnostic, aware"));
  ck_assert_int_eq(evict_policy_set_protect(&p, "question,needle_value"), 0);
  char text[128];
  evict_policy_protect_text(&p, text, sizeof text);
  ck_assert_str_eq(text, "question,needle_value");
  ck_assert_int_eq(evict_policy_set_protect(&p, "a,b,c,d,e,f,g,h,i"), OBC_EINVAL);
  ck_assert_uint_eq(p.n_protect, 2); /* a refused list leaves the policy as it was */
}
END_TEST

START_TEST(test_offline_replay_equals_brute_force_attention_over_the_kept_set) {
  char trace[4096];
  tmp_path(trace, sizeof trace, "evict_offline.h5");
  synth_trace(trace, 4, 5);
  TraceReader *reader = NULL;
  ck_assert_int_eq(trace_open(trace, &reader), 0);
  const TraceMeta *meta = trace_meta(reader);
  static const char *const scores[] = {"obc_vk", "random", "recency"};
  static const char *const budgets[] = {"3", "16", "50%"};
  ScoreHead h;
  ck_assert_int_eq(score_head_alloc(&h, reader), 0);
  size_t d = meta->model.head_dim, H = meta->model.n_heads, G = meta->model.n_kv_heads;
  size_t group = H / G, first = 0, T = trace_meta_decode_rows(meta, &first);
  unsigned char *mask = malloc(meta->n_positions);
  double worst = 0.0, o_new[64];
  for (size_t c = 0; c < 9; c++) {
    EvictPolicy p;
    policy_for(&p, scores[c / 3], budgets[c % 3], 0, c / 3 == 2 ? 1 : 0, "uniform", "aware");
    EvictKeepSet k;
    ck_assert_int_eq(evict_policy_apply(reader, &p, &k), 0);
    ReplayOfflineResult r;
    ck_assert_int_eq(replay_offline_run(reader, &k, &r), 0);
    for (size_t l = 0; l < meta->model.n_layers; l++)
      for (size_t g = 0; g < G; g++) {
        ck_assert_int_eq(score_head_read(&h, reader, l, g), 0);
        memcpy(mask, k.keep + (l * G + g) * k.n_prompt, k.n_prompt);
        memset(mask + k.n_prompt, 1, meta->n_positions - k.n_prompt);
        for (size_t j = 0; j < group; j++)
          for (size_t t = 0; t < T; t++) {
            size_t row = first + t, live = (size_t)meta->row_positions[row] + 1;
            brute_attention(h.Q + (j * meta->n_rows + row) * d, h.K, h.V, mask, live, d,
                            meta->model.attn_scale, o_new);
            const double *o = h.O + (j * meta->n_rows + row) * d;
            double diff = 0.0, norm = 0.0;
            for (size_t e = 0; e < d; e++) {
              diff += (o_new[e] - o[e]) * (o_new[e] - o[e]);
              norm += o[e] * o[e];
            }
            double expected = sqrt(diff / norm);
            double got = r.rel_error[(l * H + g * group + j) * T + t];
            worst = fmax(worst, fabs(got - expected) / (1e-3 + expected));
          }
      }
    replay_offline_result_free(&r);
    evict_keep_set_free(&k);
  }
  printf("offline replay vs brute force: max relative difference of the output errors %.3g\n",
         worst);
  /* The closed form starts from the stored O and lse (float32): agreement to
   * float rounding, far below any error worth reporting. */
  ck_assert_double_le(worst, 1e-4);
  free(mask);
  score_head_free(&h);
  trace_close(reader);
}
END_TEST

START_TEST(test_keeping_everything_loses_nothing) {
  char trace[4096];
  tmp_path(trace, sizeof trace, "evict_all.h5");
  synth_trace(trace, 3, 7);
  TraceReader *reader = NULL;
  ck_assert_int_eq(trace_open(trace, &reader), 0);
  EvictPolicy p;
  policy_for(&p, "attn", "100%", 0, 0, "uniform", "aware");
  EvictKeepSet k;
  ck_assert_int_eq(evict_policy_apply(reader, &p, &k), 0);
  ReplayOfflineResult r;
  ck_assert_int_eq(replay_offline_run(reader, &k, &r), 0);
  ReplayOfflineSummary s;
  replay_offline_summarise(&r, &s);
  ck_assert_double_eq(s.rel_error, 0.0);
  ck_assert_double_eq(s.mass_lost, 0.0);
  ck_assert_double_eq(s.needle_kept, 1.0);
  replay_offline_result_free(&r);
  evict_keep_set_free(&k);
  trace_close(reader);
}
END_TEST

START_TEST(test_oracle_single_eviction_is_never_worse_at_step_one) {
  char trace[4096];
  tmp_path(trace, sizeof trace, "evict_oracle.h5");
  static const char *const others[] = {"attn",  "attn2",  "attn_vl1", "attn_maxpool", "obc_v",
                                       "obc_k", "obc_vk", "remove",   "random",       "recency"};
  size_t compared = 0;
  for (uint64_t seed = 1; seed <= 3; seed++) {
    synth_trace(trace, 2, seed);
    TraceReader *reader = NULL;
    ck_assert_int_eq(trace_open(trace, &reader), 0);
    size_t s = trace_meta(reader)->n_prompt;
    char budget[32];
    snprintf(budget, sizeof budget, "%zu", s - 1); /* evict exactly one token per head */
    EvictPolicy p;
    EvictKeepSet k;
    ReplayOfflineResult oracle, other;
    policy_for(&p, "oracle", budget, 0, 0, "uniform", "aware");
    ck_assert_int_eq(evict_policy_apply(reader, &p, &k), 0);
    ck_assert_int_eq(replay_offline_run(reader, &k, &oracle), 0);
    evict_keep_set_free(&k);
    for (size_t o = 0; o < sizeof others / sizeof *others; o++) {
      policy_for(&p, others[o], budget, 0, 0, "uniform", "aware");
      ck_assert_int_eq(evict_policy_apply(reader, &p, &k), 0);
      ck_assert_int_eq(replay_offline_run(reader, &k, &other), 0);
      size_t T = oracle.n_steps;
      for (size_t i = 0; i < oracle.n_layers * oracle.n_kv_heads; i++) {
        /* oracle@1 is the exact squared error of evicting each token at step
         * 1, summed over the group: its choice is the minimum. */
        ck_assert_double_le(oracle.sq_error[i * T], other.sq_error[i * T] * (1 + 1e-9) + 1e-15);
        compared++;
      }
      replay_offline_result_free(&other);
      evict_keep_set_free(&k);
    }
    replay_offline_result_free(&oracle);
    trace_close(reader);
  }
  printf("oracle single eviction: %zu (head, policy) pairs, never worse at step 1\n", compared);
}
END_TEST

/* ---- model replay ---------------------------------------------------------- */

/* A trace of the tiny model: S prompt tokens, T greedy decode steps with
 * their logits, K/V from the cache (Q/O/lse rows of the decode steps are not
 * needed by model replay and are written as zeros). */
static void tiny_trace(const Model *model, const char *path) {
  enum { S = 24, T = 4 };
  const ModelConfig *c = &model->config;
  int32_t tokens[S + T];
  for (size_t t = 0; t < S; t++) tokens[t] = (int32_t)((t * 7 + 3) % TINY_VOCAB);
  float *logits = malloc((T + 1) * c->vocab_size * sizeof(float));
  RuntimeOptions options = {.max_context = S + T};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  ck_assert_int_eq(runtime_forward(rt, tokens, S, RUNTIME_LOGITS_LAST, logits, NULL), 0);
  for (size_t t = 0; t < T; t++) {
    tokens[S + t] = (int32_t)generate_argmax(logits + t * c->vocab_size, c->vocab_size);
    ck_assert_int_eq(runtime_forward(rt, tokens + S + t, 1, RUNTIME_LOGITS_LAST,
                                     logits + (t + 1) * c->vocab_size, NULL),
                     0);
  }
  TraceMeta meta;
  memset(&meta, 0, sizeof meta);
  snprintf(meta.producer, sizeof meta.producer, "test_evict tiny trace");
  snprintf(meta.model.name, sizeof meta.model.name, "tiny");
  snprintf(meta.model.architecture, sizeof meta.model.architecture, "llama");
  snprintf(meta.model.rope_scaling, sizeof meta.model.rope_scaling, "none");
  meta.model.n_layers = c->n_layers;
  meta.model.n_heads = c->n_heads;
  meta.model.n_kv_heads = c->n_kv_heads;
  meta.model.head_dim = c->head_dim;
  meta.model.vocab_size = c->vocab_size;
  meta.model.rope_theta = c->rope_theta;
  meta.model.attn_scale = 1.0 / sqrt((double)c->head_dim);
  meta.n_prompt = S;
  meta.n_decode = T;
  meta.n_positions = S + T;
  meta.n_rows = T;
  int64_t rows[T];
  for (size_t t = 0; t < T; t++) rows[t] = (int64_t)(S + t);
  meta.row_positions = rows;
  meta.tokens = tokens;
  meta.needle_found = -1;
  TraceWriteOptions wo = {.store_logits = true};
  TraceWriter *w = NULL;
  ck_assert_int_eq(trace_create(path, &meta, &wo, &w), 0);
  RuntimeCache *cache = runtime_cache(rt);
  float zeros[TINY_HEADS * T * TINY_HD] = {0};
  for (size_t l = 0; l < c->n_layers; l++) {
    for (size_t g = 0; g < c->n_kv_heads; g++)
      ck_assert_int_eq(
          trace_write_kv(w, l, g, runtime_cache_k(cache, l, g), runtime_cache_v(cache, l, g)), 0);
    for (size_t h = 0; h < c->n_heads; h++)
      ck_assert_int_eq(trace_write_rows(w, l, h, zeros, zeros, zeros), 0);
  }
  ck_assert_int_eq(trace_write_logits(w, logits + c->vocab_size), 0);
  ck_assert_int_eq(trace_commit(w), 0);
  runtime_free(rt);
  free(logits);
}

START_TEST(test_model_replay_without_eviction_reproduces_the_captured_logits) {
  Model *model = tiny_gguf_model("evict_tiny.gguf");
  char trace[4096], other[4096];
  tmp_path(trace, sizeof trace, "evict_tiny_trace.h5");
  tiny_trace(model, trace);
  TraceReader *reader = NULL;
  ck_assert_int_eq(trace_open(trace, &reader), 0);
  Replayer *replayer = NULL;
  ck_assert_msg(replay_model_open(model, reader, 0, 1, NULL, &replayer) == 0, "%s",
                obc_error_message());
  EvictPolicy p;
  EvictKeepSet keep_all;
  policy_for(&p, "random", "100%", 0, 0, "uniform", "aware");
  ck_assert_int_eq(evict_policy_apply(reader, &p, &keep_all), 0);
  ReplayAnswer *r = malloc(sizeof *r);
  ck_assert_int_eq(replay_model_run(replayer, &keep_all, r), 0);
  printf(
      "model replay, nothing evicted: max relative logit difference %.3g, KL %.3g, "
      "agreement %.2f\n",
      r->logits_rel_diff, r->kl_forced_mean, r->agreement);
  ck_assert_double_le(r->logits_rel_diff, 1e-4);
  ck_assert_double_le(r->kl_forced_mean, 1e-8);
  ck_assert_double_eq(r->agreement, 1.0);
  ck_assert_uint_eq(r->first_divergence, 0);

  /* Evicting most of the prompt changes the predictions. */
  EvictKeepSet few;
  policy_for(&p, "recency", "4", 0, 1, "uniform", "aware");
  ck_assert_int_eq(evict_policy_apply(reader, &p, &few), 0);
  ck_assert_int_eq(replay_model_run(replayer, &few, r), 0);
  printf("model replay, 4 of 24 kept: max relative logit difference %.3g, KL %.3g\n",
         r->logits_rel_diff, r->kl_forced_mean);
  ck_assert_double_gt(r->logits_rel_diff, 1e-3); /* the tiny model's logits are flat: KL is small */
  ck_assert_double_gt(r->kl_forced_mean, 0.0);
  /* The reported mean is the mean of the per-step KLs: the same n terms, so
   * only the order of the additions differs (relative 1e-12 is ~1e4 ulps). */
  double sum = 0.0;
  for (size_t t = 0; t < r->n_steps; t++) sum += r->kl_forced[t];
  ck_assert_double_eq_tol(sum / (double)r->n_steps, r->kl_forced_mean, 1e-12 * r->kl_forced_mean);
  size_t mismatch = 0; /* the first step whose token differs, by hand */
  for (size_t t = r->n_steps; t-- > 0;)
    if (r->tokens[t] != replay_model_full_token(replayer, t + 1)) mismatch = t + 1;
  ck_assert_uint_eq(r->first_divergence, mismatch);
  /* ...and keeping everything again restores them. */
  ck_assert_int_eq(replay_model_run(replayer, &keep_all, r), 0);
  ck_assert_double_le(r->logits_rel_diff, 1e-4);
  evict_keep_set_free(&few);
  evict_keep_set_free(&keep_all);
  replay_model_close(replayer);
  trace_close(reader);

  /* A trace of another shape (the synthetic one: head dim 16) is refused. */
  tmp_path(other, sizeof other, "evict_other_shape.h5");
  synth_trace(other, 2, 1);
  ck_assert_int_eq(trace_open(other, &reader), 0);
  ck_assert_int_eq(replay_model_open(model, reader, 0, 1, NULL, &replayer), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "does not match the trace"));
  trace_close(reader);
  free(r);
  model_free(model);
}
END_TEST


/* Every row of the tiny model with its Q, O, lse and A (capture seam). */
typedef struct {
  size_t n;
  float q[TINY_LAYERS][TINY_HEADS][32][TINY_HD];
  float o[TINY_LAYERS][TINY_HEADS][32][TINY_HD];
  float lse[TINY_LAYERS][TINY_HEADS][32];
} AllRows;

static int keep_all_rows(void *user, const RuntimeLayerCapture *v) {
  AllRows *a = user;
  for (size_t h = 0; h < v->n_heads; h++)
    for (size_t r = 0; r < v->n_rows; r++) {
      size_t i = v->row_positions[r];
      memcpy(a->q[v->layer][h][i], v->q + (h * v->n_rows + r) * v->head_dim, TINY_HD * 4);
      memcpy(a->o[v->layer][h][i], v->o + (h * v->n_rows + r) * v->head_dim, TINY_HD * 4);
      a->lse[v->layer][h][i] = v->lse[h * v->n_rows + r];
    }
  return 0;
}

START_TEST(test_dynamic_running_scores_equal_the_closed_forms_over_the_history) {
  Model *model = tiny_gguf_model("evict_tiny.gguf");
  enum { N = 30 };
  int32_t tokens[N];
  for (size_t t = 0; t < N; t++) tokens[t] = (int32_t)((t * 13 + 2) % TINY_VOCAB);
  static AllRows rows;
  size_t positions[N];
  for (size_t t = 0; t < N; t++) positions[t] = t;
  RuntimeOptions options = {.max_context = N};
  Runtime *rt = NULL;
  ck_assert_int_eq(runtime_create(model, &options, &rt), 0);
  RuntimeCapture capture = {
      .row_positions = positions, .n_rows = N, .user = &rows, .on_layer = keep_all_rows};
  ck_assert_int_eq(runtime_forward(rt, tokens, N, RUNTIME_LOGITS_NONE, NULL, &capture), 0);
  RuntimeCache *cache = runtime_cache(rt);
  static const char *const names[] = {"attn", "obc_v", "obc_k", "obc_vk"};
  double got[TINY_LAYERS * TINY_KV * N], worst = 0.0;
  size_t d = TINY_HD, group = TINY_HEADS / TINY_KV;
  for (size_t si = 0; si < 4; si++) {
    ck_assert_int_eq(evict_dynamic_scores(model, tokens, N, names[si], 7, got), 0);
    for (size_t l = 0; l < TINY_LAYERS; l++)
      for (size_t g = 0; g < TINY_KV; g++) {
        const float *K = runtime_cache_k(cache, l, g), *V = runtime_cache_v(cache, l, g);
        for (size_t p = 0; p < N; p++) {
          double expected = 0.0;
          for (size_t j = 0; j < group; j++)
            for (size_t i = p; i < N; i++) { /* every row that sees p */
              size_t h = g * group + j;
              const float *q = rows.q[l][h][i], *o = rows.o[l][h][i];
              double z = 0.0, v_sq = 0.0, vo = 0.0, diff_sq = 0.0;
              for (size_t e = 0; e < d; e++) {
                z += (double)q[e] * K[p * d + e];
                v_sq += (double)V[p * d + e] * V[p * d + e];
                vo += (double)V[p * d + e] * o[e];
                diff_sq += ((double)V[p * d + e] - o[e]) * ((double)V[p * d + e] - o[e]);
              }
              z /= sqrt((double)d);
              double a = exp(z - rows.lse[l][h][i]), a2 = a * a;
              double sv = a2 * v_sq, sk = a2 * z * z * diff_sq;
              expected += si == 0   ? a
                          : si == 1 ? sv
                          : si == 2 ? sk
                                    : sv + sk + 2.0 * a2 * z * (v_sq - vo);
            }
          double value = got[(l * TINY_KV + g) * N + p];
          worst = fmax(worst, fabs(value - expected) / (fabs(expected) + 1e-6));
        }
      }
  }
  printf("dynamic running scores vs closed forms over the history: max relative diff %.3g\n",
         worst);
  ck_assert_double_le(worst, 1e-4);
  runtime_free(rt);
  model_free(model);
}
END_TEST

/* --oracle: the accepted forms, their names, and one-line errors for the rest. */
START_TEST(test_oracle_step_ranges_parse_name_and_reject_bad_specs) {
  static const struct {
    const char *text, *name;
  } good[] = {{"1", "oracle@1"},
              {"T", "oracle@T"},
              {"3", "oracle@3-3"},
              {"3-9", "oracle@3-9"},
              {"1-1", "oracle@1"},
              {"oracle@T", "oracle@T"},
              {"oracle@2-4", "oracle@2-4"},
              {"oracle1", "oracle@1"},
              {"oracleT", "oracle@T"}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    OracleSteps steps;
    char name[64];
    ck_assert_msg(oracle_steps_parse("--oracle", good[i].text, &steps) == 0, "%s", good[i].text);
    oracle_steps_name("oracle", &steps, name, sizeof name);
    ck_assert_str_eq(name, good[i].name);
  }
  static const char *const bad[] = {"0", "x", "9-3", "3-", "-3", "T1", "1-T", "", "2.5", "0-2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    OracleSteps steps;
    ck_assert_int_eq(oracle_steps_parse("--oracle", bad[i], &steps), OBC_EINVAL);
    const char *message = obc_error_message();
    ck_assert_msg(strstr(message, "--oracle") && strstr(message, "a-b") && !strchr(message, '\n'),
                  "%s -> %s", bad[i], message);
  }
  OracleSteps steps;
  size_t first = 0, count = 0;
  ck_assert_int_eq(oracle_steps_parse("--oracle", "3-9", &steps), 0);
  ck_assert_int_eq(oracle_steps_resolve(&steps, 12, "t.h5", &first, &count), 0);
  ck_assert_uint_eq(first, 3);
  ck_assert_uint_eq(count, 7);
  ck_assert_int_eq(oracle_steps_resolve(&ORACLE_STEPS_ALL, 12, "t.h5", &first, &count), 0);
  ck_assert_uint_eq(first, 1);
  ck_assert_uint_eq(count, 12);
  ck_assert_int_eq(oracle_steps_resolve(&steps, 8, "t.h5", &first, &count), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "t.h5: oracle@3-9"));
  ck_assert_ptr_null(strchr(obc_error_message(), '\n'));
}
END_TEST

/* oracle@1-3 is the sum of oracle@1, oracle@2-2 and oracle@3-3. Each is a
 * sum of non-negative terms in double precision, so they agree to a few ulps
 * of the sum: 1e-12 relative leaves a thousandfold margin. */
START_TEST(test_oracle_over_a_range_is_the_sum_of_its_steps) {
  FixtureProblem t;
  size_t s = 40, T = 4;
  fixture_make(&t, 17, s, T, 16, 3, 8);
  double *range = malloc(s * sizeof *range), *step = malloc(s * sizeof *step);
  double *sum = calloc(s, sizeof *sum);
  ck_assert_int_eq(oracle_eviction_error(&t.head, 1, 3, OBC_PRECISION_DOUBLE, range), 0);
  for (size_t k = 1; k <= 3; k++) {
    ck_assert_int_eq(oracle_eviction_error(&t.head, k, 1, OBC_PRECISION_DOUBLE, step), 0);
    for (size_t p = 0; p < s; p++) sum[p] += step[p];
  }
  for (size_t p = 0; p < s; p++) ck_assert_double_eq_tol(range[p], sum[p], 1e-12 * sum[p]);
  ck_assert_int_eq(oracle_eviction_error(&t.head, 2, 4, OBC_PRECISION_DOUBLE, step), OBC_EINVAL);
  free(range), free(step), free(sum);
  fixture_free(&t);
}
END_TEST

/* decode_attn against a brute-force softmax: for each decode row of the
 * range and each query head, A_ip = exp(z_ip - max) / sum over keys 0..i
 * (the decoded keys included), summed. Double GEMMs against an explicit loop:
 * both ~1e-15 relative per term, 1e-10 is generous. */
START_TEST(test_decode_attn_is_the_sum_of_the_decode_rows_softmax_weights) {
  FixtureProblem t;
  size_t s = 50, T = 5, d = 16, group = 2;
  fixture_make(&t, 23, s, T, d, group, 6);
  double *got = malloc(s * sizeof *got), *want = calloc(s, sizeof *want);
  ck_assert_int_eq(oracle_decode_attention(&t.head, 2, 3, OBC_PRECISION_DOUBLE, got), 0);
  size_t first = t.head.n_rows - T + 1; /* the decode row of step 2 */
  for (size_t j = 0; j < group; j++)
    for (size_t r = first; r < first + 3; r++) {
      const double *q = t.head.Q + (j * t.head.n_rows + r) * d;
      size_t position = (size_t)t.head.row_positions[r];
      double zmax = -HUGE_VAL, total = 0.0;
      for (size_t k = 0; k <= position; k++)
        zmax = fmax(zmax, t.head.attn_scale * fixture_dot(q, t.head.K + k * d, d));
      for (size_t k = 0; k <= position; k++)
        total += exp(t.head.attn_scale * fixture_dot(q, t.head.K + k * d, d) - zmax);
      for (size_t p = 0; p < s; p++)
        want[p] += exp(t.head.attn_scale * fixture_dot(q, t.head.K + p * d, d) - zmax) / total;
    }
  for (size_t p = 0; p < s; p++) ck_assert_double_eq_tol(got[p], want[p], 1e-10 * want[p] + 1e-300);
  ck_assert_int_eq(oracle_decode_attention(&t.head, 4, 3, OBC_PRECISION_DOUBLE, got), OBC_EINVAL);
  free(got), free(want);
  fixture_free(&t);
}
END_TEST

/* The answer metrics on constructed answers. */
START_TEST(test_replay_answer_metrics_on_constructed_answers) {
  int32_t full[5] = {7, 8, 9, 10, 11}, same[5] = {7, 8, 9, 10, 11}, late[5] = {7, 8, 9, 3, 11};
  ck_assert_uint_eq(replay_first_divergence(full, same, 5), 0);
  ck_assert_uint_eq(replay_first_divergence(full, late, 5), 4);
  ck_assert_uint_eq(replay_first_divergence(full, (int32_t[]){1, 8, 9, 10, 11}, 5), 1);
  /* The reporter's case: " 989059." for the value 9890590: 6 of 7 digits. */
  ck_assert_uint_eq(replay_needle_prefix(" 989059.", "9890590"), 6);
  ck_assert_uint_eq(replay_needle_prefix("The number is 9890590.", "9890590"), 7);
  ck_assert_uint_eq(replay_needle_prefix(" 123", "9890590"), 0);
  ck_assert_uint_eq(replay_needle_prefix("ABC-x", "abc-def"), 4); /* case ignored */
  const char *value[7] = {"9", "8", "9", "0", "5", "9", "0"};
  const char *dropped[6] = {"9", "8", "9", "0", "5", "9"};
  const char *other[9] = {"9", "8", "7", "6", "5", "4", "3", "2", "1"};
  ck_assert_double_eq(replay_piece_share(value, 7, value, 7), 1.0);
  ck_assert_double_eq_tol(replay_piece_share(value, 7, dropped, 6), 6.0 / 7.0, 1e-15);
  ck_assert_double_eq_tol(replay_piece_share(value, 7, other, 9), 3.0 / 7.0, 1e-15); /* 9 8 5 */
  ck_assert(isnan(replay_piece_share(value, 0, other, 9)));
}
END_TEST

/* --score names: oracle and decode_attn take --oracle or their @steps. */
START_TEST(test_policy_score_names_carry_the_decode_steps) {
  static const struct {
    const char *score, *oracle, *name;
  } cases[] = {{"oracle", NULL, "oracle@1"},
               {"oracle", "T", "oracle@T"},
               {"oracle@T", NULL, "oracle@T"},
               {"oracle", "3-9", "oracle@3-9"},
               {"decode_attn", NULL, "decode_attn"},
               {"decode_attn", "1", "decode_attn@1"},
               {"decode_attn@2-5", NULL, "decode_attn@2-5"},
               {"obc_vk", "T", "obc_vk"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    EvictPolicy p;
    char name[64];
    evict_policy_default(&p);
    ck_assert_int_eq(evict_policy_set_score(&p, cases[i].score), 0);
    if (cases[i].oracle) ck_assert_int_eq(evict_policy_set_steps(&p, cases[i].oracle), 0);
    evict_policy_score_name(&p, name, sizeof name);
    ck_assert_str_eq(name, cases[i].name);
  }
  EvictPolicy p;
  evict_policy_default(&p);
  ck_assert_int_eq(evict_policy_set_score(&p, "oracle@0"), OBC_EINVAL);
}
END_TEST

/* Byte `at` of the file at path inverted. */
static void flip_byte(const char *path, long at) {
  FILE *f = fopen(path, "r+b");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
  int c = fgetc(f);
  ck_assert_int_ne(c, EOF);
  ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
  fputc(c ^ 0xff, f);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_damaged_keep_file_is_an_error_not_a_crash) {
  char keep[4096], bad[4200];
  TraceReader *reader = NULL;
  keep_fixture("evict_damaged.h5", "0123456789abcdef", keep, sizeof keep, &reader);
  TraceMeta meta = *trace_meta(reader);
  snprintf(meta.content_hash, sizeof meta.content_hash, "0123456789abcdef");
  snprintf(bad, sizeof bad, "%s.bad.h5", keep);
  /* A damaged chunk of the mask: its Fletcher32 checksum refuses it. */
  hid_t file = H5Fopen(keep, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t set = H5Dopen2(file, "keep", H5P_DEFAULT);
  haddr_t address = HADDR_UNDEF;
  hsize_t size = 0;
  hid_t space = H5Dget_space(set);
  ck_assert_int_ge(H5Dget_chunk_info(set, space, 0, NULL, NULL, &address, &size), 0);
  H5Sclose(space);
  H5Dclose(set);
  H5Fclose(file);
  copy_file(keep, bad);
  flip_byte(bad, (long)address + 5);
  ck_assert_int_eq(read_keep_expect(bad, &meta, "cannot read dataset keep (damaged"), OBC_EFORMAT);
  /* Any byte inverted (every third under the sanitizers, tests/test_env.h says
   * why that still reaches every structure): read or refused, never a crash
   * (checksummed metadata, no variable-length data); the same mask whenever
   * it is read. */
  FILE *f = fopen(keep, "rb");
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  long bytes = ftell(f);
  fclose(f);
  EvictKeepSet good;
  ck_assert_int_eq(evict_keep_read(keep, &meta, &good), 0);
  size_t n_read = 0, mask_bytes = good.n_layers * good.n_kv_heads * good.n_prompt;
  long stride = test_damage_stride();
  for (long at = 0; at < bytes; at += stride) {
    copy_file(keep, bad);
    flip_byte(bad, at);
    EvictKeepSet back;
    if (evict_keep_read(bad, &meta, &back) == 0) {
      ck_assert_int_eq(memcmp(back.keep, good.keep, mask_bytes), 0);
      evict_keep_set_free(&back);
      n_read++;
    }
  }
  printf("damaged keep files: one in %ld of %ld bytes inverted, %zu still read (unused bytes)\n",
         stride, bytes, n_read);
  evict_keep_set_free(&good);
  trace_close(reader);
}
END_TEST

static Suite *evict_suite(void) {
  Suite *s = suite_create("evict");
  TCase *tc = tcase_create("runtime");
  tcase_add_test(tc, test_evicted_keys_leave_the_softmax_and_new_positions_stay);
  suite_add_tcase(s, tc);
  TCase *policies = tcase_create("policies");
  tcase_add_test(policies, test_kept_sets_have_the_requested_size_sinks_recent_and_no_duplicates);
  tcase_add_test(policies, test_offline_replay_equals_brute_force_attention_over_the_kept_set);
  tcase_add_test(policies, test_keep_file_records_the_protocol_and_reads_the_old_mode);
  tcase_add_test(policies, test_protocol_and_protect_parse_and_reject_bad_names);
  tcase_add_test(policies, test_keeping_everything_loses_nothing);
  tcase_add_test(policies, test_oracle_single_eviction_is_never_worse_at_step_one);
  tcase_add_test(policies, test_oracle_step_ranges_parse_name_and_reject_bad_specs);
  tcase_add_test(policies, test_oracle_over_a_range_is_the_sum_of_its_steps);
  tcase_add_test(policies, test_decode_attn_is_the_sum_of_the_decode_rows_softmax_weights);
  tcase_add_test(policies, test_replay_answer_metrics_on_constructed_answers);
  tcase_add_test(policies, test_policy_score_names_carry_the_decode_steps);
  tcase_add_test(policies, test_keep_file_is_refused_by_a_trace_with_another_content_hash);
  tcase_add_test(policies, test_keep_file_values_out_of_range_are_refused_not_cast);
  tcase_add_test(policies, test_keep_file_contradicting_its_own_counts_or_unbound_is_refused);
  tcase_add_test(policies, test_damaged_keep_file_is_an_error_not_a_crash);
  suite_add_tcase(s, policies);
  TCase *replay = tcase_create("model replay");
  tcase_add_test(replay, test_model_replay_without_eviction_reproduces_the_captured_logits);
  tcase_add_test(replay, test_dynamic_running_scores_equal_the_closed_forms_over_the_history);
  suite_add_tcase(s, replay);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  test_scratch_begin("evict");
  SRunner *runner = srunner_create(evict_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
