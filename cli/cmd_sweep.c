/* `obcache sweep`: a grid of context lengths x needle depths, each cell
 * captured and analysed (sweep/capture_sweep.h). A sweep is a folder with a
 * plan (sweep/plan.h) whose cells any process can run (sweep/cell.h): one
 * command makes the plan, runs every cell and merges; or --plan makes the
 * plan, `sweep DIR --cell I | --shard i/N` runs cells (a Slurm array task
 * each, scripts/slurm/), and `sweep DIR --merge` builds summary.csv, the
 * heat maps and index.html from the finished cells. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture_args.h"
#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_options.h"
#include "common/obc_text.h"
#include "model/model.h"
#include "plots/plot.h"
#include "sweep/capture_sweep.h"
#include "sweep/plan.h"

typedef struct {
  CaptureArgs capture;
  SweepOptions sweep;
  bool plan_only, merge, no_figures;
  const char *cell, *shard;
  double stale_after;
} SweepArgs;

static const char *usage =
    "usage: obcache sweep --lengths N[,N...] --depths D[,D...] [options] -o DIR\n"
    "       obcache sweep --lengths ... --depths ... [options] --plan -o DIR\n"
    "       obcache sweep DIR [--cell I | --shard i/N] [--threads N]\n"
    "       obcache sweep DIR --merge\n"
    "\n"
    "Captures one Needle-in-a-Haystack trace per (length, depth) cell and analyses\n"
    "it. The first form does everything in one process; the others split it:\n"
    "--plan writes DIR/plan.json (every cell with its id, the model file and its\n"
    "checksum, and these options); `sweep DIR` runs the plan's cells that are not\n"
    "finished (all, one with --cell, or those with id % N == i with --shard i/N),\n"
    "each into DIR/cells/<id>/ under a lock, so that any number of processes on\n"
    "any machines sharing DIR can run them, and a killed run resumes where it\n"
    "stopped; `sweep DIR --merge` verifies the finished cells and writes\n"
    "DIR/summary.csv, DIR/plots/ (heat maps, if gnuplot is installed) and\n"
    "DIR/index.html, listing cells that are missing, failed or damaged.\n"
    "\n"
    "A cell's folder holds trace.h5, analysis/ (the analyze files), rows.csv,\n"
    "cell.json and complete.json (the checksums of its files, written last).\n"
    "summary.csv has the columns\n"
    "  " SWEEP_SUMMARY_HEADER
    "\n"
    "(needle = the needle's value; found = the answer contains it; answer_ok = the\n"
    "answer starts with it; recall = recall@k of the oracle at the main window,\n"
    "recent window 0, mean over heads; needle_kept = share of the needle span kept).\n";

static int reject_single_cell(void *target, const char *option, const char *value) {
  (void)target, (void)option, (void)value;
  return obc_fail(OBC_EINVAL, "sweep takes --lengths and --depths, not --length/--depth");
}

/* Parses argv into a; positional arguments into *args. */
static int parse_args(int argc, char **argv, SweepArgs *a, ObcArguments *args, bool print) {
  SweepOptions *s = &a->sweep;
  AnalysisConfig *c = &s->analysis;
  ObcSizeList lengths = {s->lengths, &s->n_lengths, SWEEP_MAX_CELLS};
  ObcSizeList depths = {s->depths, &s->n_depths, SWEEP_MAX_CELLS};
  ObcSizeList windows = {c->windows, &c->n_windows, OBC_ANALYSIS_MAX_LIST};
  ObcSizeList topk = {c->topk, &c->n_topk, OBC_ANALYSIS_MAX_LIST};
  const ObcOption own[] = {
      OBC_OPT_CUSTOM("--lengths", "N[,N...]", &lengths, obc_option_parse_size_list,
                     "prompt lengths in tokens", .show = obc_option_show_size_list),
      OBC_OPT_CUSTOM("--depths", "D[,D...]", &depths, obc_option_parse_size_list,
                     "needle depths in percent", .show = obc_option_show_size_list),
      OBC_OPT_TEXT("--output", "DIR", &a->capture.out_path,
                   "output folder (required to make a plan)", .alias = "-o"),
      OBC_OPT_CUSTOM("--length", "N", NULL, reject_single_cell, NULL),
      OBC_OPT_CUSTOM("--depth", "D", NULL, reject_single_cell, NULL),
      OBC_OPTION_HEADING("\nplan, cells and merge:"),
      OBC_OPT_FLAG("--plan", &a->plan_only,
                   "only write DIR/plan.json; run the cells with obcache sweep DIR"),
      OBC_OPT_TEXT("--cell", "I", &a->cell, "run only cell I of DIR's plan (with DIR)"),
      OBC_OPT_TEXT("--shard", "i/N", &a->shard,
                   "run only the cells with id % N == i (with DIR; a Slurm array task: "
                   "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)"),
      OBC_OPT_FLAG("--merge", &a->merge, "merge DIR's finished cells (with DIR)"),
      OBC_OPT_DOUBLE(
          "--stale-after", "S", &a->stale_after,
          "a cell's lock whose holder gave no sign of life for S seconds (killed on another "
          "machine) is taken over; a holder on this machine that is gone at once"),
      OBC_OPT_FLAG("--no-figures", &a->no_figures, "merge without drawing the heat maps"),
      OBC_OPTION_HEADING("\nanalysis:"),
      OBC_OPT_CUSTOM(
          "--window", "W[,W...]", &windows, obc_option_parse_size_list,
          "perturbation windows, the first is the main one (default: analyze's sweep 1, 2, 4, ... "
          "and its main window)"),
      OBC_OPT_CUSTOM("--topk", "K[,K...]", &topk, obc_option_parse_size_list,
                     "budgets, the first is the summary's k (default 40 and analyze's curve)"),
      OBC_OPT_SIZE("--recent", "R", &c->recent, "also analyse with a recent window of R positions"),
      OBC_OPT_CUSTOM(
          "--oracle", "1|T|N|a-b", &c->oracle, oracle_steps_parse_option,
          "oracle of the first decode step (default), all steps, step N or steps a-b (1-based)"),
      OBC_OPTION_HEADING(""),
  };
  ObcOption shared[CAPTURE_ARGS_N_OPTIONS];
  capture_args_options(&a->capture, shared);
  const ObcOptionList lists[] = {OBC_OPTION_LIST(own), OBC_OPTION_LIST(shared)};
  int rc = obc_options_parse("sweep", lists, 2, argc, argv, args);
  if (!rc && args->help && print) obc_options_print_usage(stdout, usage, lists, 2);
  return rc;
}

