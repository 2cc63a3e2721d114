/* The CPU backend's side of the capture seam: picks the requested query rows
 * that fall in a chunk, gathers their Q, per-head outputs and lse into the
 * (n_heads, n_rows, ...) layout of RuntimeLayerCapture, and owns the buffers
 * the attention copies softmax rows into. Used only when a capture is asked. */
#ifndef OBC_CPU_CAPTURE_H
#define OBC_CPU_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/cpu_attention.h"
#include "runtime/runtime.h"

typedef struct {
  size_t n_heads;
  size_t head_dim;
  size_t pos0;
  size_t n;
  size_t n_rows;           /* requested rows inside [pos0, pos0 + n) */
  const size_t *positions; /* (n_rows) points into the RuntimeCapture */
  int32_t *row_of;         /* (n) index among the rows, or -1 */
  float *q;                /* (n_heads, n_rows, head_dim) */
  float *o;                /* (n_heads, n_rows, head_dim) */
  float *lse;              /* (n_heads, n_rows) */
  float *attn;             /* (n_heads, n_rows, pos0 + n) or NULL */
} CpuCaptureRows;

int cpu_capture_begin(CpuCaptureRows *rows, const RuntimeCapture *capture, size_t pos0, size_t n,
                      size_t n_heads, size_t head_dim);
/* What the attention needs to copy softmax rows (NULL without want_attn). */
const CpuAttentionRows *cpu_capture_attention_rows(const CpuCaptureRows *rows,
                                                   CpuAttentionRows *buf);
/* Copies Q, O and lse of the rows from the chunk's buffers. */
void cpu_capture_gather(CpuCaptureRows *rows, const float *q /* (n, n_heads * head_dim) */,
                        const float *o /* (n, n_heads * head_dim) */,
                        const float *lse /* (n_heads, n) */);
void cpu_capture_end(CpuCaptureRows *rows);

#endif
