/* Check suite for the AVX2 twin of dequant_gguf (formats/dequant_avx2.c): on
 * random blocks of every ggml type the reader knows, with odd tile lengths,
 * unaligned input and output, and extreme f16 scales (subnormal, largest,
 * zero, infinite, NaN), it must give the portable C decoders' bits exactly
 * (formats/quant_avx2.h says why the arithmetic allows it), write nothing
 * past the tile, and so must dequant_gguf, whichever kernel it runs. The
 * agreement of either with the gguf Python package is tests/test_gguf.c's. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "formats/gguf.h"
#include "formats/quant_dot.h"
#include "tests/test_env.h"

static const uint32_t TYPES[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                                 GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                 GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

/* 1 when the AVX2 decoders can run here; else the suite says so and checks
 * dequant_gguf against the portable twin only. */
static int avx2_runs(void) {
  if (quant_dot_avx2_supported()) return 1;
  printf("SKIP: this processor lacks AVX2/FMA/F16C; the AVX2 decoders are not checked\n");
  return 0;
}

/* ---- random blocks ------------------------------------------------------------ */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_next();
}

/* f16 scales at the edges: +-0, the smallest and largest subnormals, the
 * smallest normal, 1, the largest finite (65504), infinities, a quiet and a
 * signalling NaN. */
static const uint16_t EXTREME_F16[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00,
                                       0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d01};
enum { N_EXTREME = sizeof EXTREME_F16 / sizeof EXTREME_F16[0] };

/* Byte offsets of a type's f16 scales in its block (-1: none left). */
static int scale_offset(uint32_t type, int k) {
  static const int two[] = {0, 2, -1}, one[] = {0, -1}, q6k[] = {208, -1}, none[] = {-1};
  switch (type) {
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K: return two[k];
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q5_0: return one[k];
    case GGML_TYPE_Q6_K: return q6k[k];
    default: return none[0];
  }
}

/* How a block's bytes are drawn: every byte random (so any f16 bit pattern,
 * NaN and infinity included, and any quant), or random quants with every f16
 * scale taken from EXTREME_F16 (the float types: every element). */
typedef enum { FILL_RANDOM, FILL_EXTREME } FillKind;

static void put_extreme(uint8_t *p) {
  uint16_t v = EXTREME_F16[rng_next() % N_EXTREME];
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void fill_blocks(uint32_t type, uint8_t *w, size_t n_blocks, FillKind kind) {
  size_t bytes = gguf_type_block_bytes(type);
  fill_random(w, n_blocks * bytes);
  if (kind == FILL_RANDOM) return;
  for (size_t i = 0; i < n_blocks; i++) {
    uint8_t *b = w + i * bytes;
    if (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
      if (type == GGML_TYPE_F16) put_extreme(b);
      continue; /* BF16: random bits are every exponent already */
    }
    for (int k = 0; scale_offset(type, k) >= 0; k++) put_extreme(b + scale_offset(type, k));
  }
}

typedef struct {
  const char *name;
  int (*fn)(uint32_t type, const void *data, float *out, size_t n);
} Kernel;

/* ---- the comparison ------------------------------------------------------------ */

static const float SENTINEL = -12345.0f;

/* got must have want's bits, element by element; where want is NaN, got must
 * be a NaN, whose payload x86 may set otherwise (formats/quant_avx2.h). (One
 * ck_assert per element would cost a write to Check's pipe each.) */
static void assert_same_bits(const char *what, uint32_t type, const float *got, const float *want,
                             size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t g, w;
    memcpy(&g, &got[i], sizeof g);
    memcpy(&w, &want[i], sizeof w);
    if (isnan(want[i]) ? !isnan(got[i]) : g != w)
      ck_abort_msg("%s %s element %zu of %zu: %.9g (0x%08x), portable %.9g (0x%08x)", what,
                   gguf_type_name(type), i, n, got[i], g, want[i], w);
  }
}

/* Dequantises n_blocks random blocks of `type` at byte offset in_shift of the
 * input and float offset out_shift of the output with each kernel, and
 * compares with the portable twin; the floats around the tile must keep
 * their sentinels. */
