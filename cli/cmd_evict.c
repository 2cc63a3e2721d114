/* `obcache evict TRACE --score S --budget B ... -o KEEP.h5`: applies one
 * eviction policy (evict/policy.h) to a trace and writes the kept prompt
 * positions of every (layer, KV head), with a one-line summary. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "evict/policy.h"
#include "evict/policy_args.h"
#include "evict/source.h"
#include "model/model.h"
#include "common/obc_file.h"
#include "common/obc_text.h"
#include "scores/scores_file.h"

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
    "Published methods (--score NAME, the same name in every command;\n"
    "NAME+obc_v|obc_k|obc_vk puts OBCache's score inside an attention method,\n"
    "everything else unchanged; NAME+attn, the swap test, runs that path with the\n"
    "attention itself; docs/SCIENCE.md, \"Methods as presets\"):\n";

/* --list-scores: the table of score sources, a tab-separated line a row. */
static void print_scores(void) {
  static const char *const kinds[] = {[EVICT_SCORE_QUANTITY] = "quantity",
                                      [EVICT_SCORE_RANDOM] = "random",
                                      [EVICT_SCORE_RECENCY] = "recency",
                                      [EVICT_SCORE_ORACLE] = "reference",
                                      [EVICT_SCORE_DECODE_ATTN] = "reference",
                                      [EVICT_SCORE_PRESET] = "method",
                                      [EVICT_SCORE_FILE] = "file"};
  for (size_t i = 0; i < evict_source_count(); i++) {
    const EvictSource *row = evict_source_at(i);
    printf("%s\t%s\t%s\t%s\n", row->name, kinds[row->kind], row->pairs ? "pairs" : "-",
           row->describe);
  }
}

/* usage, then every method of the table with what it does, wrapped at 80
 * columns under a 16-column name. */
static void print_usage_and_methods(char *out, size_t size) {
  size_t used = (size_t)snprintf(out, size, "%s", usage);
  for (size_t i = 0; i < evict_source_count() && used < size; i++) {
    const EvictSource *row = evict_source_at(i);
    if (row->kind != EVICT_SCORE_PRESET) continue;
    size_t name = strlen(row->name) + 2, column = name < 16 ? 16 : name + 2;
    used += (size_t)snprintf(out + used, size - used, "  %-*s", (int)(column - 2), row->name);
    bool first = true;
    for (const char *word = row->describe; *word && used < size; first = false) {
      size_t len = strcspn(word, " ");
      bool wrap = !first && column + 1 + len > 79;
      used += (size_t)snprintf(out + used, size - used, "%s%.*s",
                               wrap    ? "\n                "
                               : first ? ""
                                       : " ",
                               (int)len, word);
      column = (wrap ? 16 : column + !first) + len;
      word += len + (word[len] == ' ');
    }
    if (used < size) used += (size_t)snprintf(out + used, size - used, "\n");
  }
}

/* The scores (n_layers, n_kv_heads, n_candidates) as CSV through a pending file. */
static int write_scores_csv(const char *path, const EvictKeepSet *keep, const double *scores) {
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

/* The same as analyze --scores-out writes them: one dataset named by the
 * score, (n_layers, n_kv_heads, n_candidates) float64. */
static int write_scores_h5(const char *path, const EvictKeepSet *keep, const double *scores,
                           const char *trace) {
  const char *names[] = {keep->policy.score};
  ScoresFileLayout layout = {.n_layers = keep->n_layers,
                             .n_kv_heads = keep->n_kv_heads,
                             .n_prompt = keep->n_candidates,
                             .window = keep->window,
                             .trace_path = trace,
                             .trace_hash = keep->trace_hash,
                             .gqa = "",
                             .precision = "double",
                             .names = names,
                             .n_datasets = 1};
  ScoresFile *file = NULL;
  int rc = scores_file_create(path, &layout, &file);
  size_t n = keep->n_candidates;
  for (size_t l = 0; l < keep->n_layers && !rc; l++)
    for (size_t g = 0; g < keep->n_kv_heads && !rc; g++)
      rc = scores_file_write_head(file, 0, l, g, scores + (l * keep->n_kv_heads + g) * n);
  if (rc) {
    scores_file_abort(file);
    return rc;
  }
  return scores_file_commit(file);
}

/* --scores-out's format from its name: FILE.csv or FILE.h5 (FILE.hdf5). */
static int scores_format(const char *path, bool *csv) {
  const char *dot = strrchr(path, '.');
  *csv = dot && !strcmp(dot, ".csv");
  if (*csv || (dot && (!strcmp(dot, ".h5") || !strcmp(dot, ".hdf5")))) return OBC_OK;
  char shown[256];
  obc_text_escape(shown, sizeof shown, path, false);
  return obc_fail(OBC_EINVAL,
                  "--scores-out %s: the name says the format: FILE.csv (layer,kv_head,"
                  "position,score) or FILE.h5 (as analyze --scores-out writes it)",
                  shown);
}

int cmd_evict(int argc, char **argv) {
  EvictPolicy policy;
  evict_policy_default(&policy);
  const char *trace_path = NULL, *out_path = NULL, *scores_path = NULL;
  bool list = false;
  const ObcOption own[] = {
      OBC_OPT_TEXT("--output", "KEEP.h5", &out_path, "the kept positions (required)",
                   .alias = "-o"),
      OBC_OPT_FLAG("--list-scores", &list,
                   "print every name --score takes (in every command), a line each: name, kind, "
                   "whether it pairs with +obc_*, what it does; no TRACE"),
      OBC_OPT_TEXT(
          "--scores-out", "FILE", &scores_path,
          "also write the scores the policy selected from, for every candidate, in the format "
          "the name says: FILE.csv (layer,kv_head,position,score) or FILE.h5 (one dataset named "
          "by the score, (layers, kv_heads, candidates) float64, as analyze --scores-out writes "
          "them) (criticalkv-snapkv: the budget's final scores, DBL_MAX for its first stage; "
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
    char text[8192];
    print_usage_and_methods(text, sizeof text);
    obc_options_print_usage(stdout, text, lists, 2);
    return 0;
  }
  if (list) {
    print_scores();
    return 0;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "one TRACE expected, got '%s' and '%s'", args.positional[0],
                    args.positional[1]);
  if (args.n_positional) trace_path = args.positional[0];
  if (!trace_path) return obc_fail(OBC_EINVAL, "missing TRACE (see obcache evict --help)");
  if (!out_path) return obc_fail(OBC_EINVAL, "missing -o KEEP.h5 (see obcache evict --help)");
  bool csv = false;
  if (scores_path && (rc = scores_format(scores_path, &csv))) return rc;
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
  if (!rc && scores_path &&
      (rc = csv ? write_scores_csv(scores_path, &keep, scores)
                : write_scores_h5(scores_path, &keep, scores, trace_path)))
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
