/* One (layer, KV head) of a trace in double precision, the unit the analyser
 * and every eviction step work on: keys and values of every position and the
 * query rows, outputs and lse of the KV head's query heads, wrapped as the
 * OracleHead of oracle/oracle.h so the scores and exact forms apply as is. */
#ifndef OBC_SCORE_HEAD_H
#define OBC_SCORE_HEAD_H

#include <stddef.h>

#include "oracle/oracle.h"
#include "traces/trace.h"

typedef struct {
  float *K_f, *V_f; /* (n_positions, head_dim) as read */
  float *Q_f, *O_f; /* (group_size, n_rows, head_dim) as read */
  float *lse_f;     /* (n_rows) read buffer */
  double *K, *V;    /* (n_positions, head_dim) */
  double *Q, *O;    /* (group_size, n_rows, head_dim) */
  double *lse;      /* (group_size, n_rows) */
  OracleHead data;  /* views of the arrays above (doubles, and the floats
                               they were widened from for FLOAT GEMMs) */
} ScoreHead;

int score_head_alloc(ScoreHead *head, const TraceReader *reader);
void score_head_free(ScoreHead *head);
/* Keeps the keys as read (floats) only: K and data.K become NULL and
 * score_head_read does not widen them. For a caller whose every product
 * with K is a FLOAT GEMM (the analyser at --precision float), which reads
 * data.K_f; anything that reads data.K then fails loudly. */
void score_head_float_keys(ScoreHead *head);

/* Reads (layer, kv_head) and its query heads. */
int score_head_read(ScoreHead *head, TraceReader *reader, size_t layer, size_t kv_head);

#endif
