/* `obcache evict TRACE --score S --budget B ... -o KEEP.h5`: applies one
 * eviction policy (evict/policy.h) to a trace and writes the kept prompt
 * positions of every (layer, KV head), with a one-line summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "evict/policy.h"
#include "evict/policy_args.h"
#include "evict/preset.h"
#include "model/model.h"
#include "common/obc_file.h"
#include "common/obc_text.h"

static const char *usage =
    "usage: obcache evict TRACE [policy options] -o KEEP.h5\n"
    "\n"
    "Applies an eviction policy to the prompt of TRACE and writes, for every\n"
    "(layer, KV head), the prompt positions it keeps: datasets keep (layers,\n"
    "kv_heads, n_prompt) uint8, n_kept (layers, kv_heads) and positions (layers,\n"
    "kv_heads, max kept) padded with -1, every parameter as an attribute.\n"
    "Replay it with obcache replay --offline TRACE --keep KEEP.h5 (or the model).\n"
    "The keep file records the query protocol (attribute protocol): replay reads it\n"
    "from there, so an agnostic kept set is replayed with the question re-run.\n"
    "\n"
    "Presets (--score NAME; preset:NAME for snapkv, vatp and streaming, whose bare\n"
    "names are the generic scores; NAME+obc_v|obc_k|obc_vk puts OBCache's score\n"
    "inside an attention preset, everything else unchanged; NAME+attn, the swap\n"
    "test, runs that path with the attention itself; docs/SCIENCE.md, \"Methods as\n"
    "presets\"):\n"
    "  h2o           the H2O paper's: attention accumulated over every prompt row,\n"
    "                summed over the query group; of the k kept, the last k/2\n"
    "                candidates (the recent window), then the heavy hitters\n"
    "  observed-attention  kvpress ObservedAttention: each sum / the rows that\n"
    "                saw the position, group mean, no recent window\n"
    "  tova          last query row, mean over the layer's query heads (kvpress)\n"
    "  tova-group    last query row, summed over the KV head's query group\n"
    "  snapkv        kvpress SnapKV: 64 rows, mean, avg pool 5, group mean\n"
    "  snapkv-max7   the OBCache authors' SnapKV: 16 rows, max pool 7\n"
    "  pyramidkv     SnapKV scores, per-layer pyramid budgets (beta 20)\n"
    "  adakv-snapkv  SnapKV scores, AdaKV allocation across a layer's heads\n"
    "  criticalkv-snapkv  kvpress CriticalKV around SnapKV: half the budget by\n"
    "                SnapKV, the rest by (SnapKV + 1e-4) x ||W_o v||_1 (reads\n"
    "                --model)\n"
    "  vatp          64-row mean attention x ||v||_1\n"
    "  streaming     4 sinks + the most recent\n"
    "  knorm         lowest key norm first kept\n"
    "  keydiff       keys least like the mean key\n"
    "  expected_attention  kvpress ExpectedAttention: the pre-RoPE query statistics'\n"
    "                mean and covariance under the next 512 positions' mean RoPE,\n"
    "                group mean, x ||v||_2, 4 sinks\n"
    "  adakv-vatp    AdaKV with VATP's score: SnapKV's (pooled) x ||v||_1\n"
    "  criticalkv-adakv  kvpress CriticalAdaKV around SnapKV: AdaKV's head budgets,\n"
    "                CriticalKV's two stages inside each (reads --model)\n";

/* The scores (n_layers, n_kv_heads, n_candidates) as CSV through a pending file. */
static int write_scores(const char *path, const EvictKeepSet *keep, const double *scores) {
  ObcPendingFile pending;
  FILE *fp = NULL;
  int rc = obc_text_open(&pending, path, &fp);
  if (rc) return rc;
  size_t n = keep->n_candidates;
  int ok = fprintf(fp, "layer,kv_head,position,score\n") > 0;
  for (size_t l = 0; l < keep->n_layers && ok; l++)
    for (size_t g = 0; g < keep->n_kv_heads && ok; g++)
      for (size_t q = 0; q < n && ok; q++)
        ok = fprintf(fp, "%zu,%zu,%zu,%.17g\n", l, g, q,
                     scores[(l * keep->n_kv_heads + g) * n + q]) > 0;
  return obc_text_close(&pending, fp, ok);
}

