/* The row driver of the SIMD dot products (formats/quant_dot_avx2.c,
 * formats/quant_dot_avx512.c), included by each after it has defined, for
 * its own register width:
 *   QdVec, qd_zero()             the accumulator type and its zero;
 *   QD_FLOAT_UNIT                elements of a float type taken at once (8, 16);
 *   QD_ROWS(nx)                  rows per pass for nx vectors (a constant);
 *   MAX_X, PREFETCH_WEIGHTS      vectors per pass, prefetch distance in weights;
 *   BlockKernel, unit_f32/f16/bf16, block_TYPE for every quantised type;
 *   lane_sum(v)                  the fixed tree that adds a register's lanes;
 *   float_tail(...)              a float row's last cols % QD_FLOAT_UNIT elements.
 * It defines qd_rows(), the body of quant_dot_rows_avx2/avx512. Rows and
 * vectors are interleaved only to hide latency and share loads: a (row,
 * vector) pair gets the same operations whatever pass it is in. */
#ifndef OBC_QUANT_DOT_ROWS_H
#define OBC_QUANT_DOT_ROWS_H

/* How a type's rows are cut for the kernels: `unit` elements of `unit_bytes`
 * each (a block; QD_FLOAT_UNIT elements for the float types), and the float
 * types' tail. */
typedef struct {
  uint32_t type;
  size_t unit, unit_bytes, units, tail, cols, row_bytes, ahead;
} QdShape;

/* R rows (R * nx accumulators) from w, nx vectors from x, results into
 * y[b * y_stride + r]. */
QD_INLINE void rows_pass(BlockKernel kernel, const QdShape *s, const uint8_t *w, const float *x,
                         int R, int nx, float *y, size_t y_stride) {
  QdVec acc[4][MAX_X];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < nx; b++) acc[r][b] = qd_zero();
  /* The R rows lie back to back and are read at one pace, so the pass streams
   * through memory; the prefetch keeps s->ahead bytes ahead of that stream
   * (past the matrix's end it is a hint that never faults). */
  for (size_t u = 0; u < s->units; u++)
    for (int r = 0; r < R; r++) {
      const uint8_t *unit = w + r * s->row_bytes + u * s->unit_bytes;
      uintptr_t ahead = (uintptr_t)w + (u * R + r) * s->unit_bytes + s->ahead;
      _mm_prefetch((const char *)ahead, _MM_HINT_T0);
      kernel(unit, x + u * s->unit, s->cols, nx, acc[r]);
    }
  if (s->tail)
    for (int r = 0; r < R; r++)
      float_tail(s->type, w + r * s->row_bytes, s->units * s->unit, s->tail, x, s->cols, nx,
                 acc[r]);
  for (int r = 0; r < R; r++)
    for (int b = 0; b < nx; b++) y[(size_t)b * y_stride + r] = lane_sum(acc[r][b]);
}

#define QD_PASS(R, NX) rows_pass(kernel, s, w + r * s->row_bytes, x, R, NX, y + r, y_stride)
/* nx vectors: passes of QD_ROWS(nx) rows (R and nx constants in each), or
 * one row. */
#define QD_GROUP(NX)                                                              \
  case NX:                                                                        \
    for (; r + QD_ROWS(NX) <= n_rows; r += QD_ROWS(NX)) QD_PASS(QD_ROWS(NX), NX); \
    break
/* The rows left after the passes, one by one: only where a pass takes
 * several (a constant condition: the other cases inline no kernel). */
#define QD_SINGLE(NX)                    \
  case NX:                               \
    if (QD_ROWS(NX) > 1) QD_PASS(1, NX); \
    break

/* n_rows rows against nx (1..8) vectors: QD_ROWS(nx) rows a pass, then the
 * rows left one by one. */
QD_INLINE void rows_group(BlockKernel kernel, const QdShape *s, const uint8_t *w, size_t n_rows,
                          const float *x, int nx, float *y, size_t y_stride) {
  size_t r = 0;
  switch (nx) {
    QD_GROUP(1);
    QD_GROUP(2);
    QD_GROUP(3);
    QD_GROUP(4);
    QD_GROUP(5);
    QD_GROUP(6);
    QD_GROUP(7);
    QD_GROUP(8);
    default: break;
  }
  for (; r < n_rows; r++) {
    switch (nx) {
      QD_SINGLE(1);
      QD_SINGLE(2);
      QD_SINGLE(3);
      QD_SINGLE(4);
      QD_SINGLE(5);
      QD_SINGLE(6);
      QD_SINGLE(7);
      QD_SINGLE(8);
      default: break;
    }
  }
}

QD_INLINE void rows_all(BlockKernel kernel, const QdShape *s, const uint8_t *w, size_t n_rows,
                        const float *x, size_t n_x, float *y, size_t y_stride) {
  for (size_t b = 0; b < n_x; b += MAX_X) {
    int nx = n_x - b < MAX_X ? (int)(n_x - b) : MAX_X;
    rows_group(kernel, s, w, n_rows, x + b * s->cols, nx, y + b * y_stride, y_stride);
  }
}

/* The whole call: each type's kernel over every row; a type without one, or
 * cols off its blocks, goes to the portable twin (which writes NaN for the
 * latter). */
static void qd_rows(uint32_t type, const void *w, size_t row_bytes, size_t cols, size_t n_rows,
                    const float *x, size_t n_x, float *y, size_t y_stride) {
  QdShape s = {.type = type, .cols = cols, .row_bytes = row_bytes};
  size_t element_bytes = type == GGML_TYPE_F32 ? 4 : 2;
  int is_float = type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
  s.unit = is_float ? QD_FLOAT_UNIT : gguf_type_block_size(type);
  s.unit_bytes = is_float ? QD_FLOAT_UNIT * element_bytes : gguf_type_block_bytes(type);
  if (!s.unit || (!is_float && cols % s.unit)) {
    quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
    return;
  }
  s.units = cols / s.unit;
  s.ahead = PREFETCH_WEIGHTS / s.unit * s.unit_bytes;
  s.tail = cols % s.unit;
  const uint8_t *bytes = w;
  switch (type) {
    case GGML_TYPE_F32: rows_all(unit_f32, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_F16: rows_all(unit_f16, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_BF16: rows_all(unit_bf16, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q8_0: rows_all(block_q8_0, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q4_0: rows_all(block_q4_0, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q4_1: rows_all(block_q4_1, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q5_0: rows_all(block_q5_0, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q5_1: rows_all(block_q5_1, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q4_K: rows_all(block_q4_k, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q5_K: rows_all(block_q5_k, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    case GGML_TYPE_Q6_K: rows_all(block_q6_k, &s, bytes, n_rows, x, n_x, y, y_stride); break;
    default: quant_dot_rows_portable(type, w, row_bytes, cols, n_rows, x, n_x, y, y_stride);
  }
}

#endif
