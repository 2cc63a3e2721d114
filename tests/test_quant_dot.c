/* Check suite for formats/quant_dot: the dot products of quantised weight rows
 * with fp32 vectors, for every ggml type the reader knows. Every kernel this
 * processor runs (the portable twin, AVX2, AVX-512; the others are skipped
 * with a note) is compared with a double-precision reference computed from
 * dequant_gguf (within the fp32 summation bound of docs/SCIENCE.md,
 * "Quantised weights"), with the portable twin (twice that bound), must
 * reproduce every dequantised weight exactly (every finite f16 as a block
 * scale among them), and must give a (row, vector)
 * the same bits whatever rows and vectors are passed with it. OBC_SIMD must
 * select the kernel it names, or the widest below it that runs here. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/obc_startup.h"
#include "formats/gguf.h"
#include "formats/quant_dot.h"
#include "tests/test_env.h"

static const uint32_t TYPES[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                                 GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                 GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
/* MAX_X: more vectors than one pass of any kernel takes (8 for AVX2, 16 for
 * AVX-512), so that the tests see a second, partial pass. */
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0], MAX_ROWS = 9, MAX_X = 19 };

typedef struct {
  const char *name;
  QuantDotFn fn;
} Kernel;

/* The kernels to check on this processor: the twin always, AVX2 and AVX-512
 * where they run (a note on each one skipped, once per process). */
static int kernels(Kernel out[QUANT_SIMD_COUNT]) {
  static int noted;
  int n = 0;
  for (QuantSimd simd = 0; simd < QUANT_SIMD_COUNT; simd++) {
    QuantDotFn fn = quant_dot_kernel(simd);
    if (fn)
      out[n++] = (Kernel){quant_dot_simd_name(simd), fn};
    else if (!noted)
      printf("SKIP: this processor cannot run the %s kernel; it is not checked\n",
             quant_dot_simd_name(simd));
  }
  noted = 1;
  return n;
}

/* ---- random but realistic rows ---------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_uniform(double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

/* A normal f16 with exponent field in [e_lo, e_hi] (value 2^(e - 15) * 1.m),
 * random mantissa, sign: +1, -1, or 0 for random. */
static uint16_t rng_f16(int e_lo, int e_hi, int sign) {
  uint16_t e = (uint16_t)(e_lo + (int)(rng_next() % (uint64_t)(e_hi - e_lo + 1)));
  uint16_t bits = (uint16_t)(e << 10 | (rng_next() & 0x3ff));
  int negative = sign < 0 || (sign == 0 && (rng_next() & 1));
  return negative ? (uint16_t)(bits | 0x8000) : bits;
}

static void put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static void fill_random(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rng_next();
}

/* One block of `type` at b: random quants and 6-bit scales, f16 scales of the
 * size real models have (weights of magnitude about 1e-3 to 1e-1). */
