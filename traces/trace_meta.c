/* Helpers on TraceMeta that need no file: freeing and deep-copying the
 * owned arrays and strings, span look-up, and the row bookkeeping the
 * analyser needs (which captured rows form the prompt window, which are
 * decode rows). */
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_search.h"
#include "traces/trace.h"

void trace_meta_free(TraceMeta *meta) {
  if (!meta) return;
  free(meta->row_positions);
  free(meta->tokens);
  free(meta->prompt_text);
  free(meta->generated_text);
  meta->row_positions = NULL;
  meta->tokens = NULL;
  meta->prompt_text = NULL;
  meta->generated_text = NULL;
}

static int copy_text(char **dst, const char *src) {
  *dst = NULL;
  if (!src) return OBC_OK;
  size_t n = strlen(src);
  *dst = obc_malloc(n + 1, "trace text");
  if (!*dst) return OBC_ENOMEM;
  memcpy(*dst, src, n + 1);
  return OBC_OK;
}

int trace_meta_copy(TraceMeta *dst, const TraceMeta *src) {
  *dst = *src;
  dst->row_positions = NULL;
  dst->tokens = NULL;
  dst->prompt_text = NULL;
  dst->generated_text = NULL;
  if (src->row_positions) {
    dst->row_positions = obc_malloc(src->n_rows * sizeof *dst->row_positions, "row positions");
    if (!dst->row_positions) goto fail;
    memcpy(dst->row_positions, src->row_positions, src->n_rows * sizeof *dst->row_positions);
  }
  if (src->tokens) {
    dst->tokens = obc_malloc(src->n_positions * sizeof *dst->tokens, "tokens");
    if (!dst->tokens) goto fail;
    memcpy(dst->tokens, src->tokens, src->n_positions * sizeof *dst->tokens);
  }
  if (copy_text(&dst->prompt_text, src->prompt_text)) goto fail;
  if (copy_text(&dst->generated_text, src->generated_text)) goto fail;
  return OBC_OK;
fail:
  trace_meta_free(dst);
  return OBC_ENOMEM;
}

const TraceSpan *trace_meta_find_span(const TraceMeta *meta, const char *name) {
  for (size_t i = 0; i < meta->n_spans; i++)
    if (!strcmp(meta->spans[i].name, name)) return &meta->spans[i];
  return NULL;
}

size_t trace_meta_row_index(const TraceMeta *meta, int64_t position) {
  return obc_lower_bound_i64(meta->row_positions, meta->n_rows, position);
}

size_t trace_meta_window_rows(const TraceMeta *meta) {
  size_t first_decode = trace_meta_row_index(meta, (int64_t)meta->n_prompt);
  if (first_decode == 0 || meta->row_positions[first_decode - 1] != (int64_t)meta->n_prompt - 1)
    return 0;
  size_t count = 1;
  while (count < first_decode && meta->row_positions[first_decode - 1 - count] ==
                                     (int64_t)meta->n_prompt - 1 - (int64_t)count)
    count++;
  return count;
}

size_t trace_meta_decode_rows(const TraceMeta *meta, size_t *first_index) {
  size_t first = trace_meta_row_index(meta, (int64_t)meta->n_prompt);
  if (first_index) *first_index = first;
  return meta->n_rows - first;
}
