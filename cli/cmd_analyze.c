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
#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "common/obc_file.h"

static void print_help(FILE *out) {
  fprintf(
      out,
      "usage: obcache analyze TRACE [options]\n"
      "\n"
      "Ranks every prompt token of every (layer, KV head) of TRACE by each eviction\n"
      "score and exact error (attn, attn2, vatp, snapkv, obc_v, obc_k, obc_vk,\n"
      "exact_v, exact_k, exact_vk, remove) over the last W prompt rows, and measures\n"
      "how well each finds the tokens whose eviction really hurts: the true eviction\n"
      "error of the first decode step (oracle@1) or of all captured steps (oracle@T).\n"
      "\n"
      "options:\n"
      "  -o DIR               output folder (default: TRACE without .h5 + \"-analysis\")\n"
      "  --window W[,W...]    perturbation windows (prompt rows). The first value is\n"
      "                       the main window. Default: 1,2,4,... up to the captured\n"
      "                       contiguous prompt rows, plus that maximum; main = min(64, max)\n"
      "  --topk K[,K...]      budgets k; the first is the main budget. Default: 40 and\n"
      "                       the curve 1,2,5,10,20,40,60,80,100 (capped at the prompt length)\n"
      "  --recent R           also report a recent window of R positions (last R prompt\n"
      "                       positions always kept, k - R chosen by score); default 0.\n"
      "                       Results are given for r = 0 and r = R. R must be below\n"
      "                       every given k (default curve: budgets k <= R get r = 0 only)\n"
      "  --oracle 1|T|N|a-b   the main reference (summary, bias, taylor): oracle@1\n"
      "                       (default, the paper's), oracle@T (every captured decode\n"
      "                       step), step N alone (oracle@N-N) or steps a..b (oracle@a-b,\n"
      "                       1-based). Recall is also reported against oracle@1 and\n"
      "                       oracle@T\n"
      "  --gqa sum|mean|max   how query heads of a KV group combine scores (default sum;\n"
      "                       exact errors and the oracle are always summed)\n"
      "  --snapkv-kernel K    odd max-pooling width of snapkv (default 7)\n"
      "  --buckets B          relative-position buckets of bias.csv (default 20)\n"
      "  --precision P        float (default; sgemm) or double (dgemm) for q.k and v.o\n"
      "  --taylor-points N    points of taylor.csv in total (default 4000)\n"
      "  --threads N          OpenMP threads (default: all cores)\n"
      "  --scores-out FILE.h5 write every per-token quantity at the main window\n"
      "                       (datasets attn ... remove, oracle@1, oracle@T [, the\n"
      "                       --oracle one], each\n"
      "                       float64 [layers, kv_heads, n_prompt])\n"
      "  --quiet              no progress line (shown on a terminal) and no summary table\n"
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
      "                       its exact error (obc_v/exact_v, obc_k/exact_k, obc_vk/exact_vk)\n"
      "  needle.csv           score,window,recent,k,retention (share of the needle span\n"
      "                       kept; only when the trace marks a needle)\n"
      "  bias.csv             score,window,recent,k,bucket,bucket_lo,bucket_hi,\n"
      "                       selected_share,mean_norm_score: where in the prompt the\n"
      "                       selection (and the oracle's) falls\n"
      "  taylor.csv           layer,kv_head,position,exact_v,obc_v,exact_k,obc_k,\n"
      "                       exact_vk,obc_vk,remove,oracle at the main window (subsample)\n");
}

typedef struct {
  const char *trace_path;
  const char *out_dir;
  bool quiet;
  ObcAnalysisConfig config;
} AnalyzeArgs;

static int parse_choice(const char *option, const char *value, const char *const *choices, size_t n,
                        int *out) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(value, choices[i])) {
      *out = (int)i;
      return OBC_OK;
    }
  return obc_fail(OBC_EINVAL, "%s: expected one of %s%s%s%s%s, got '%s'", option, choices[0],
                  n > 1 ? "|" : "", n > 1 ? choices[1] : "", n > 2 ? "|" : "",
                  n > 2 ? choices[2] : "", value);
}

