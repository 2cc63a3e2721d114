/* Check suite of the GGUF reader (formats/gguf.h) and of model_load on GGUF
 * files: the real SmolLM2 file reads as the gguf package reads it, every
 * supported type dequantises exactly as gguf.quants.dequantize does (fixtures
 * from tests/make_quant_fixtures.py), metadata of every value type reads back,
 * and damaged or unsupported files fail with a message naming the file, never a
 * crash. Small models are written by tests/gguf_builder.h. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_startup.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "tests/gguf_builder.h"
#include "tests/tiny_gguf.h"
#include "tests/test_env.h"

static char scratch[4096];
static char fixtures[4096];

static void make_scratch(void) { test_scratch_path("gguf", scratch, sizeof scratch, 1); }


/* Runs tests/make_quant_fixtures.py once per run (unchecked fixture). */
static void make_fixtures(void) {
  const char *source = getenv("OBC_SOURCE_DIR"), *model = getenv("OBC_MODEL");
  test_scratch_file("quant_fixtures", fixtures, sizeof fixtures);
  char manifest[4200];
  snprintf(manifest, sizeof manifest, "%s/manifest.txt", fixtures);
  if (access(manifest, R_OK) == 0) return;
  char command[16384];
  snprintf(command, sizeof command, "python3 '%s/tests/make_quant_fixtures.py' '%s' '%s'",
           source ? source : ".", fixtures, model ? model : "");
  if (system(command) != 0) fprintf(stderr, "make_quant_fixtures.py failed: %s\n", command);
}

static void *read_file(const char *path, size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  void *data = malloc(n > 0 ? (size_t)n : 1);
  *size = fread(data, 1, (size_t)n, fp);
  fclose(fp);
  return data;
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *fp = fopen(path, "wb");
  ck_assert_ptr_nonnull(fp);
  ck_assert_uint_eq(fwrite(data, 1, size, fp), size);
  fclose(fp);
}

static void assert_message_names(const char *path, const char *fragment) {
  const char *msg = obc_error_message();
  ck_assert_msg(strstr(msg, path) != NULL, "message does not name %s: %s", path, msg);
  if (fragment)
    ck_assert_msg(strstr(msg, fragment) != NULL, "message lacks \"%s\": %s", fragment, msg);
}

/* Writes the tiny model to scratch/<file> and returns its path (static). */
static const char *tiny_gguf(const TinySpec *spec, const char *file) {
  static char path[4200];
  make_scratch();
  snprintf(path, sizeof path, "%s/%s", scratch, file);
  tiny_gguf_write(spec, path);
  return path;
}

/* ---- the real file ---- */

START_TEST(real_smollm2_header_metadata_and_tensor_table_read_as_gguf_package_reads_them) {
  const char *path = test_real_model();
  if (!path) return;
  GgufFile *f;
  ck_assert_int_eq(gguf_open(path, &f), 0);
  ck_assert_uint_eq(gguf_version(f), 3);
  ck_assert_uint_eq(gguf_alignment(f), 32);
  uint64_t u;
  static const struct {
    const char *key;
    uint64_t value;
  } sizes[] = {
      {"llama.block_count", 30},
      {"llama.attention.head_count", 9},
      {"llama.attention.head_count_kv", 3},
      {"llama.embedding_length", 576},
      {"llama.feed_forward_length", 1536},
      {"llama.context_length", 8192},
      {"tokenizer.ggml.bos_token_id", 1},
      {"tokenizer.ggml.eos_token_id", 2},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    ck_assert_int_eq(gguf_get_u64(f, sizes[i].key, &u), 0);
    ck_assert_uint_eq(u, sizes[i].value);
  }
  double theta;
  ck_assert_int_eq(gguf_get_f64(f, "llama.rope.freq_base", &theta), 0);
  ck_assert(theta == 100000.0);
  GgufString s;
  ck_assert_int_eq(gguf_get_string(f, "general.architecture", &s), 0);
  ck_assert(s.length == 5 && !memcmp(s.data, "llama", 5));
  bool flag = true;
  ck_assert_int_eq(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &flag), 0);
  ck_assert(!flag);
  uint32_t element_type;
  uint64_t count;
  ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.tokens", &element_type, &count), 0);
  ck_assert_uint_eq(element_type, GGUF_TYPE_STRING);
  ck_assert_uint_eq(count, 49152);
  ck_assert_int_eq(gguf_get_array_string(f, "tokenizer.ggml.tokens", 1, &s), 0);
  ck_assert(s.length == 12 && !memcmp(s.data, "<|im_start|>", 12));
  ck_assert_int_eq(gguf_get_array(f, "tokenizer.ggml.merges", &element_type, &count), 0);
  ck_assert_uint_eq(count, 48900);
  ck_assert_int_eq(gguf_get_u64(f, "no.such.key", &u), OBC_ENOTFOUND);
  ck_assert_int_eq(gguf_get_string(f, "llama.block_count", &s), OBC_EFORMAT);
  assert_message_names(path, "llama.block_count");

  size_t by_type[64] = {0};
  ck_assert_uint_eq(gguf_tensor_count(f), 272);
  for (size_t i = 0; i < gguf_tensor_count(f); i++) by_type[gguf_tensor(f, i)->type % 64]++;
  printf("SmolLM2 tensor table: %zu Q4_1, %zu Q8_0, %zu F32 of %zu\n", by_type[GGML_TYPE_Q4_1],
         by_type[GGML_TYPE_Q8_0], by_type[GGML_TYPE_F32], gguf_tensor_count(f));
  ck_assert_uint_eq(by_type[GGML_TYPE_Q4_1], 210);
  ck_assert_uint_eq(by_type[GGML_TYPE_Q8_0], 1);
  ck_assert_uint_eq(by_type[GGML_TYPE_F32], 61);
  const GgufTensor *t = gguf_find_tensor(f, "token_embd.weight");
  ck_assert_ptr_nonnull(t);
  ck_assert_uint_eq(t->type, GGML_TYPE_Q8_0);
  ck_assert_uint_eq(t->n_dims, 2);
  ck_assert_uint_eq(t->dims[0], 576);
  ck_assert_uint_eq(t->dims[1], 49152);
  ck_assert_ptr_null(gguf_find_tensor(f, "output.weight")); /* tied */
  gguf_close(f);
}
END_TEST