static void fill_block(uint32_t type, uint8_t *b) {
  switch (type) {
    case GGML_TYPE_F32: {
      float v = (float)rng_uniform(-0.2, 0.2);
      memcpy(b, &v, sizeof v);
      break;
    }
    case GGML_TYPE_F16: put_u16(b, rng_f16(5, 13, 0)); break;
    case GGML_TYPE_BF16: {
      float v = (float)rng_uniform(-0.2, 0.2);
      uint32_t bits;
      memcpy(&bits, &v, sizeof bits);
      put_u16(b, (uint16_t)(bits >> 16));
      break;
    }
    case GGML_TYPE_Q8_0: put_u16(b, rng_f16(4, 7, 0)), fill_random(b + 2, 32); break;
    case GGML_TYPE_Q4_0: put_u16(b, rng_f16(5, 9, 0)), fill_random(b + 2, 16); break;
    case GGML_TYPE_Q4_1:
      put_u16(b, rng_f16(5, 9, 1)), put_u16(b + 2, rng_f16(7, 12, -1)), fill_random(b + 4, 16);
      break;
    case GGML_TYPE_Q5_0: put_u16(b, rng_f16(4, 8, 0)), fill_random(b + 2, 20); break;
    case GGML_TYPE_Q5_1:
      put_u16(b, rng_f16(4, 8, 1)), put_u16(b + 2, rng_f16(7, 12, -1)), fill_random(b + 4, 20);
      break;
    case GGML_TYPE_Q4_K: /* d, dmin, 12 bytes of 6-bit scales and mins, nibbles */
      put_u16(b, rng_f16(2, 5, 1)), put_u16(b + 2, rng_f16(2, 5, 1)), fill_random(b + 4, 140);
      break;
    case GGML_TYPE_Q5_K:
      put_u16(b, rng_f16(1, 4, 1)), put_u16(b + 2, rng_f16(1, 4, 1)), fill_random(b + 4, 172);
      break;
    case GGML_TYPE_Q6_K: /* ql, qh, int8 scales, d */
      fill_random(b, 192);
      for (int i = 0; i < 16; i++) b[192 + i] = (uint8_t)(int8_t)((int)(rng_next() % 127) - 63);
      put_u16(b + 208, rng_f16(1, 4, 0));
      break;
    default: ck_abort_msg("no generator for type %u", type);
  }
}

/* A matrix of n_rows rows of `cols` elements, row_bytes apart (the padding
 * between rows is random too, so a kernel that reads it would show). */
static uint8_t *make_rows(uint32_t type, size_t cols, size_t n_rows, size_t row_bytes) {
  size_t block = gguf_type_block_size(type), block_bytes = gguf_type_block_bytes(type);
  uint8_t *w = malloc(n_rows * row_bytes);
  ck_assert_ptr_nonnull(w);
  fill_random(w, n_rows * row_bytes);
  for (size_t r = 0; r < n_rows; r++)
    for (size_t i = 0; i < cols / block; i++) fill_block(type, w + r * row_bytes + i * block_bytes);
  return w;
}

static float *make_vectors(size_t n_x, size_t cols) {
  float *x = malloc(n_x * cols * sizeof *x);
  ck_assert_ptr_nonnull(x);
  for (size_t i = 0; i < n_x * cols; i++) x[i] = (float)rng_uniform(-1.0, 1.0);
  return x;
}

/* ---- the reference and its tolerance ---------------------------------------- */

/* gamma_n = n u / (1 - n u): the relative bound of n roundings to unit u. */
static double gamma_n(double n, double u) { return n * u / (1.0 - n * u); }

/* Checks y against sum_i w_i x_i in double, w the dequant_gguf row, and
 * against the portable twin's result `twin` of the same call (unless NULL).
 *
 * Tolerance. A kernel forms the n = cols products w_i * x_i of fp32 numbers
 * and adds them in fp32 in some order (in blocks, in 8 or 16 lanes, with or
 * without FMA). Whatever the order, each term passes through at most n
 * roundings (its product, or the FMA that forms it, and at most n - 1
 * additions; adding an exact zero, as the lane tree and padding do, rounds
 * nothing), so with u = 2^-24 and no underflow (the generated products are
 * far above 2^-126)
 *   |y - sum w_i x_i| <= gamma_n(2^-24) * sum |w_i x_i|
 * (docs/SCIENCE.md, "Quantised weights"). The reference's products are exact
 * in double (24 + 24 bits < 53) and its n - 1 additions add at most
 * gamma_{n-1}(2^-53) * sum |w_i x_i|; the two bounds are added. The twin
 * obeys the same bound, so a kernel and the twin differ by at most twice it
 * (the double sum of |w_i x_i| is within gamma_n(2^-53) of the exact one). */