static void args_default(SweepArgs *a) {
  memset(a, 0, sizeof *a);
  capture_args_default(&a->capture);
  analysis_config_default(&a->sweep.analysis);
  static const size_t default_lengths[] = {1024, 2048}, default_depths[] = {0, 25, 50, 75, 100};
  memcpy(a->sweep.lengths, default_lengths, sizeof default_lengths);
  a->sweep.n_lengths = 2;
  memcpy(a->sweep.depths, default_depths, sizeof default_depths);
  a->sweep.n_depths = 5;
  a->stale_after = SWEEP_STALE_AFTER_S;
}

/* --- the plan's options ------------------------------------------------- */

/* Options that are not part of a plan: where it goes, which cells run, how
 * many threads, and the model (stored with its checksum). The first three
 * belong to the plan and cannot be given with DIR. */
static const SweepRunOption run_only[] = {
    {"-o", false},       {"--output", false}, {"--lengths", false},
    {"--depths", false}, {"--model", false},  {"--threads", false},
    {"--cell", false},   {"--shard", false},  {"--stale-after", false},
    {"--plan", true},    {"--merge", true},   {"--no-figures", true}};
enum { N_RUN_ONLY = sizeof run_only / sizeof *run_only };
/* Option values that name files, made absolute in the plan. */
static const char *const file_options[] = {"--haystack"};