static void check_tile(uint32_t type, size_t n_blocks, FillKind kind, size_t in_shift,
                       size_t out_shift, int with_avx2) {
  size_t bytes = n_blocks * gguf_type_block_bytes(type), n = n_blocks * gguf_type_block_size(type);
  uint8_t *in = malloc(bytes + in_shift);
  float *want = malloc(n * sizeof *want), *out = malloc((n + out_shift + 9) * sizeof *out);
  ck_assert(in && want && out);
  fill_blocks(type, in + in_shift, n_blocks, kind);
  ck_assert_int_eq(dequant_gguf_portable(type, in + in_shift, want, n), 0);
  for (int kernel = 0; kernel < 1 + with_avx2; kernel++) {
    for (size_t i = 0; i < n + out_shift + 9; i++) out[i] = SENTINEL;
    float *y = out + out_shift;
    const char *name = kernel ? "avx2" : "dequant_gguf";
    ck_assert_int_eq((kernel ? dequant_gguf_avx2 : dequant_gguf)(type, in + in_shift, y, n), 0);
    assert_same_bits(name, type, y, want, n);
    for (size_t i = 0; i < n + out_shift + 9; i++)
      if ((i < out_shift || i >= n + out_shift) && out[i] != SENTINEL)
        ck_abort_msg("%s %s: wrote outside the %zu elements", name, gguf_type_name(type), n);
  }
  free(in);
  free(want);
  free(out);
}

/* Tile lengths in blocks: odd and even, below and above the 8-element
 * registers of the float types (blocks of 1 element) and a tile of 64 rows. */
static const size_t LENGTHS[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 64, 67, 200, 1001};
enum { N_LENGTHS = sizeof LENGTHS / sizeof LENGTHS[0] };

START_TEST(avx2_gives_the_portable_bits_on_random_blocks) {
  int with_avx2 = avx2_runs();
  uint32_t type = TYPES[_i];
  for (int rep = 0; rep < 4; rep++)
    for (size_t l = 0; l < N_LENGTHS; l++)
      check_tile(type, LENGTHS[l], FILL_RANDOM, (size_t)(rep + l) % 4, (size_t)rep % 3, with_avx2);
}
END_TEST

START_TEST(avx2_gives_the_portable_bits_at_extreme_scales) {
  int with_avx2 = avx2_runs();
  uint32_t type = TYPES[_i];
  for (int rep = 0; rep < 8; rep++)
    for (size_t l = 0; l < N_LENGTHS; l++)
      check_tile(type, LENGTHS[l], FILL_EXTREME, (size_t)(rep + l) % 3, (size_t)(rep + 1) % 4,
                 with_avx2);
}
END_TEST

/* Past 2^20 elements dequant_gguf splits the blocks over OpenMP threads; the
 * split must not change a bit either (against the portable twin run in one
 * go on the pieces). */
START_TEST(large_tensors_split_over_threads_give_the_same_bits) {
  int with_avx2 = avx2_runs();
  uint32_t type = TYPES[_i];
  size_t block = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  size_t n_blocks = ((size_t)1 << 20) / block + 3, n = n_blocks * block;
  uint8_t *in = malloc(n_blocks * block_bytes);
  float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
  ck_assert(in && want && got);
  fill_blocks(type, in, n_blocks, FILL_RANDOM);
  size_t piece = 1000 * block; /* below the threading bound: one serial loop each */
  for (size_t start = 0; start < n; start += piece) {
    size_t count = n - start < piece ? n - start : piece;
    ck_assert_int_eq(
        dequant_gguf_portable(type, in + start / block * block_bytes, want + start, count), 0);
  }
  const Kernel kernels[] = {{"portable, threaded", dequant_gguf_portable},
                            {"dequant_gguf", dequant_gguf},
                            {"avx2", dequant_gguf_avx2}};
  for (int k = 0; k < 2 + with_avx2; k++) {
    memset(got, 0, n * sizeof *got);
    ck_assert_int_eq(kernels[k].fn(type, in, got, n), 0);
    assert_same_bits(kernels[k].name, type, got, want, n);
  }
  free(in);
  free(want);
  free(got);
}
END_TEST

START_TEST(bad_requests_fail_alike) {
  float out[32];
  const Kernel kernels[] = {{"dequant_gguf", dequant_gguf},
                            {"portable", dequant_gguf_portable},
                            {"avx2", dequant_gguf_avx2}};
  for (int k = 0; k < 2 + avx2_runs(); k++) {
    ck_assert_int_eq(kernels[k].fn(GGML_TYPE_Q4_0, out, out, 31), OBC_EINVAL);
    ck_assert_int_eq(kernels[k].fn(10 /* Q2_K */, out, out, 256), OBC_EUNSUPPORTED);
  }
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("dequant");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_loop_test(tc, avx2_gives_the_portable_bits_on_random_blocks, 0, N_TYPES);
  tcase_add_loop_test(tc, avx2_gives_the_portable_bits_at_extreme_scales, 0, N_TYPES);
  tcase_add_loop_test(tc, large_tensors_split_over_threads_give_the_same_bits, 0, N_TYPES);
  tcase_add_test(tc, bad_requests_fail_alike);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