static void check_against_reference(const char *kernel, uint32_t type, const uint8_t *w,
                                    size_t row_bytes, size_t cols, size_t n_rows, const float *x,
                                    size_t n_x, const float *y, const float *twin,
                                    size_t y_stride) {
  float *values = malloc(cols * sizeof *values);
  ck_assert_ptr_nonnull(values);
  for (size_t r = 0; r < n_rows; r++) {
    ck_assert_int_eq(dequant_gguf(type, w + r * row_bytes, values, cols), 0);
    for (size_t b = 0; b < n_x; b++) {
      double sum = 0.0, magnitude = 0.0;
      for (size_t i = 0; i < cols; i++) {
        double term = (double)values[i] * (double)x[b * cols + i];
        sum += term;
        magnitude += fabs(term);
      }
      double n = (double)cols;
      double tol = (gamma_n(n, 0x1p-24) + gamma_n(n - 1.0, 0x1p-53)) * magnitude;
      double got = y[b * y_stride + r], err = fabs(got - sum);
      ck_assert_msg(err <= tol,
                    "%s %s cols %zu row %zu vector %zu: %.9g vs reference %.9g (error %.3g > "
                    "tolerance %.3g)",
                    kernel, gguf_type_name(type), cols, r, b, got, sum, err, tol);
      if (!twin) continue;
      double twin_tol = 2.0 * gamma_n(n, 0x1p-24) * magnitude * (1.0 + gamma_n(n, 0x1p-53));
      double expected = twin[b * y_stride + r], twin_err = fabs(got - expected);
      ck_assert_msg(twin_err <= twin_tol,
                    "%s %s cols %zu row %zu vector %zu: %.9g vs portable %.9g (difference %.3g > "
                    "tolerance %.3g)",
                    kernel, gguf_type_name(type), cols, r, b, got, expected, twin_err, twin_tol);
    }
  }
  free(values);
}

/* Column counts to test: 1, 2 and 7 blocks; the float types (block of 1) also
 * get lengths that fill the 8- and 16-lane registers and leave a tail. */
static size_t shape_cols(uint32_t type, int k) {
  static const size_t blocks[] = {1, 2, 7}, floats[] = {1, 2, 7, 8, 16, 37, 64};
  size_t block = gguf_type_block_size(type);
  if (block == 1) return k < 7 ? floats[k] : 0;
  return k < 3 ? blocks[k] * block : 0;
}

static const float SENTINEL = -12345.0f;

START_TEST(kernels_match_the_double_reference_and_the_twin) {
  Kernel ks[QUANT_SIMD_COUNT];
  int n_kernels = kernels(ks);
  uint32_t type = TYPES[_i];
  for (int k = 0; shape_cols(type, k); k++) {
    size_t cols = shape_cols(type, k);
    size_t natural = cols / gguf_type_block_size(type) * gguf_type_block_bytes(type);
    size_t row_bytes = natural + (k % 2 ? 24 : 0); /* rows with and without padding */
    for (size_t n_rows = 1; n_rows <= MAX_ROWS; n_rows++) {
      uint8_t *w = make_rows(type, cols, n_rows, row_bytes);
      for (size_t n_x = 1; n_x <= MAX_X; n_x++) {
        float *x = make_vectors(n_x, cols);
        size_t y_stride = n_rows + 3;
        float *y = malloc(n_x * y_stride * sizeof *y), *twin = malloc(n_x * y_stride * sizeof *y);
        ck_assert_ptr_nonnull(y);
        ck_assert_ptr_nonnull(twin);
        for (int kk = 0; kk < n_kernels; kk++) { /* ks[0], the twin, first */
          float *out = kk ? y : twin;
          for (size_t i = 0; i < n_x * y_stride; i++) out[i] = SENTINEL;
          ks[kk].fn(type, w, row_bytes, cols, n_rows, x, n_x, out, y_stride);
          check_against_reference(ks[kk].name, type, w, row_bytes, cols, n_rows, x, n_x, out,
                                  kk ? twin : NULL, y_stride);
          for (size_t b = 0; b < n_x; b++) /* the gaps of y_stride stay untouched */
            for (size_t r = n_rows; r < y_stride; r++)
              ck_assert_float_eq(out[b * y_stride + r], SENTINEL);
        }
        free(x);
        free(y);
        free(twin);
      }
      free(w);
    }
  }
}
END_TEST

