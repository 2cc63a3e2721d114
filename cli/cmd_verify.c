/* `obcache verify TRACE`: the checks of traces/trace_verify.h, printed. A
 * damaged trace, one whose stored outputs disagree with its own inputs
 * beyond the tolerance, or one whose contents changed since it was written
 * fails. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "traces/trace.h"
#include "traces/trace_verify.h"

static const char *usage =
    "usage: obcache verify [options] TRACE.h5\n"
    "\n"
    "Read every dataset of the trace, checking each chunk's checksum, and recompute\n"
    "the content hash: a damaged chunk or a hash other than the recorded one fails.\n"
    "Then recompute lse, O (and A when stored) of every (layer, head) from the\n"
    "trace's own Q, K, V in double precision and report the worst relative\n"
    "difference of each:\n"
    "  lse: |stored - exact| / max(1, |exact|)\n"
    "  O:   ||stored row - exact row|| / ||exact row||\n"
    "  A:   max |stored - exact| (probabilities; a row sums to 1)\n"
    "Exits non-zero when any is above the tolerance.\n";

static int parse_tolerance(void *target, const char *option, const char *value) {
  int rc = obc_parse_double(option, value, target);
  if (!rc && *(double *)target <= 0) rc = obc_fail(OBC_EINVAL, "--tolerance: must be > 0");
  return rc;
}

static int parse_args(int argc, char **argv, const char **path, double *tolerance, size_t *threads,
                      bool *help) {
  const ObcOption options[] = {
      OBC_OPT_CUSTOM(
          "--tolerance", "X", tolerance, parse_tolerance,
          "largest accepted difference (larger for f16: half precision keeps 11 bits)",
          .default_text =
              OBC_OPTION_SPELLED(TRACE_VERIFY_TOLERANCE_F32) " for f32 traces, " OBC_OPTION_SPELLED(
                  TRACE_VERIFY_TOLERANCE_F16) " for f16 ones"),
      OBC_OPT_SIZE("--threads", "N", threads, "OpenMP threads", .default_text = "all cores"),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("verify", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "%s: only one trace at a time (see obcache verify --help)",
                    args.positional[1]);
  if (!args.n_positional) return obc_fail(OBC_EINVAL, "no trace given (see obcache verify --help)");
  *path = args.positional[0];
  return OBC_OK;
}

int cmd_verify(int argc, char **argv) {
  const char *path = NULL;
  double tolerance = 0.0;
  size_t threads = 0;
  bool help = false;
  int rc = parse_args(argc, argv, &path, &tolerance, &threads, &help);
  if (rc || help) return rc;
  TraceReader *reader = NULL;
  rc = trace_open(path, &reader);
  if (rc) return rc;
  const TraceMeta *m = trace_meta(reader);
  TraceVerifyReport r;
  rc = trace_verify(reader, tolerance, threads, &r);
  if (r.recomputed) {
    printf("verify %s: %zu layers x %zu heads, %zu rows, %zu positions, dtype %s, tolerance %g\n",
           path, m->model.n_layers, m->model.n_heads, m->n_rows, m->n_positions, m->dtype,
           r.tolerance);
    for (int k = 0; k < TRACE_VERIFY_KINDS; k++) {
      if (k == TRACE_VERIFY_A && !m->has_attn) continue;
      const TraceVerifyWorst *w = &r.worst[k];
      printf("  %-3s worst relative difference %.3g (layer %zu, head %zu, row %zu)  %s\n", w->name,
             w->worst, w->layer, w->head, w->row,
             w->worst <= r.tolerance ? "ok" : "ABOVE TOLERANCE");
    }
  }
  if (r.recomputed && r.failing < 0 && r.has_sums)
    printf(
        "  column sums: %s, every value finite and >= 0, counts exact, agnostic rows "
        "[0, %zu) <= all rows, attention within its rows, obc_v <= attention x ||v||^2; "
        "every sum %s the captured rows' terms (attention: worst relative "
        "difference %.3g, layer %zu, head %zu, position %zu)  ok\n",
        "attn obc_v obc_k obc_vk", m->agnostic_rows, r.sums_complete ? "equal to" : "at least",
        r.sums_worst, r.sums_layer, r.sums_head, r.sums_position);
  if (r.recomputed && r.failing < 0 && m->has_query_stats)
    printf(
        "  query statistics: q_sum q_outer, every value finite, q_outer symmetric, "
        "covariances positive semi-definite, counts exact, RoPE frequencies follow "
        "rope_theta  ok\n");
  if (!rc)
    printf("  content hash %s  %s\n", r.content_hash,
           m->content_hash[0] ? "ok (equal to the recorded one; every chunk's checksum checked)"
                              : "(schema 1: no recorded hash, no checksums)");
  trace_close(reader);
  return rc;
}
