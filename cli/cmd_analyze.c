/* `obcache analyze TRACE`: option parsing, output-folder checks and the
 * summary table around the analysis driver (analyze/analysis.h). Everything
 * that can be checked before the long computation (options, trace, output
 * folders) is checked first, so a bad run fails fast and leaves nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analysis.h"
#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"
#include "common/obc_thread.h"

static const char *usage =
    "usage: obcache analyze TRACE [options]\n"
    "\n"
    "Ranks every prompt token of every (layer, KV head) of TRACE by each eviction\n"
    "score and exact error (attn, attn2, attn_vl1, attn_maxpool, obc_v, obc_k,\n"
    "obc_vk, exact_v, exact_k, exact_vk, remove) over the last W prompt rows, and\n"
    "measures how well each finds the tokens whose eviction really hurts: the true\n"
    "eviction error of the first decode step (oracle@1) or of all captured steps\n"
    "(oracle@T).\n"
    "\n"
    "files written to DIR (all appear together when the run succeeds):\n"
    "  report.json          trace, model, every parameter, tool version, summary\n"
    "  recall.csv           score,window,recent,k,reference,recall_mean,recall_min,\n"
    "                       recall_max (recall@k = |selection & reference top-k| / k\n"
    "                       over heads; reference oracle@1, oracle@T [, --oracle])\n"
    "  recall_layers.csv, recall_heads.csv: against the --oracle reference only\n"
    "  recall_layers.csv    score,window,recent,k,layer,recall (mean over KV heads)\n"
    "  recall_heads.csv     score,window,recent,k,layer,kv_head,recall\n"
    "  spearman.csv         score,window,reference,rho_mean,rho_min,rho_max: rank\n"
    "                       agreement with the oracle, and of each Taylor score with\n"
    "                       its exact error (obc_v/exact_v, obc_k/exact_k,\n"
    "                       obc_vk/exact_vk)\n"
    "  needle.csv           score,window,recent,k,retention (share of the needle span\n"
    "                       kept; only when the trace marks a needle)\n"
    "  bias.csv             score,window,recent,k,bucket,bucket_lo,bucket_hi,\n"
    "                       selected_share,mean_norm_score: where in the prompt the\n"
    "                       selection (and the oracle's) falls\n"
    "  taylor.csv           layer,kv_head,position,exact_v,obc_v,exact_k,obc_k,\n"
    "                       exact_vk,obc_vk,remove,oracle at the main window\n"
    "                       (subsample)\n";

typedef struct {
  const char *trace_path;
  const char *out_dir;
  bool quiet;
  AnalysisConfig config;
} AnalyzeArgs;

static int parse_gqa(void *target, const char *option, const char *value) {
  static const char *const names[] = {"sum", "mean", "max"};
  for (size_t i = 0; i < 3; i++)
    if (!strcmp(value, names[i])) {
      *(ScoreGqa *)target = (ScoreGqa)i;
      return OBC_OK;
    }
  return obc_fail(OBC_EINVAL, "%s: expected one of sum|mean|max, got '%s'", option, value);
}

static int parse_precision(void *target, const char *option, const char *value) {
  if (strcmp(value, "float") && strcmp(value, "double"))
    return obc_fail(OBC_EINVAL, "%s: expected one of float|double, got '%s'", option, value);
  *(OraclePrecision *)target = strcmp(value, "float") ? OBC_PRECISION_DOUBLE : OBC_PRECISION_FLOAT;
  return OBC_OK;
}

/* --score NAME=file:PATH[:DATASET][,...]: scores from files, appended;
 * a NAME must be no quantity's, no reference's and given once. */