static void compare_floats(const char *what, const float *got, const float *want, size_t n) {
  double max_diff = 0;
  size_t worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)want[i]);
    if (d > max_diff || isnan(d)) {
      max_diff = isnan(d) ? INFINITY : d;
      worst = i;
    }
  }
  printf("%-28s %8zu values, max |C - gguf package| = %g\n", what, n, max_diff);
  /* Same fp32 operations in the same order: bit-identical is expected. */
  ck_assert_msg(max_diff == 0, "%s: element %zu is %.9g, reference %.9g", what, worst,
                (double)got[worst], (double)want[worst]);
}

START_TEST(real_smollm2_tensors_dequantise_like_gguf_package) {
  const char *path = test_real_model();
  if (!path) return;
  GgufFile *f;
  ck_assert_int_eq(gguf_open(path, &f), 0);
  static const char *names[] = {"blk.0.attn_k.weight", "blk.29.ffn_down.weight",
                                "output_norm.weight"};
  for (size_t i = 0; i < 3; i++) {
    char file[4500];
    snprintf(file, sizeof file, "%s/REAL_%s.f32", fixtures, names[i]);
    size_t size = 0;
    float *want = read_file(file, &size);
    ck_assert_msg(want != NULL, "fixture %s missing (make_quant_fixtures.py failed?)", file);
    const GgufTensor *t = gguf_find_tensor(f, names[i]);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(size, t->n_elements * sizeof(float));
    float *got = malloc(size);
    ck_assert_int_eq(gguf_tensor_to_f32(f, t, got), 0);
    compare_floats(names[i], got, want, t->n_elements);
    free(got);
    free(want);
  }
  gguf_close(f);
}
END_TEST

START_TEST(every_supported_type_dequantises_like_gguf_package) {
  char path[4500];
  snprintf(path, sizeof path, "%s/manifest.txt", fixtures);
  FILE *manifest = fopen(path, "r");
  ck_assert_msg(manifest != NULL, "%s missing (make_quant_fixtures.py failed?)", path);
  char name[32];
  unsigned type;
  size_t n, types = 0;
  while (fscanf(manifest, "%31s %u %zu", name, &type, &n) == 3) {
    size_t raw_size, want_size;
    snprintf(path, sizeof path, "%s/%s.raw", fixtures, name);
    void *raw = read_file(path, &raw_size);
    snprintf(path, sizeof path, "%s/%s.f32", fixtures, name);
    float *want = read_file(path, &want_size);
    ck_assert(raw && want);
    ck_assert_uint_eq(want_size, n * sizeof(float));
    ck_assert_uint_eq(raw_size, n / gguf_type_block_size(type) * gguf_type_block_bytes(type));
    float *got = malloc(want_size);
    ck_assert_int_eq(dequant_gguf(type, raw, got, n), 0); /* AVX2 where it runs */
    compare_floats(name, got, want, n);
    ck_assert_int_eq(dequant_gguf_portable(type, raw, got, n), 0);
    compare_floats(name, got, want, n);
    ck_assert_str_eq(gguf_type_name(type), name);
    free(got);
    free(raw);
    free(want);
    types++;
  }
  fclose(manifest);
  ck_assert_uint_eq(types, 11);
  float out[32];
  ck_assert_int_eq(dequant_gguf(GGML_TYPE_Q4_0, out, out, 31), OBC_EINVAL);
  ck_assert_int_eq(dequant_gguf(10 /* Q2_K */, out, out, 256), OBC_EUNSUPPORTED);
}
END_TEST

/* ---- metadata ---- */

