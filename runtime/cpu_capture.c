/* Capture rows of one chunk on the CPU: which requested positions fall in it,
 * and their Q/O/lse/A gathered into per-head blocks for the on_layer view. */
#include "runtime/cpu_capture.h"

#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

int cpu_capture_begin(CpuCaptureRows *rows, const RuntimeCapture *capture, size_t pos0, size_t n,
                      size_t n_heads, size_t head_dim) {
  memset(rows, 0, sizeof(*rows));
  rows->n_heads = n_heads;
  rows->head_dim = head_dim;
  rows->pos0 = pos0;
  rows->n = n;
  size_t first;
  runtime_capture_chunk_rows(capture, pos0, n, &first, &rows->n_rows);
  rows->positions = capture->row_positions + first;
  size_t per_head = n_heads * (rows->n_rows ? rows->n_rows : 1);
  rows->row_of = obc_malloc(n * sizeof(int32_t), "capture row map");
  rows->q = obc_malloc(per_head * head_dim * sizeof(float), "captured Q");
  rows->o = obc_malloc(per_head * head_dim * sizeof(float), "captured O");
  rows->lse = obc_malloc(per_head * sizeof(float), "captured lse");
  if (capture->want_attn)
    rows->attn = obc_malloc(per_head * (pos0 + n) * sizeof(float), "captured attention rows");
  if (!rows->row_of || !rows->q || !rows->o || !rows->lse || (capture->want_attn && !rows->attn)) {
    cpu_capture_end(rows);
    return OBC_ENOMEM;
  }
  for (size_t t = 0; t < n; t++) rows->row_of[t] = -1;
  for (size_t r = 0; r < rows->n_rows; r++) rows->row_of[rows->positions[r] - pos0] = (int32_t)r;
  return OBC_OK;
}

const CpuAttentionRows *cpu_capture_attention_rows(const CpuCaptureRows *rows,
                                                   CpuAttentionRows *buf) {
  if (!rows->attn || rows->n_rows == 0) return NULL;
  buf->row_of = rows->row_of;
  buf->n_rows = rows->n_rows;
  buf->attn = rows->attn;
  return buf;
}

void cpu_capture_gather(CpuCaptureRows *rows, const float *q, const float *o, const float *lse) {
  size_t hd = rows->head_dim, q_dim = rows->n_heads * hd;
  for (size_t h = 0; h < rows->n_heads; h++) {
    for (size_t r = 0; r < rows->n_rows; r++) {
      size_t t = rows->positions[r] - rows->pos0;
      size_t dst = h * rows->n_rows + r;
      memcpy(rows->q + dst * hd, q + t * q_dim + h * hd, hd * sizeof(float));
      memcpy(rows->o + dst * hd, o + t * q_dim + h * hd, hd * sizeof(float));
      rows->lse[dst] = lse[h * rows->n + t];
    }
  }
}

void cpu_capture_end(CpuCaptureRows *rows) {
  free(rows->row_of);
  free(rows->q);
  free(rows->o);
  free(rows->lse);
  free(rows->attn);
  memset(rows, 0, sizeof(*rows));
}