static int parse_file_scores(void *target, const char *option, const char *value) {
  AnalysisConfig *c = target;
  char buf[4096], *items[OBC_ANALYSIS_MAX_FILE_SCORES];
  size_t n = 0;
  int rc = obc_split_list(option, value, buf, sizeof buf, items, OBC_ANALYSIS_MAX_FILE_SCORES, &n);
  for (size_t i = 0; i < n && !rc; i++) {
    if (c->n_file_scores == OBC_ANALYSIS_MAX_FILE_SCORES)
      return obc_fail(OBC_EINVAL, "%s: at most %d scores from files", option,
                      OBC_ANALYSIS_MAX_FILE_SCORES);
    ScoresFileSpec *spec = &c->file_scores[c->n_file_scores];
    if ((rc = scores_file_spec_parse(option, items[i], spec))) break;
    bool taken = !strncmp(spec->name, "oracle", 6);
    for (int q = 0; q < OBC_Q_COUNT; q++) taken |= !strcmp(spec->name, score_quantity_name(q));
    for (size_t j = 0; j < c->n_file_scores; j++)
      taken |= !strcmp(spec->name, c->file_scores[j].name);
    if (taken)
      return obc_fail(OBC_EINVAL,
                      "%s %s: %s is taken (by a quantity, a reference or another --score); name "
                      "the file's score otherwise",
                      option, items[i], spec->name);
    c->n_file_scores++;
  }
  return rc;
}