int cmd_evict(int argc, char **argv) {
  EvictPolicy policy;
  evict_policy_default(&policy);
  const char *trace_path = NULL, *out_path = NULL, *scores_path = NULL;
  const ObcOption own[] = {
      OBC_OPT_TEXT("-o", "KEEP.h5", &out_path, "the kept positions (required)"),
      OBC_OPT_TEXT(
          "--scores-out", "FILE.csv", &scores_path,
          "also write the scores the policy selected from: layer,kv_head,position,score for every "
          "candidate (criticalkv-snapkv: the budget's final scores, DBL_MAX for its first stage; "
          "criticalkv-adakv: DBL_MAX for every kept position)"),
      OBC_OPT_TEXT("--model", "M", &policy.model,
                   "GGUF file or HF folder whose attention output projection criticalkv-snapkv and "
                   "criticalkv-adakv read (the model that captured TRACE)",
                   .default_text = MODEL_DEFAULT_TEXT),
      OBC_OPTION_HEADING(""),
  };
  ObcOption policy_options[EVICT_POLICY_N_OPTIONS];
  EvictPolicyProtocolTarget protocol = {0};
  evict_policy_options(&policy, NULL, NULL, &protocol, policy_options);
  const ObcOptionList lists[] = {OBC_OPTION_LIST(own), OBC_OPTION_LIST(policy_options)};
  ObcArguments args;
  int rc = obc_options_parse("evict", lists, 2, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, lists, 2);
    return 0;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "one TRACE expected, got '%s' and '%s'", args.positional[0],
                    args.positional[1]);
  if (args.n_positional) trace_path = args.positional[0];
  if (!trace_path) return obc_fail(OBC_EINVAL, "missing TRACE (see obcache evict --help)");
  if (!out_path) return obc_fail(OBC_EINVAL, "missing -o KEEP.h5 (see obcache evict --help)");
  TraceReader *reader = NULL;
  rc = trace_open(trace_path, &reader);
  if (rc) return rc;
  EvictKeepSet keep; /* zeroed by evict_policy_apply_scores even when it fails */
  double *scores = NULL;
  rc = evict_policy_apply_scores(reader, &policy, &keep, scores_path ? &scores : NULL);
  if (!rc) {
    char command_line[4096];
    obc_text_command_line(argc, argv, command_line, sizeof command_line);
    rc = evict_keep_write(out_path, &keep, trace_path, command_line);
  }
  if (!rc && scores_path && (rc = write_scores(scores_path, &keep, scores)))
    remove(out_path); /* both outputs or neither */
  free(scores);
  if (!rc) {
    size_t heads = keep.n_layers * keep.n_kv_heads, lo = keep.n_prompt, hi = 0;
    for (size_t h = 0; h < heads; h++) {
      lo = keep.n_kept[h] < lo ? keep.n_kept[h] : lo;
      hi = keep.n_kept[h] > hi ? keep.n_kept[h] : hi;
    }
    char protect[EVICT_MAX_PROTECT * 64 + 16] = "", spans[EVICT_MAX_PROTECT * 64];
    evict_policy_protect_text(&policy, spans, sizeof spans);
    if (spans[0]) snprintf(protect, sizeof protect, ", protect %s", spans);
    printf(
        "evict: %s, budget %zu of %zu candidates (%s, %s, window %zu, recent %zu, sinks %zu%s, "
        "budget rule %s): %zu..%zu kept per KV head -> %s\n",
        keep.policy.score, keep.budget, keep.n_candidates,
        evict_allocation_name(keep.policy.allocation), evict_protocol_name(policy.protocol),
        keep.window, keep.policy.recent, keep.policy.sinks, protect,
        evict_budget_rule_name(keep.policy.budget_rule), lo, hi, out_path);
  }
  evict_keep_set_free(&keep);
  trace_close(reader);
  return rc;
}