/* With unit vectors e_j every product but one is w * 0 = +-0 and the sums
 * are exact, so y = w_j: each kernel must rebuild every dequantised weight
 * exactly (a misplaced nibble or high bit shows here whatever the tolerance). */
START_TEST(kernels_reproduce_every_dequantised_weight) {
  Kernel ks[QUANT_SIMD_COUNT];
  int n_kernels = kernels(ks);
  uint32_t type = TYPES[_i];
  size_t block = gguf_type_block_size(type);
  size_t cols = block == 1 ? 21 : 2 * block, n_rows = 5, n_x = 16;
  size_t row_bytes = cols / block * gguf_type_block_bytes(type);
  uint8_t *w = make_rows(type, cols, n_rows, row_bytes);
  float *values = malloc(n_rows * cols * sizeof *values), *x = malloc(n_x * cols * sizeof *x);
  float y[16 * 5];
  ck_assert_ptr_nonnull(values);
  ck_assert_ptr_nonnull(x);
  for (size_t r = 0; r < n_rows; r++)
    ck_assert_int_eq(dequant_gguf(type, w + r * row_bytes, values + r * cols, cols), 0);
  for (int kk = 0; kk < n_kernels; kk++) {
    for (size_t j0 = 0; j0 < cols; j0 += n_x) {
      memset(x, 0, n_x * cols * sizeof *x);
      for (size_t b = 0; b < n_x; b++)
        if (j0 + b < cols) x[b * cols + j0 + b] = 1.0f;
      ks[kk].fn(type, w, row_bytes, cols, n_rows, x, n_x, y, n_rows);
      for (size_t b = 0; b < n_x && j0 + b < cols; b++)
        for (size_t r = 0; r < n_rows; r++)
          ck_assert_msg(y[b * n_rows + r] == values[r * cols + j0 + b],
                        "%s %s row %zu element %zu: %.9g, dequantised %.9g", ks[kk].name,
                        gguf_type_name(type), r, j0 + b, y[b * n_rows + r],
                        values[r * cols + j0 + b]);
    }
  }
  free(w);
  free(values);
  free(x);
}
END_TEST

/* Every finite f16 bit pattern as a 32-element block's scale (and, shifted,
 * its min), subnormals and signed zeros included: each kernel converts the
 * scales its own way (F16C in the SIMD ones), and must again rebuild the
 * weights as dequant_gguf does (one row per block, against the unit vectors
 * of each half's first and last element; every element and realistic scales
 * are the tests above). */
START_TEST(every_f16_scale_is_rebuilt_exactly) {
  static const uint32_t SCALED[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                    GGML_TYPE_Q5_1};
  uint32_t type = SCALED[_i];
  Kernel ks[QUANT_SIMD_COUNT];
  int n_kernels = kernels(ks);
  size_t cols = 32, block_bytes = gguf_type_block_bytes(type), n_rows = 0;
  int has_min = type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_1;
  uint8_t *w = malloc((1u << 16) * block_bytes);
  /* the first and last element of each half: low and high nibbles */
  static const size_t AT[] = {0, 15, 16, 31};
  enum { N_AT = sizeof AT / sizeof AT[0] };
  float *values = malloc((1u << 16) * cols * sizeof *values), *x = calloc(N_AT * cols, sizeof *x);
  float *y = malloc((1u << 16) * N_AT * sizeof *y);
  ck_assert(w && values && x && y);
  for (uint32_t h = 0; h < 1u << 16; h++) {
    if ((h >> 10 & 0x1f) == 0x1f) continue; /* infinity and NaN */
    uint8_t *b = w + n_rows * block_bytes;
    fill_random(b, block_bytes);
    put_u16(b, (uint16_t)h);
    if (has_min) put_u16(b + 2, (uint16_t)(h * 40503u) & 0xfbff); /* finite: exponent < 31 */
    if (dequant_gguf(type, b, values + n_rows * cols, cols))
      ck_abort_msg("dequant_gguf refused scale 0x%04x", (unsigned)h);
    n_rows++;
  }
  for (size_t v = 0; v < N_AT; v++) x[v * cols + AT[v]] = 1.0f;
  /* compared in plain C, asserted once: a Check assertion per weight costs
   * a write each */
  for (int kk = 0; kk < n_kernels; kk++) {
    ks[kk].fn(type, w, block_bytes, cols, n_rows, x, N_AT, y, n_rows);
    size_t bad = n_rows * N_AT;
    for (size_t i = 0; i < n_rows * N_AT && bad == n_rows * N_AT; i++) {
      size_t r = i / N_AT, v = i % N_AT;
      float got = y[v * n_rows + r], want = values[r * cols + AT[v]];
      if (got != want && !(isnan(got) && isnan(want))) bad = i;
    }
    if (bad < n_rows * N_AT) {
      size_t r = bad / N_AT, v = bad % N_AT;
      const uint8_t *b = w + r * block_bytes;
      ck_abort_msg("%s %s scale 0x%04x element %zu: %.9g, dequantised %.9g", ks[kk].name,
                   gguf_type_name(type), (unsigned)(b[0] | b[1] << 8), AT[v], y[v * n_rows + r],
                   values[r * cols + AT[v]]);
    }
  }
  free(w);
  free(values);
  free(x);
  free(y);
}
END_TEST