static int parse_args(int argc, char **argv, AnalyzeArgs *args, bool *help) {
  AnalysisConfig *c = &args->config;
  ObcSizeList windows = {c->windows, &c->n_windows, OBC_ANALYSIS_MAX_LIST};
  ObcSizeList topk = {c->topk, &c->n_topk, OBC_ANALYSIS_MAX_LIST};
  const ObcOption options[] = {
      OBC_OPT_TEXT("--output", "DIR", &args->out_dir,
                   "output folder (default: TRACE without .h5 + \"-analysis\")", .alias = "-o"),
      OBC_OPT_CUSTOM(
          "--window", "W[,W...]", &windows, obc_option_parse_size_list,
          "perturbation windows (prompt rows). The first value is the main window. Default: "
          "1,2,4,... up to the captured contiguous prompt rows, plus that maximum; main = min(64, "
          "max)"),
      OBC_OPT_CUSTOM("--topk", "K[,K...]", &topk, obc_option_parse_size_list,
                     "budgets k; the first is the main budget. Default: 40 and the curve "
                     "1,2,5,10,20,40,60,80,100 (capped at the prompt length)"),
      OBC_OPT_SIZE(
          "--recent", "R", &c->recent,
          "also report a recent window of R positions (last R prompt positions always kept, k - R "
          "chosen by score); default 0. Results are given for r = 0 and r = R. R must be below "
          "every given k (default curve: budgets k <= R get r = 0 only)"),
      OBC_OPT_CUSTOM(
          "--oracle", "1|T|N|a-b", &c->oracle, oracle_steps_parse_option,
          "the main reference (summary, bias, taylor): oracle@1 (default, the paper's), oracle@T "
          "(every captured decode step), step N alone (oracle@N-N) or steps a..b (oracle@a-b, "
          "1-based). Recall is also reported against oracle@1 and oracle@T"),
      OBC_OPT_CUSTOM(
          "--gqa", "sum|mean|max", &c->score_options.aggregation, parse_gqa,
          "how query heads of a KV group combine scores (default sum; exact errors and the oracle "
          "are always summed)"),
      OBC_OPT_SIZE("--maxpool-kernel", "K", &c->score_options.maxpool_kernel,
                   "odd max-pooling width of attn_maxpool"),
      OBC_OPT_SIZE("--buckets", "B", &c->buckets, "relative-position buckets of bias.csv"),
      OBC_OPT_CUSTOM("--precision", "P", &c->score_options.precision, parse_precision,
                     "float (default; sgemm) or double (dgemm) for q.k and v.o"),
      OBC_OPT_SIZE("--taylor-points", "N", &c->taylor_points, "points of taylor.csv in total"),
      OBC_OPT_SIZE("--threads", "N", &c->threads, "OpenMP threads", .default_text = "all cores"),
      OBC_OPT_TEXT(
          "--scores-out", "FILE.h5", &c->scores_out,
          "write every per-token quantity at the main window (datasets attn ... remove, oracle@1, "
          "oracle@T [, the --oracle one], each float64 [layers, kv_heads, n_prompt])"),
      OBC_OPT_CUSTOM(
          "--score", "NAME=file:PATH[:DATASET]", c, parse_file_scores,
          "also rank tokens by a score read from an HDF5 file of this trace (its trace_hash; "
          "float32/float64 [layers, kv_heads, >= n_prompt]; DATASET may be left out when the "
          "file holds one): reported as NAME beside the quantities, with no window (0 in the "
          "CSVs). Repeatable, or a comma list; a --scores-out file is valid input"),
      OBC_OPT_FLAG("--quiet", &args->quiet,
                   "no progress line (shown on a terminal) and no summary table"),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments parsed;
  int rc = obc_options_parse("analyze", &list, 1, argc, argv, &parsed);
  if (rc) return rc;
  if (parsed.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    *help = true;
    return OBC_OK;
  }
  if (parsed.n_positional > 1)
    return obc_fail(OBC_EINVAL, "one TRACE expected, got '%s' and '%s'", parsed.positional[0],
                    parsed.positional[1]);
  if (!parsed.n_positional)
    return obc_fail(OBC_EINVAL, "missing TRACE (usage: obcache analyze TRACE [options])");
  args->trace_path = parsed.positional[0];
  return OBC_OK;
}

/* The output folder must exist and be writable, or be creatable (its parent
 * exists and is writable): checked before the analysis, not after it. */
static int check_out_dir(const char *dir) {
  struct stat st;
  if (stat(dir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return obc_fail(OBC_EIO, "-o: %s exists and is not a folder", dir);
    if (access(dir, W_OK) != 0) return obc_fail(OBC_EIO, "-o: %s: folder is not writable", dir);
    return OBC_OK;
  }
  char parent[4096];
  snprintf(parent, sizeof parent, "%s", dir);
  size_t len = strlen(parent);
  while (len > 1 && parent[len - 1] == '/') parent[--len] = '\0';
  char *slash = strrchr(parent, '/');
  if (!slash)
    snprintf(parent, sizeof parent, ".");
  else if (slash == parent)
    parent[1] = '\0';
  else
    *slash = '\0';
  if (stat(parent, &st) != 0)
    return obc_fail(OBC_EIO, "-o: %s: cannot create it: folder %s does not exist", dir, parent);
  if (!S_ISDIR(st.st_mode))
    return obc_fail(OBC_EIO, "-o: %s: cannot create it: %s is not a folder", dir, parent);
  if (access(parent, W_OK) != 0)
    return obc_fail(OBC_EIO, "-o: %s: cannot create it: folder %s is not writable", dir, parent);
  return OBC_OK;
}

int cmd_analyze(int argc, char **argv) {
  AnalyzeArgs args = {0};
  analysis_config_default(&args.config);
  bool help = false;
  int rc = parse_args(argc, argv, &args, &help);
  if (rc || help) return rc;

  char out_dir[4096];
  if (args.out_dir)
    snprintf(out_dir, sizeof out_dir, "%s", args.out_dir);
  else
    obc_path_beside(args.trace_path, "-analysis", out_dir, sizeof out_dir);

  TraceReader *reader = NULL;
  if ((rc = trace_open(args.trace_path, &reader))) return rc;
  const TraceMeta *meta = trace_meta(reader);
  rc = analysis_config_resolve(&args.config, meta);
  if (rc && strncmp(obc_error_message(), "--", 2)) obc_fail_context(rc, "%s", args.trace_path);
  if (!rc) rc = check_out_dir(out_dir);
  if (rc) {
    trace_close(reader);
    return rc;
  }
  obc_set_threads(args.config.threads);

  AnalysisResult result;
  rc = analysis_run(reader, &args.config, !args.quiet && isatty(STDERR_FILENO), &result);
  if (rc) {
    trace_close(reader);
    return rc;
  }
  char command_line[4096];
  obc_text_command_line(argc, argv, command_line, sizeof command_line);
  rc = analysis_write_outputs(out_dir, args.trace_path, meta, &args.config, &result, command_line);
  if (rc) {
    /* Nothing of a failed run stays: the outputs and a new folder are gone
     * with their set, the scores file goes here. */
    if (args.config.scores_out) remove(args.config.scores_out);
  } else if (!args.quiet) {
    analysis_print_summary(stdout, args.trace_path, meta, &args.config, &result);
    printf("outputs in %s/ (%.1f s)\n", out_dir, result.seconds);
  }
  analysis_result_free(&result);
  trace_close(reader);
  return rc;
}
