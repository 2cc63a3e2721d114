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

int score_head_alloc(ScoreHead *head, const TraceMeta *meta);
void score_head_free(ScoreHead *head);
/* Reads (layer, kv_head) and its query heads. */
int score_head_read(ScoreHead *head, TraceReader *reader, size_t layer, size_t kv_head);

#endif