static const char *metadata_file(uint32_t version) {
  static char path[4200];
  TestGguf g;
  tg_init(&g, version);
  uint8_t u8 = 200;
  int8_t i8 = -100;
  uint16_t u16 = 60000;
  int16_t i16 = -30000;
  int32_t i32 = -2000000000;
  uint64_t u64 = 1ull << 40;
  int64_t i64 = -(1ll << 40);
  double f64 = 0.1;
  uint8_t yes = 1;
  tg_kv_raw(&g, "v.u8", GGUF_TYPE_UINT8, &u8, 1);
  tg_kv_raw(&g, "v.i8", GGUF_TYPE_INT8, &i8, 1);
  tg_kv_raw(&g, "v.u16", GGUF_TYPE_UINT16, &u16, 2);
  tg_kv_raw(&g, "v.i16", GGUF_TYPE_INT16, &i16, 2);
  tg_kv_u32(&g, "v.u32", 4000000000u);
  tg_kv_raw(&g, "v.i32", GGUF_TYPE_INT32, &i32, 4);
  tg_kv_f32(&g, "v.f32", 0.5f);
  tg_kv_raw(&g, "v.bool", GGUF_TYPE_BOOL, &yes, 1);
  tg_kv_str(&g, "v.string", "h\xC3\xA9llo");
  tg_kv_raw(&g, "v.u64", GGUF_TYPE_UINT64, &u64, 8);
  tg_kv_raw(&g, "v.i64", GGUF_TYPE_INT64, &i64, 8);
  tg_kv_raw(&g, "v.f64", GGUF_TYPE_FLOAT64, &f64, 8);
  /* array of int16 */
  tb_str(&g.kv, "a.i16");
  tb_u32(&g.kv, GGUF_TYPE_ARRAY);
  tb_u32(&g.kv, GGUF_TYPE_INT16);
  tb_u64(&g.kv, 3);
  int16_t values[3] = {-1, 2, -3};
  tb_put(&g.kv, values, sizeof values);
  g.n_kv++;
  /* array of strings */
  tb_str(&g.kv, "a.strings");
  tb_u32(&g.kv, GGUF_TYPE_ARRAY);
  tb_u32(&g.kv, GGUF_TYPE_STRING);
  tb_u64(&g.kv, 3);
  tb_str(&g.kv, "");
  tb_str(&g.kv, "two");
  tb_str(&g.kv, "three!");
  g.n_kv++;
  /* array of arrays: [[1.5, 2.5], [], [strings...]] */
  tb_str(&g.kv, "a.nested");
  tb_u32(&g.kv, GGUF_TYPE_ARRAY);
  tb_u32(&g.kv, GGUF_TYPE_ARRAY);
  tb_u64(&g.kv, 3);
  tb_u32(&g.kv, GGUF_TYPE_FLOAT32);
  tb_u64(&g.kv, 2);
  float pair[2] = {1.5f, 2.5f};
  tb_put(&g.kv, pair, sizeof pair);
  tb_u32(&g.kv, GGUF_TYPE_INT8);
  tb_u64(&g.kv, 0);
  tb_u32(&g.kv, GGUF_TYPE_STRING);
  tb_u64(&g.kv, 1);
  tb_str(&g.kv, "deep");
  g.n_kv++;
  tg_kv_u32(&g, "general.alignment", 64);
  g.alignment = 64;
  float weights[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint64_t dims[2] = {4, 2};
  tg_tensor(&g, "w", GGML_TYPE_F32, 2, dims, weights, sizeof weights);
  uint64_t dims1[1] = {2};
  tg_tensor(&g, "b", GGML_TYPE_F32, 1, dims1, weights, 8);
  size_t size = 0;
  uint8_t *bytes = tg_finish(&g, &size);
  make_scratch();
  snprintf(path, sizeof path, "%s/metadata_v%u.gguf", scratch, version);
  write_file(path, bytes, size);
  free(bytes);
  return path;
}

START_TEST(metadata_of_every_value_type_reads_back_in_v2_and_v3) {
  for (uint32_t version = 2; version <= 3; version++) {
    const char *path = metadata_file(version);
    GgufFile *f;
    ck_assert_int_eq(gguf_open(path, &f), 0);
    ck_assert_uint_eq(gguf_version(f), version);
    ck_assert_uint_eq(gguf_metadata_count(f), 16);
    ck_assert_str_eq(gguf_metadata_key(f, 0), "v.u8");
    ck_assert_uint_eq(gguf_metadata_type(f, 14), GGUF_TYPE_ARRAY);
    uint64_t u;
    double d;
    ck_assert_int_eq(gguf_get_u64(f, "v.u8", &u), 0);
    ck_assert_uint_eq(u, 200);
    ck_assert_int_eq(gguf_get_u64(f, "v.u16", &u), 0);
    ck_assert_uint_eq(u, 60000);
    ck_assert_int_eq(gguf_get_u64(f, "v.u32", &u), 0);
    ck_assert_uint_eq(u, 4000000000u);
    ck_assert_int_eq(gguf_get_u64(f, "v.u64", &u), 0);
    ck_assert_uint_eq(u, 1ull << 40);
    ck_assert_int_eq(gguf_get_u64(f, "v.i8", &u), OBC_EFORMAT); /* negative */
    ck_assert_int_eq(gguf_get_f64(f, "v.i8", &d), 0);
    ck_assert(d == -100);
    ck_assert_int_eq(gguf_get_f64(f, "v.i16", &d), 0);
    ck_assert(d == -30000);
    ck_assert_int_eq(gguf_get_f64(f, "v.i32", &d), 0);
    ck_assert(d == -2000000000.0);
    ck_assert_int_eq(gguf_get_f64(f, "v.i64", &d), 0);
    ck_assert(d == -(double)(1ll << 40));
    ck_assert_int_eq(gguf_get_f64(f, "v.f32", &d), 0);
    ck_assert(d == 0.5);
    ck_assert_int_eq(gguf_get_f64(f, "v.f64", &d), 0);
    ck_assert(d == 0.1);
    bool b = false;
    ck_assert_int_eq(gguf_get_bool(f, "v.bool", &b), 0);
    ck_assert(b);
    ck_assert_int_eq(gguf_get_bool(f, "v.u8", &b), OBC_EFORMAT);
    GgufString s;
    ck_assert_int_eq(gguf_get_string(f, "v.string", &s), 0);
    ck_assert(s.length == 6 && !memcmp(s.data, "h\xC3\xA9llo", 6));
    uint32_t type;
    uint64_t count;
    int64_t i;
    ck_assert_int_eq(gguf_get_array(f, "a.i16", &type, &count), 0);
    ck_assert(type == GGUF_TYPE_INT16 && count == 3);
    ck_assert_int_eq(gguf_get_array_i64(f, "a.i16", 2, &i), 0);
    ck_assert_int_eq(i, -3);
    ck_assert_int_eq(gguf_get_array_f64(f, "a.i16", 1, &d), 0);
    ck_assert(d == 2);
    ck_assert_int_eq(gguf_get_array_i64(f, "a.i16", 3, &i), OBC_EINVAL);
    ck_assert_int_eq(gguf_get_array_string(f, "a.strings", 0, &s), 0);
    ck_assert_uint_eq(s.length, 0);
    ck_assert_int_eq(gguf_get_array_string(f, "a.strings", 2, &s), 0);
    ck_assert(s.length == 6 && !memcmp(s.data, "three!", 6));
    ck_assert_int_eq(gguf_get_array_i64(f, "a.strings", 0, &i), OBC_EFORMAT);
    ck_assert_int_eq(gguf_get_array(f, "a.nested", &type, &count), 0);
    ck_assert(type == GGUF_TYPE_ARRAY && count == 3);
    ck_assert_int_eq(gguf_get_array_nested(f, "a.nested", 0, &type, &count), 0);
    ck_assert(type == GGUF_TYPE_FLOAT32 && count == 2);
    ck_assert_int_eq(gguf_get_array_nested(f, "a.nested", 2, &type, &count), 0);
    ck_assert(type == GGUF_TYPE_STRING && count == 1);
    ck_assert_uint_eq(gguf_alignment(f), 64);
    ck_assert_uint_eq(gguf_data_offset(f) % 64, 0);
    const GgufTensor *w = gguf_find_tensor(f, "w"), *bias = gguf_find_tensor(f, "b");
    ck_assert(w && bias);
    ck_assert_uint_eq(bias->offset, 64);
    float out[8];
    ck_assert_int_eq(gguf_tensor_to_f32(f, w, out), 0);
    ck_assert(out[0] == 1 && out[7] == 8);
    uint64_t right[2] = {4, 2}, wrong[2] = {2, 4};
    ck_assert_int_eq(gguf_tensor_check_shape(f, w, 2, right), 0);
    ck_assert_int_eq(gguf_tensor_check_shape(f, w, 2, wrong), OBC_EFORMAT);
    assert_message_names(path, "tensor w has shape [4, 2], expected [2, 4]");
    gguf_close(f);
  }
}
END_TEST

/* ---- damaged files ---- */

START_TEST(every_truncation_of_a_file_fails_with_offset_and_path) {
  TinySpec spec = {0};
  const char *path = tiny_gguf(&spec, "whole.gguf");
  size_t size = 0;
  uint8_t *bytes = read_file(path, &size);
  char cut[4300];
  snprintf(cut, sizeof cut, "%s/cut.gguf", scratch);
  size_t failures = 0;
  write_file(cut, bytes, size);
  /* Shrink one file in place: every prefix of the header, then every 97th. */
  for (size_t length = size - 1; length + 1 > 0; length -= (length > 2048 ? 97 : 1)) {
    ck_assert_int_eq(truncate(cut, (off_t)length), 0);
    GgufFile *f = NULL;
    int rc = gguf_open(cut, &f);
    ck_assert_msg(rc == OBC_EFORMAT, "prefix of %zu bytes: rc %d", length, rc);
    ck_assert_ptr_null(f);
    /* The header cut: where; the tensor data cut: what the tensor needs
     * and where the file ends. */
    assert_message_names(cut, "truncated");
    if (strstr(obc_error_message(), "needs bytes [")) {
      char end[64];
      snprintf(end, sizeof end, "but the file ends at %zu (", length);
      assert_message_names(cut, end);
    } else {
      assert_message_names(cut, "truncated at offset");
    }
    failures++;
  }
  printf("truncation: %zu prefixes of a %zu-byte file, each refused; last: %s\n", failures, size,
         obc_error_message());
  free(bytes);
}
END_TEST

START_TEST(bad_magic_and_unsupported_versions_are_refused) {
  TinySpec spec = {0};
  const char *path = tiny_gguf(&spec, "magic.gguf");
  size_t size = 0;
  uint8_t *bytes = read_file(path, &size);
  GgufFile *f;
  memcpy(bytes, "GGML", 4);
  write_file(path, bytes, size);
  ck_assert_int_eq(gguf_open(path, &f), OBC_EFORMAT);
  assert_message_names(path, "not a GGUF file");
  memcpy(bytes, "GGUF", 4);
  uint32_t versions[] = {1, 4, 0x03000000u};
  for (size_t i = 0; i < 3; i++) {
    memcpy(bytes + 4, &versions[i], 4);
    write_file(path, bytes, size);
    ck_assert_int_eq(gguf_open(path, &f), OBC_EUNSUPPORTED);
    assert_message_names(path, "unsupported GGUF version");
  }
  ck_assert_int_eq(gguf_open("/nonexistent-obc/model.gguf", &f), OBC_ENOTFOUND);
  assert_message_names("/nonexistent-obc/model.gguf", NULL);
  free(bytes);
}
END_TEST

START_TEST(tensor_beyond_the_end_of_the_file_is_refused) {
  TinySpec spec = {0};
  const char *path = tiny_gguf(&spec, "short.gguf");
  size_t size = 0;
  uint8_t *bytes = read_file(path, &size);
  GgufFile *f;
  ck_assert_int_eq(gguf_open(path, &f), 0);
  size_t last_bytes = gguf_find_tensor(f, "blk.1.ffn_down.weight")->n_bytes; /* it ends the file */
  gguf_close(f);
  write_file(path, bytes, size - 64); /* the last tensor's data is cut */
  ck_assert_int_eq(gguf_open(path, &f), OBC_EFORMAT);
  /* What the tensor needs and what the file holds: its data ends where the
   * file did, 64 bytes past the new end. */
  char expect[256];
  snprintf(expect, sizeof expect,
           "truncated or damaged: tensor blk.1.ffn_down.weight needs bytes [%zu, %zu) of the "
           "file, but the file ends at %zu (64 bytes missing)",
           size - last_bytes, size, size - 64);
  assert_message_names(path, expect);
  free(bytes);

  TestGguf g; /* a tensor whose offset points far past the end */
  tg_init(&g, 3);
  float w[4] = {0};
  uint64_t dims[1] = {4};
  tg_tensor(&g, "w", GGML_TYPE_F32, 1, dims, w, sizeof w);
  bytes = tg_finish(&g, &size);
  uint64_t far = 1ull << 50;
  /* offset field: after "GGUF", version, counts, name (8 + 1), n_dims, dim, type */
  memcpy(bytes + 24 + 9 + 4 + 8 + 4, &far, 8);
  write_file(path, bytes, size);
  ck_assert_int_eq(gguf_open(path, &f), OBC_EFORMAT);
  assert_message_names(path, "tensor w needs bytes [");
  snprintf(expect, sizeof expect, "but the file ends at %zu", size);
  assert_message_names(path, expect);
  free(bytes);
}
END_TEST

START_TEST(tensor_whose_byte_count_overflows_is_refused) {
  make_scratch();
  char path[4200];
  snprintf(path, sizeof path, "%s/overflow.gguf", scratch);
  /* 2^62 + 1 F32 elements fit a size_t, their 2^64 + 4 bytes do not: the
   * count wrapped to 4 and the file opened with 4 bytes of data; 2^62
   * elements wrapped to 0 bytes, the mark of an unknown type. */
  const uint64_t extents[] = {(1ull << 62) + 1, 1ull << 62, 1ull << 61};
  for (size_t i = 0; i < sizeof extents / sizeof extents[0]; i++) {
    TestGguf g;
    tg_init(&g, 3);
    float w[1] = {0};
    tg_tensor(&g, "huge.weight", GGML_TYPE_F32, 1, &extents[i], w, sizeof w);
    size_t size = 0;
    uint8_t *bytes = tg_finish(&g, &size);
    write_file(path, bytes, size);
    free(bytes);
    GgufFile *f = NULL;
    ck_assert_int_eq(gguf_open(path, &f), OBC_EFORMAT);
    ck_assert_ptr_null(f);
    assert_message_names(path, i < 2 ? "tensor huge.weight has" : "tensor huge.weight");
    ck_assert(strchr(obc_error_message(), '\n') == NULL);
  }
}
END_TEST

START_TEST(offset_near_the_top_of_uint64_is_printed_unwrapped) {
  make_scratch();
  char path[4200];
  snprintf(path, sizeof path, "%s/far.gguf", scratch);
  TestGguf g;
  tg_init(&g, 3);
  float w[4] = {0};
  uint64_t dims[1] = {4};
  tg_tensor(&g, "w", GGML_TYPE_F32, 1, dims, w, sizeof w);
  size_t size = 0;
  uint8_t *bytes = tg_finish(&g, &size);
  uint64_t far = UINT64_MAX - 31;              /* aligned; data start + far + 16 wraps past 2^64 */
  memcpy(bytes + 24 + 9 + 4 + 8 + 4, &far, 8); /* offset field, as above */
  write_file(path, bytes, size);
  free(bytes);
  GgufFile *f = NULL;
  ck_assert_int_eq(gguf_open(path, &f), OBC_EFORMAT);
  assert_message_names(path, "tensor w");
  assert_message_names(path, "18446744073709551584"); /* the offset as the file gives it */
}
END_TEST

START_TEST(corrupting_any_header_byte_never_crashes) {
  const char *path = metadata_file(3);
  size_t size = 0;
  uint8_t *bytes = read_file(path, &size);
  char bad[4300];
  snprintf(bad, sizeof bad, "%s/flipped.gguf", scratch);
  size_t refused = 0, header = size < 640 ? size : 640;
  write_file(bad, bytes, size);
  FILE *fp = fopen(bad, "r+b");
  ck_assert_ptr_nonnull(fp);
  for (size_t i = 0; i < header; i++) {
    static const uint8_t patterns[] = {0xff, 0x80, 0x01};
    for (size_t p = 0; p < 3; p++) { /* damage byte i in place, then restore it */
      uint8_t saved = bytes[i], damaged = (uint8_t)(saved ^ patterns[p]);
      ck_assert_int_eq(fseek(fp, (long)i, SEEK_SET), 0);
      ck_assert_uint_eq(fwrite(&damaged, 1, 1, fp), 1);
      ck_assert_int_eq(fflush(fp), 0);
      GgufFile *f = NULL;
      int rc = gguf_open(bad, &f);
      if (rc) {
        ck_assert_ptr_null(f);
        assert_message_names(bad, NULL);
        refused++;
      } else { /* still consistent: every tensor lies inside the file */
        for (size_t t = 0; t < gguf_tensor_count(f); t++) {
          const GgufTensor *tensor = gguf_tensor(f, t);
          if (tensor->data) ck_assert_uint_le(tensor->n_bytes, size);
        }
        gguf_close(f);
      }
      ck_assert_int_eq(fseek(fp, (long)i, SEEK_SET), 0);
      ck_assert_uint_eq(fwrite(&saved, 1, 1, fp), 1);
      ck_assert_int_eq(fflush(fp), 0);
    }
  }
  fclose(fp);
  printf("byte corruption: %zu of %zu damaged headers refused, the rest still consistent\n",
         refused, 3 * header);
  free(bytes);
}
END_TEST

START_TEST(unknown_tensor_type_is_named_when_used) {
  TinySpec spec = {.retype = "blk.0.attn_q.weight"};
  const char *path = tiny_gguf(&spec, "type99.gguf");
  GgufFile *f;
  ck_assert_int_eq(gguf_open(path, &f), 0); /* the table itself is readable */
  const GgufTensor *t = gguf_find_tensor(f, "blk.0.attn_q.weight");
  float out[256];
  ck_assert_int_eq(gguf_tensor_to_f32(f, t, out), OBC_EUNSUPPORTED);
  assert_message_names(path, "tensor blk.0.attn_q.weight has unsupported type 99");
  gguf_close(f);
  Model *m;
  ck_assert_int_eq(model_load(path, &m), OBC_EUNSUPPORTED);
  assert_message_names(path, "tensor blk.0.attn_q.weight has unsupported type 99");
}
END_TEST

/* ---- model_load on GGUF files ---- */

START_TEST(tiny_llama_gguf_loads_with_its_config_and_weights) {
  TinySpec spec = {0};
  const char *path = tiny_gguf(&spec, "tiny.gguf");
  Model *m;
  ck_assert_msg(model_load(path, &m) == 0, "%s", obc_error_message());
  const ModelConfig *c = &m->config;
  ck_assert_str_eq(c->architecture, "llama");
  ck_assert_str_eq(c->name, "tiny");
  ck_assert_uint_eq(c->n_layers, TINY_LAYERS);
  ck_assert_uint_eq(c->dim, TINY_DIM);
  ck_assert_uint_eq(c->ffn_dim, TINY_FFN);
  ck_assert_uint_eq(c->n_heads, TINY_HEADS);
  ck_assert_uint_eq(c->n_kv_heads, TINY_KV);
  ck_assert_uint_eq(c->head_dim, TINY_HD);
  ck_assert_uint_eq(c->vocab_size, TINY_VOCAB);
  ck_assert_uint_eq(c->context_length, 64);
  ck_assert(c->rope_interleaved && c->tied_embeddings && !c->qkv_bias);
  ck_assert(c->rope_scaling == OBC_ROPE_NONE);
  ck_assert(fabs(c->norm_eps - 1e-5) < 1e-10);
  ck_assert_ptr_eq(m->weights.output.data, m->weights.token_embedding.data);
  ck_assert_ptr_null(m->tokenizer); /* the file has no tokenizer.ggml.* keys */
  ck_assert_ptr_null(m->weights.layers[0].bq);
  /* tensor 0 is token_embd; blk.1.ffn_down is tensor 2 + 9 + 8 */
  /* F32 tensors: native matrices point into the mapping */
  ck_assert_uint_eq(m->weights.token_embedding.type, GGML_TYPE_F32);
  ck_assert(((const float *)m->weights.token_embedding.data)[5] == tiny_value(0, 5));
  ck_assert(((const float *)m->weights.layers[1].w_down.data)[17] == tiny_value(19, 17));
  double inv_freq[TINY_HD / 2];
  model_rope_inv_freq(m, inv_freq);
  ck_assert(inv_freq[0] == 1.0 && fabs(inv_freq[1] - 0.01) < 1e-15);
  model_free(m);

  /* Llama-3 scaling as llama.cpp stores it: per-frequency divisors. */
  static const float divisors[TINY_HD / 2] = {1.0f, 8.0f};
  TinySpec llama3 = {
      .extra = "rope_freqs.weight", .extra_length = TINY_HD / 2, .extra_values = divisors};
  path = tiny_gguf(&llama3, "tiny_llama3.gguf");
  ck_assert_msg(model_load(path, &m) == 0, "%s", obc_error_message());
  ck_assert(m->config.rope_scaling == OBC_ROPE_LLAMA3);
  ck_assert_ptr_nonnull(m->weights.rope_freq_factors);
  model_rope_inv_freq(m, inv_freq);
  ck_assert(inv_freq[0] == 1.0 && fabs(inv_freq[1] - 0.01 / 8) < 1e-15);
  model_free(m);
  static const float negative[TINY_HD / 2] = {1.0f, -2.0f};
  llama3.extra_values = negative;
  path = tiny_gguf(&llama3, "tiny_llama3_bad.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EVALUE);
  assert_message_names(path, "rope_freqs.weight");

  TinySpec qwen = {.arch = "qwen2"};
  path = tiny_gguf(&qwen, "tiny_qwen2.gguf");
  ck_assert_msg(model_load(path, &m) == 0, "%s", obc_error_message());
  ck_assert(m->config.qkv_bias && !m->config.rope_interleaved);
  ck_assert_ptr_nonnull(m->weights.layers[1].bv);
  model_free(m);
}
END_TEST

START_TEST(missing_tensor_shape_mismatch_and_bad_values_are_named) {
  Model *m = NULL;
  TinySpec missing = {.skip = "blk.1.ffn_up.weight"};
  const char *path = tiny_gguf(&missing, "missing.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EFORMAT);
  ck_assert_ptr_null(m);
  assert_message_names(path, "tensor blk.1.ffn_up.weight is missing");

  TinySpec shape = {.reshape = "blk.1.attn_k.weight", .reshape_dims = {TINY_DIM, 4}};
  path = tiny_gguf(&shape, "shape.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EFORMAT);
  assert_message_names(path, "tensor blk.1.attn_k.weight has shape [16, 4], expected [16, 8]");

  TinySpec qwen = {.arch = "qwen2", .skip = "blk.0.attn_k.bias"};
  path = tiny_gguf(&qwen, "nobias.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EFORMAT);
  assert_message_names(path, "tensor blk.0.attn_k.bias is missing");

  TinySpec nan = {.poison = "blk.0.ffn_gate.weight"};
  path = tiny_gguf(&nan, "nan.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EVALUE);
  assert_message_names(path, "blk.0.ffn_gate.weight");

  TinySpec arch = {.arch = "gemma"};
  path = tiny_gguf(&arch, "gemma.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EUNSUPPORTED);
  assert_message_names(path, "general.architecture is \"gemma\"");

  TinySpec partial = {.rope_dims = 2};
  path = tiny_gguf(&partial, "partial_rope.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EUNSUPPORTED);
  assert_message_names(path, "llama.rope.dimension_count 2 differs from the head dimension 4");

  TinySpec bias = {.extra = "blk.0.attn_output.bias"};
  path = tiny_gguf(&bias, "o_bias.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EUNSUPPORTED);
  assert_message_names(path, "tensor blk.0.attn_output.bias: biases there are not supported");

  ck_assert_int_eq(model_load("/nonexistent-obc/none.gguf", &m), OBC_ENOTFOUND);
  assert_message_names("/nonexistent-obc/none.gguf", NULL);
}
END_TEST

START_TEST(qwen3_loads_with_its_qk_norms) {
  Model *m = NULL;
  TinySpec qwen3 = {.arch = "qwen3"};
  const char *path = tiny_gguf(&qwen3, "tiny_qwen3.gguf");
  ck_assert_msg(model_load(path, &m) == 0, "%s", obc_error_message());
  ck_assert_str_eq(m->config.architecture, "qwen3");
  ck_assert(m->config.qk_norm && !m->config.qkv_bias && !m->config.rope_interleaved);
  for (size_t l = 0; l < TINY_LAYERS; l++) {
    ck_assert_ptr_nonnull(m->weights.layers[l].q_norm);
    ck_assert_ptr_nonnull(m->weights.layers[l].k_norm);
    ck_assert_ptr_null(m->weights.layers[l].bq);
  }
  /* q_norm and k_norm are distinct tensors (tiny_value differs by index) */
  ck_assert(m->weights.layers[1].q_norm[1] != m->weights.layers[1].k_norm[1]);
  model_free(m);

  TinySpec missing = {.arch = "qwen3", .skip = "blk.1.attn_k_norm.weight"};
  path = tiny_gguf(&missing, "qwen3_no_k_norm.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EFORMAT);
  ck_assert_ptr_null(m);
  assert_message_names(path, "tensor blk.1.attn_k_norm.weight is missing");

  TinySpec shape = {
      .arch = "qwen3", .reshape = "blk.0.attn_q_norm.weight", .reshape_dims = {TINY_DIM, 0}};
  path = tiny_gguf(&shape, "qwen3_q_norm_shape.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EFORMAT);
  assert_message_names(path, "blk.0.attn_q_norm.weight");
}
END_TEST

/* Families the runtime does not compute are refused in one line that names
 * the architecture and lists the supported ones, before any weight is read. */
START_TEST(other_families_are_refused_naming_the_architecture) {
  static const char *const arches[] = {"qwen3moe", "gemma", "gemma3", "phi3", "mistral3"};
  Model *m = NULL;
  for (size_t i = 0; i < sizeof arches / sizeof arches[0]; i++) {
    TinySpec spec = {.arch = arches[i]};
    char file[64], expected[128];
    snprintf(file, sizeof file, "refused_%s.gguf", arches[i]);
    const char *path = tiny_gguf(&spec, file);
    ck_assert_int_eq(model_load(path, &m), OBC_EUNSUPPORTED);
    ck_assert_ptr_null(m);
    snprintf(expected, sizeof expected,
             "general.architecture is \"%s\" (supported: llama, qwen2, qwen3)", arches[i]);
    assert_message_names(path, expected);
    ck_assert_ptr_null(strchr(obc_error_message(), '\n'));
  }
  /* Mistral is written as a llama GGUF; its sliding window is what differs. */
  TinySpec mistral = {.arch = "llama", .sliding_window = 4096};
  const char *path = tiny_gguf(&mistral, "mistral_window.gguf");
  ck_assert_int_eq(model_load(path, &m), OBC_EUNSUPPORTED);
  assert_message_names(path, "llama.attention.sliding_window is 4096 (sliding-window attention");
}
END_TEST

START_TEST(config_validation_rejects_impossible_shapes) {
  ModelConfig c = {.n_layers = 2,
                   .dim = 16,
                   .ffn_dim = 32,
                   .n_heads = 4,
                   .n_kv_heads = 2,
                   .head_dim = 4,
                   .vocab_size = 40,
                   .context_length = 64,
                   .norm_eps = 1e-5,
                   .rope_theta = 10000};
  snprintf(c.architecture, sizeof c.architecture, "llama");
  ck_assert_int_eq(model_config_validate(&c, "cfg"), 0);
  ModelConfig bad = c;
  bad.n_kv_heads = 3;
  ck_assert_int_eq(model_config_validate(&bad, "cfg"), OBC_EUNSUPPORTED);
  assert_message_names("cfg", "not a multiple of 3 KV heads");
  bad = c;
  bad.head_dim = 5;
  ck_assert_int_eq(model_config_validate(&bad, "cfg"), OBC_EUNSUPPORTED);
  assert_message_names("cfg", "head_dim 5 is odd");
  bad = c;
  bad.n_layers = 0;
  ck_assert_int_eq(model_config_validate(&bad, "cfg"), OBC_EUNSUPPORTED);
  assert_message_names("cfg", "n_layers is 0");
}
END_TEST

START_TEST(real_smollm2_loads_through_model_load) {
  const char *path = test_real_model();
  if (!path) return;
  Model *m;
  ck_assert_msg(model_load(path, &m) == 0, "%s", obc_error_message());
  const ModelConfig *c = &m->config;
  ck_assert_uint_eq(c->n_layers, 30);
  ck_assert_uint_eq(c->n_heads, 9);
  ck_assert_uint_eq(c->n_kv_heads, 3);
  ck_assert_uint_eq(c->head_dim, 64);
  ck_assert_uint_eq(c->vocab_size, 49152);
  ck_assert(c->tied_embeddings && c->rope_interleaved);
  ck_assert(c->rope_theta == 100000.0);
  ck_assert_ptr_nonnull(m->tokenizer);
  model_free(m);
}
END_TEST

static Suite *gguf_suite(void) {
  Suite *s = suite_create("gguf");
  TCase *real = tcase_create("real_model");
  tcase_add_unchecked_fixture(real, make_fixtures, NULL);
  tcase_set_timeout(real, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(real,
                 real_smollm2_header_metadata_and_tensor_table_read_as_gguf_package_reads_them);
  tcase_add_test(real, real_smollm2_tensors_dequantise_like_gguf_package);
  tcase_add_test(real, every_supported_type_dequantises_like_gguf_package);
  tcase_add_test(real, real_smollm2_loads_through_model_load);
  suite_add_tcase(s, real);
  TCase *synthetic = tcase_create("synthetic");
  tcase_set_timeout(synthetic, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(synthetic, metadata_of_every_value_type_reads_back_in_v2_and_v3);
  tcase_add_test(synthetic, every_truncation_of_a_file_fails_with_offset_and_path);
  tcase_add_test(synthetic, bad_magic_and_unsupported_versions_are_refused);
  tcase_add_test(synthetic, tensor_beyond_the_end_of_the_file_is_refused);
  tcase_add_test(synthetic, tensor_whose_byte_count_overflows_is_refused);
  tcase_add_test(synthetic, offset_near_the_top_of_uint64_is_printed_unwrapped);
  tcase_add_test(synthetic, corrupting_any_header_byte_never_crashes);
  tcase_add_test(synthetic, unknown_tensor_type_is_named_when_used);
  tcase_add_test(synthetic, tiny_llama_gguf_loads_with_its_config_and_weights);
  tcase_add_test(synthetic, missing_tensor_shape_mismatch_and_bad_values_are_named);
  tcase_add_test(synthetic, qwen3_loads_with_its_qk_norms);
  tcase_add_test(synthetic, other_families_are_refused_naming_the_architecture);
  tcase_add_test(synthetic, config_validation_rejects_impossible_shapes);
  suite_add_tcase(s, synthetic);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  test_scratch_begin("gguf");
  SRunner *runner = srunner_create(gguf_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
