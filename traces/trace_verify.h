/* `obcache verify`'s checks of a trace against itself: every head's lse, O
 * (and A when stored) recomputed from its Q, K, V in double precision, one
 * (layer, KV head) at a time, with the worst relative difference of each
 * quantity; the column sums (schema 3) against the captured rows' terms
 * (their exact attention, the OBCache terms from it and the stored O and
 * V) and obc_v against col_attn x ||v||^2 from the stored V; every
 * query-statistics covariance positive semi-definite (Cholesky with the
 * slack of its rounding); then every dataset read exactly as stored (each chunk's
 * Fletcher32 checksum, schema 2) and the content hash recomputed, which must
 * equal the recorded one. */
#ifndef OBC_TRACE_VERIFY_H
#define OBC_TRACE_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "traces/trace.h"

/* The default tolerances. f32 storage: Q, K, V, O are rounded to 2^-24 relative;
 * a logit q.k/sqrt(d) of magnitude up to ~30 then moves by ~1e-6, and the
 * producer (a model runtime) accumulated in float over up to 10^5 keys, so
 * honest traces stay around 1e-6..1e-5: 1e-4 leaves a margin of ten and still
 * catches any real inconsistency (wrong head mapping, scale or causality gives
 * errors of order 1). f16 storage: every input is rounded to 2^-11 ~ 5e-4
 * relative, so a logit moves by ~5e-4 |q||k|/sqrt(d): up to a few 1e-2 for the
 * large logits of real models (sinks, |q||k|/sqrt(d) ~ 50), and the output by
 * about that times its attention weight. A SmolLM2 capture stored in f16
 * measured 1.2e-2 on O; 5e-2 keeps a margin and still catches structural
 * errors (of order 1). */
#define TRACE_VERIFY_TOLERANCE_F32 1e-4
#define TRACE_VERIFY_TOLERANCE_F16 5e-2

enum { TRACE_VERIFY_LSE, TRACE_VERIFY_O, TRACE_VERIFY_A, TRACE_VERIFY_KINDS };

typedef struct {
  const char *name; /* "lse", "O", "A" */
  double worst;     /* worst relative difference */
  size_t layer, head, row;
} TraceVerifyWorst;

typedef struct {
  double tolerance;                           /* the one applied */
  bool recomputed;                            /* the fields below are filled */
  TraceVerifyWorst worst[TRACE_VERIFY_KINDS]; /* A only when the trace stores it */
  int failing;                                /* the first kind above the tolerance, or -1 */
  bool has_sums;                              /* the column sums were checked */
  bool sums_complete; /* the captured rows are every prompt row: equal, not at least */
  double sums_worst;  /* the attention sums' worst relative difference */
  size_t sums_layer, sums_head, sums_position;
  char content_hash[17]; /* recomputed, equal to the recorded one (when that exists) */
} TraceVerifyReport;

/* Runs every check on threads threads (0: all cores) with tolerance (0: the
 * default of the trace's dtype). An unreadable or damaged dataset, column
 * sums that contradict the rows, a recomputation above the tolerance (the
 * first kind, report->failing) or a content hash other than the recorded one
 * fails with OBC_EFORMAT (or the reader's code) and a message naming the
 * file; report->recomputed says whether the recomputation got as far as
 * filling the report (it has, for the last two). */
int trace_verify(TraceReader *reader, double tolerance, size_t threads, TraceVerifyReport *report);

#endif