/* The documented contract: a (row, vector) result is computed by the same
 * operations whatever n_rows and n_x are, wherever the row starts in the call
 * and whichever slot the vector takes, so the bits must be equal. */
START_TEST(a_result_does_not_depend_on_its_batch) {
  Kernel ks[QUANT_SIMD_COUNT];
  int n_kernels = kernels(ks);
  uint32_t type = TYPES[_i];
  size_t block = gguf_type_block_size(type);
  size_t cols = block == 1 ? 45 : 3 * block, n_rows = MAX_ROWS, n_x = MAX_X, y_stride = 13;
  size_t row_bytes = cols / block * gguf_type_block_bytes(type);
  uint8_t *w = make_rows(type, cols, n_rows, row_bytes);
  float *x = make_vectors(n_x, cols), *reversed = malloc(n_x * cols * sizeof *x);
  float full[MAX_X * 13], part[MAX_X * 13], one;
  ck_assert_ptr_nonnull(reversed);
  for (size_t b = 0; b < n_x; b++)
    memcpy(reversed + b * cols, x + (n_x - 1 - b) * cols, cols * sizeof *x);
  for (int kk = 0; kk < n_kernels; kk++) {
    QuantDotFn fn = ks[kk].fn;
    fn(type, w, row_bytes, cols, n_rows, x, n_x, full, y_stride);
    for (size_t r = 0; r < n_rows; r++) /* one row, one vector */
      for (size_t b = 0; b < n_x; b++) {
        fn(type, w + r * row_bytes, row_bytes, cols, 1, x + b * cols, 1, &one, 1);
        ck_assert_msg(memcmp(&one, &full[b * y_stride + r], sizeof one) == 0,
                      "%s %s row %zu vector %zu alone: %.9g, in the batch %.9g", ks[kk].name,
                      gguf_type_name(type), r, b, one, full[b * y_stride + r]);
      }
    for (size_t first = 0; first < n_rows; first++) /* rows first.., vectors 0..nx */
      for (size_t nx = 1; nx <= n_x; nx++) {
        fn(type, w + first * row_bytes, row_bytes, cols, n_rows - first, x, nx, part, y_stride);
        for (size_t b = 0; b < nx; b++)
          for (size_t r = first; r < n_rows; r++)
            ck_assert_msg(memcmp(&part[b * y_stride + r - first], &full[b * y_stride + r],
                                 sizeof(float)) == 0,
                          "%s %s row %zu vector %zu differs with rows %zu.. and %zu vectors",
                          ks[kk].name, gguf_type_name(type), r, b, first, nx);
      }
    fn(type, w, row_bytes, cols, n_rows, reversed, n_x, part, y_stride); /* other slots */
    for (size_t b = 0; b < n_x; b++)
      for (size_t r = 0; r < n_rows; r++)
        ck_assert_msg(memcmp(&part[(n_x - 1 - b) * y_stride + r], &full[b * y_stride + r],
                             sizeof(float)) == 0,
                      "%s %s row %zu vector %zu differs in slot %zu", ks[kk].name,
                      gguf_type_name(type), r, b, n_x - 1 - b);
  }
  free(w);
  free(x);
  free(reversed);
}
END_TEST