static int parse_args(int argc, char **argv, AnalyzeArgs *args, bool *help) {
  static const char *const gqa_names[] = {"sum", "mean", "max"};
  static const char *const precision_names[] = {"float", "double"};
  ObcAnalysisConfig *c = &args->config;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *v = NULL;
    int rc = OBC_OK, choice = 0;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      *help = true;
      return OBC_OK;
    }
    if (!strcmp(arg, "--quiet")) {
      args->quiet = true;
      continue;
    }
    if (arg[0] != '-') {
      if (args->trace_path)
        return obc_fail(OBC_EINVAL, "one TRACE expected, got '%s' and '%s'", args->trace_path, arg);
      args->trace_path = arg;
      continue;
    }
    const char *name = obc_option_matches(arg, "-o") ? "-o" : NULL;
    static const char *const options[] = {"--window",  "--topk",      "--recent",
                                          "--oracle",  "--gqa",       "--snapkv-kernel",
                                          "--buckets", "--precision", "--taylor-points",
                                          "--threads", "--scores-out"};
    for (size_t o = 0; !name && o < sizeof options / sizeof *options; o++)
      if (obc_option_matches(arg, options[o])) name = options[o];
    if (!name) return obc_fail(OBC_EINVAL, "unknown option '%s' (see obcache analyze --help)", arg);
    if (!(v = obc_option_value(argc, argv, &i, name)) || !v[0])
      return obc_fail(OBC_EINVAL, "%s: missing value", name);
    if (!strcmp(name, "-o"))
      args->out_dir = v;
    else if (!strcmp(name, "--window"))
      rc = obc_parse_size_list(name, v, c->windows, &c->n_windows, OBC_ANALYSIS_MAX_LIST);
    else if (!strcmp(name, "--topk"))
      rc = obc_parse_size_list(name, v, c->topk, &c->n_topk, OBC_ANALYSIS_MAX_LIST);
    else if (!strcmp(name, "--recent"))
      rc = obc_parse_size(name, v, &c->recent);
    else if (!strcmp(name, "--oracle")) {
      rc = oracle_steps_parse(name, v, &c->oracle);
    } else if (!strcmp(name, "--gqa")) {
      rc = parse_choice(name, v, gqa_names, 3, &choice);
      c->score_options.aggregation = (ObcGqaAggregation)choice;
    } else if (!strcmp(name, "--precision")) {
      rc = parse_choice(name, v, precision_names, 2, &choice);
      c->score_options.precision = choice ? OBC_PRECISION_DOUBLE : OBC_PRECISION_FLOAT;
    } else if (!strcmp(name, "--snapkv-kernel"))
      rc = obc_parse_size(name, v, &c->score_options.snapkv_kernel);
    else if (!strcmp(name, "--buckets"))
      rc = obc_parse_size(name, v, &c->buckets);
    else if (!strcmp(name, "--taylor-points"))
      rc = obc_parse_size(name, v, &c->taylor_points);
    else if (!strcmp(name, "--threads"))
      rc = obc_parse_size(name, v, &c->threads);
    else if (!strcmp(name, "--scores-out"))
      c->scores_out = v;
    if (rc) return rc;
  }
  if (!args->trace_path)
    return obc_fail(OBC_EINVAL, "missing TRACE (usage: obcache analyze TRACE [options])");
  return OBC_OK;
}

/* The default output folder: TRACE without ".h5", plus "-analysis". */
static void default_out_dir(const char *trace_path, char *out, size_t size) {
  size_t len = strlen(trace_path);
  if (len > 3 && !strcmp(trace_path + len - 3, ".h5")) len -= 3;
  snprintf(out, size, "%.*s-analysis", (int)len, trace_path);
}

/* The output folder must exist and be writable, or be creatable (its parent
 * exists and is writable). *exists tells which. */
static int check_out_dir(const char *dir, bool *exists) {
  struct stat st;
  *exists = stat(dir, &st) == 0;
  if (*exists) {
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

static void join_command_line(int argc, char **argv, char *out, size_t size) {
  size_t used = (size_t)snprintf(out, size, "obcache");
  for (int i = 0; i < argc && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, " %s", argv[i]);
}

int cmd_analyze(int argc, char **argv) {
  AnalyzeArgs args = {0};
  analysis_config_default(&args.config);
  bool help = false;
  int rc = parse_args(argc, argv, &args, &help);
  if (help) {
    print_help(stdout);
    return OBC_OK;
  }
  if (rc) return rc;

  char out_dir[4096];
  if (args.out_dir)
    snprintf(out_dir, sizeof out_dir, "%s", args.out_dir);
  else
    default_out_dir(args.trace_path, out_dir, sizeof out_dir);

  ObcTraceReader *reader = NULL;
  if ((rc = trace_open(args.trace_path, &reader))) return rc;
  const ObcTraceMeta *meta = trace_meta(reader);
  rc = analysis_config_resolve(&args.config, meta);
  if (rc && strncmp(obc_error_message(), "--", 2)) obc_fail_context(rc, "%s", args.trace_path);
  bool dir_existed = false;
  if (!rc) rc = check_out_dir(out_dir, &dir_existed);
  if (rc) {
    trace_close(reader);
    return rc;
  }
  obc_set_threads(args.config.threads);

  ObcAnalysisResult result;
  rc = analysis_run(reader, &args.config, !args.quiet && isatty(STDERR_FILENO), &result);
  if (rc) {
    trace_close(reader);
    return rc;
  }
  char command_line[4096];
  join_command_line(argc, argv, command_line, sizeof command_line);
  rc = obc_make_dirs(out_dir);
  if (!rc)
    rc =
        analysis_write_outputs(out_dir, args.trace_path, meta, &args.config, &result, command_line);
  if (rc) {
    /* Nothing of a failed run stays: not the scores file, not a new folder. */
    if (args.config.scores_out) remove(args.config.scores_out);
    if (!dir_existed) rmdir(out_dir);
  } else if (!args.quiet) {
    analysis_print_summary(stdout, args.trace_path, meta, &args.config, &result);
    printf("outputs in %s/ (%.1f s)\n", out_dir, result.seconds);
  }
  analysis_result_free(&result);
  trace_close(reader);
  return rc;
}