static int make_plan(const SweepArgs *a, int argc, char **argv, SweepPlan *plan) {
  memset(plan, 0, sizeof *plan);
  char real[PATH_MAX];
  int rc = model_locate(a->capture.model_path, NULL, real);
  if (rc) return rc;
  snprintf(plan->version, sizeof plan->version, "%s", OBC_VERSION);
  snprintf(plan->model_path, sizeof plan->model_path, "%s", real);
  snprintf(plan->haystack, sizeof plan->haystack, "%s", a->capture.niah.haystack);
  plan->seed = a->capture.niah.seed;
  rc = sweep_plan_hash_model(real, &plan->model_hash, &plan->model_bytes);
  if (!rc) rc = sweep_plan_add_argv(plan, argc, argv, run_only, N_RUN_ONLY, file_options, 1);
  if (!rc)
    rc = sweep_plan_set_grid(plan, a->sweep.lengths, a->sweep.n_lengths, a->sweep.depths,
                             a->sweep.n_depths);
  return rc;
}

/* The settings of a plan's cells: its options parsed as the command line was. */
static int plan_args(const SweepPlan *plan, SweepArgs *a) {
  char *argv[SWEEP_PLAN_MAX_OPTIONS + 1];
  argv[0] = "sweep";
  for (size_t i = 0; i < plan->n_options; i++) argv[i + 1] = plan->options[i];
  args_default(a);
  ObcArguments args;
  int rc = parse_args((int)plan->n_options + 1, argv, a, &args, false);
  if (!rc && (args.help || args.n_positional || a->capture.out_path))
    rc = obc_fail(OBC_EFORMAT, "plan.json: \"options\" are not sweep options");
  if (rc) return obc_fail_context(rc, "the options of plan.json");
  a->capture.model_path = plan->model_path;
  return OBC_OK;
}

/* --- running ------------------------------------------------------------ */

/* Loads the plan's model (or --model, which must have the same checksum). */
static int load_model(const SweepPlan *plan, const char *override, const CaptureArgs *a,
                      Model **model) {
  const char *path = override ? override : plan->model_path;
  int rc = sweep_plan_check_model(plan, path);
  if (rc) return rc;
  rc = model_load_with(path, &(ModelLoadOptions){.weights = a->weights}, model);
  if (!rc && !(*model)->tokenizer)
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer", (*model)->path);
  return rc;
}

static int check_cells(const Model *model, const SweepOptions *o, const SweepPlan *plan) {
  size_t context = model->config.context_length;
  for (size_t i = 0; i < plan->n_cells; i++)
    if (context && plan->cells[i].length + o->capture.decode > context)
      return obc_fail(OBC_EINVAL,
                      "cell %zu: length %zu + --decode %zu is beyond %s's context of %zu", i,
                      plan->cells[i].length, o->capture.decode, model->config.name, context);
  return OBC_OK;
}

static int run_plan(const char *dir, const SweepPlan *plan, const SweepArgs *given,
                    const char *command_line) {
  SweepArgs a;
  int rc = plan_args(plan, &a);
  SweepSelection selection;
  if (!rc)
    rc = sweep_selection_parse(given->cell, given->shard, given->stale_after, plan, &selection);
  size_t *ids = rc ? NULL : obc_calloc(plan->n_cells, sizeof *ids, "the cells to run");
  size_t n = 0;
  SweepRunCounts counts = {0};
  if (!rc && !ids) rc = OBC_ENOMEM;
  if (!rc) rc = sweep_pending_cells(dir, plan, &selection, ids, &n, &counts);
  Model *model = NULL;
  if (!rc && n) rc = load_model(plan, given->capture.model_path, &a.capture, &model);
  if (!rc && n) {
    a.sweep.niah = a.capture.niah;
    a.sweep.capture = a.capture.capture;
    a.sweep.capture.threads = given->capture.capture.threads;
    a.sweep.capture.progress =
        isatty(fileno(stderr)) ? CAPTURE_PROGRESS_LIVE : CAPTURE_PROGRESS_OFF;
    a.sweep.command_line = command_line;
    rc = check_cells(model, &a.sweep, plan);
    SweepModelOptions cells = {model, &a.sweep};
    if (!rc)
      rc = sweep_run_cells(sweep_run_cell_with, &cells, plan, dir, &selection, ids, n, &counts);
  }
  sweep_run_counts_print("sweep", dir, "cells", &counts);
  model_free(model);
  free(ids);
  return rc;
}