/* The header's promise for input outside the contract: a row length that is
 * not a multiple of the block gives NaN, never a partial sum. */
START_TEST(cols_off_the_block_give_nan) {
  Kernel ks[QUANT_SIMD_COUNT];
  int n_kernels = kernels(ks);
  uint32_t type = TYPES[_i];
  size_t block = gguf_type_block_size(type);
  if (block == 1) return; /* every length is whole blocks */
  size_t cols = 2 * block + 16, row_bytes = 3 * gguf_type_block_bytes(type); /* 2.x blocks */
  uint8_t *w = make_rows(type, 3 * block, 2, row_bytes);
  float *x = make_vectors(2, cols), y[4];
  for (int kk = 0; kk < n_kernels; kk++) {
    ks[kk].fn(type, w, row_bytes, cols, 2, x, 2, y, 2);
    for (int i = 0; i < 4; i++)
      ck_assert_msg(isnan(y[i]), "%s %s", ks[kk].name, gguf_type_name(type));
  }
  free(w);
  free(x);
}
END_TEST

/* quant_dot_kernel_name() of a fresh process of this program (the choice is
 * made once per process), with OBC_SIMD set to simd or unset (NULL). */
static void kernel_name_in_child(const char *simd, char *out, size_t size) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    if (simd)
      setenv("OBC_SIMD", simd, 1);
    else
      unsetenv("OBC_SIMD");
    execl("/proc/self/exe", "test_quant_dot", "--kernel-name", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  ssize_t n = read(fds[0], out, size - 1);
  close(fds[0]);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  out[n > 0 ? n : 0] = '\0';
}

/* OBC_SIMD=NAME selects that kernel where this processor runs it, else the
 * widest below it (with a note on stderr); unset, empty or unknown, the
 * widest of all. */
START_TEST(obc_simd_selects_the_kernel_it_names) {
  char name[64];
  QuantSimd widest = 0;
  for (QuantSimd simd = 0; simd < QUANT_SIMD_COUNT; simd++) {
    if (quant_dot_kernel(simd)) widest = simd;
    QuantSimd runs = simd;
    while (!quant_dot_kernel(runs)) runs--;
    kernel_name_in_child(quant_dot_simd_name(simd), name, sizeof name);
    ck_assert_str_eq(name, quant_dot_simd_name(runs));
  }
  kernel_name_in_child(NULL, name, sizeof name);
  ck_assert_str_eq(name, quant_dot_simd_name(widest));
  kernel_name_in_child("", name, sizeof name);
  ck_assert_str_eq(name, quant_dot_simd_name(widest));
  kernel_name_in_child("sse9", name, sizeof name);
  ck_assert_str_eq(name, quant_dot_simd_name(widest));
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  if (argc > 1 && strcmp(argv[1], "--kernel-name") == 0) { /* for kernel_name_in_child */
    fputs(quant_dot_kernel_name(), stdout);
    return 0;
  }
  Suite *suite = suite_create("quant_dot");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_loop_test(tc, kernels_match_the_double_reference_and_the_twin, 0, N_TYPES);
  tcase_add_loop_test(tc, kernels_reproduce_every_dequantised_weight, 0, N_TYPES);
  tcase_add_loop_test(tc, every_f16_scale_is_rebuilt_exactly, 0, 5);
  tcase_add_loop_test(tc, a_result_does_not_depend_on_its_batch, 0, N_TYPES);
  tcase_add_loop_test(tc, cols_off_the_block_give_nan, 0, N_TYPES);
  tcase_add_test(tc, obc_simd_selects_the_kernel_it_names);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