/* --- merging ------------------------------------------------------------ */

static int merge(const char *dir, const SweepPlan *plan, const SweepArgs *a) {
  SweepGridStatus status;
  int rc = sweep_merge_summary(dir, plan, a->stale_after, &status);
  static const char *const figures[] = {"plots/sweep_needle.png", "plots/sweep_recall.png"};
  size_t n_figures = 0;
  if (!rc && !a->no_figures && status.n_done) {
    char out_dir[4096];
    snprintf(out_dir, sizeof out_dir, "%s/plots", dir);
    PlotOptions options = {
        .dir = dir, .out_dir = out_dir, .formats = PLOT_PNG, .only = "sweep_needle,sweep_recall"};
    PlotResult result;
    if (plot_render(&options, &result)) {
      fprintf(stderr, "sweep: figures not drawn: %s\n", obc_error_message());
      obc_error_clear();
    } else {
      n_figures = 2;
    }
  }
  if (!rc) rc = sweep_merge_index(dir, plan, &status, figures, n_figures);
  if (!rc) printf("wrote %s/summary.csv and %s/index.html\n", dir, dir);
  sweep_grid_status_free(&status);
  return rc;
}

/* --- the command -------------------------------------------------------- */

/* `sweep DIR ...`: only the run-time options may be given (run_only from
 * --model on; -o, --lengths and --depths belong to the plan). */
static int check_dir_mode(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] != '-') continue;
    int k = sweep_run_option_index(run_only, N_RUN_ONLY, argv[i]);
    if (k < 3)
      return obc_fail(OBC_EINVAL,
                      "obcache sweep DIR takes its settings from DIR/plan.json; %s cannot be "
                      "given here (only --cell, --shard, --merge, --threads, --model, "
                      "--stale-after, --no-figures)",
                      argv[i]);
    if (!run_only[k].flag && !strchr(argv[i], '=')) i++;
  }
  return OBC_OK;
}

int cmd_sweep(int argc, char **argv) {
  SweepArgs a;
  args_default(&a);
  ObcArguments args;
  int rc = parse_args(argc, argv, &a, &args, true);
  if (rc || args.help) return rc;
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache sweep --help)",
                    args.positional[1]);
  char command_line[1024];
  obc_text_command_line(argc, argv, command_line, sizeof command_line);
  SweepPlan plan;
  const char *dir = args.n_positional ? args.positional[0] : a.capture.out_path;
  if (args.n_positional) {
    if ((rc = check_dir_mode(argc, argv))) return rc;
    if ((rc = sweep_plan_read(dir, &plan))) return rc;
    if ((rc = sweep_plan_check_command(dir, &plan, "sweep"))) {
      sweep_plan_free(&plan);
      return rc;
    }
    rc = a.merge ? merge(dir, &plan, &a) : run_plan(dir, &plan, &a, command_line);
    sweep_plan_free(&plan);
    return rc;
  }
  if (!dir) return obc_fail(OBC_EINVAL, "missing -o DIR (see obcache sweep --help)");
  if (a.merge || a.cell || a.shard)
    return obc_fail(OBC_EINVAL,
                    "--merge, --cell and --shard take a sweep folder: obcache "
                    "sweep DIR --merge");
  rc = sweep_check_grid(NULL, &a.sweep);
  if (!rc) rc = make_plan(&a, argc, argv, &plan);
  if (!rc) rc = sweep_plan_write_or_match(dir, &plan);
  if (!rc && a.plan_only)
    printf("wrote %s/plan.json: %zu cells; run them with obcache sweep %s [--shard i/N]\n", dir,
           plan.n_cells, dir);
  if (!rc && !a.plan_only) rc = run_plan(dir, &plan, &a, command_line);
  if (!rc && !a.plan_only) rc = merge(dir, &plan, &a);
  sweep_plan_free(&plan);
  return rc;
}
