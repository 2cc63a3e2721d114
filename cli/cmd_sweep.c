/* `obcache sweep`: a grid of context lengths x needle depths, each cell
 * captured and analysed (sweep/capture_sweep.h), with DIR/summary.csv over the grid.
 * Takes every capture option (but --length/--depth) and the main analysis
 * settings; everything is checked before the first cell runs. */
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture_args.h"
#include "sweep/capture_sweep.h"
#include "cli/commands.h"
#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "model/model.h"

static void print_help(FILE *out) {
  fprintf(out,
          "usage: obcache sweep --lengths N[,N...] --depths D[,D...] [options] -o DIR\n"
          "\n"
          "Captures one Needle-in-a-Haystack trace per (length, depth) cell and analyses\n"
          "it: DIR/L<length>_D<depth>.h5, DIR/L<length>_D<depth>/ (the analyze files),\n"
          "and DIR/summary.csv with the columns\n"
          "  length,depth,needle,found,answer_ok,score,k,recall,needle_kept\n"
          "(needle = the needle's value; found = the answer contains it; answer_ok = the\n"
          "answer starts with it; recall = recall@k of the oracle at the main window,\n"
          "recent window 0, mean over heads; needle_kept = share of the needle span kept).\n"
          "Defaults: --lengths 1024,2048 --depths 0,25,50,75,100.\n"
          "\n"
          "analysis:\n"
          "  --window W[,W...]    perturbation windows, the first is the main one\n"
          "                       (default: analyze's sweep 1, 2, 4, ... and its main window)\n"
          "  --topk K[,K...]      budgets, the first is the summary's k (default 40 and\n"
          "                       analyze's curve)\n"
          "  --recent R           also analyse with a recent window of R positions\n"
          "  --oracle 1|T|N|a-b   oracle of the first decode step (default), all steps, step N\n"
          "                       or steps a-b (1-based)\n"
          "\n");
  capture_args_print_help(out);
}

static int parse_args(int argc, char **argv, CaptureArgs *a, SweepOptions *s, bool *help) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      *help = true;
      return OBC_OK;
    }
    int rc = capture_args_parse(argc, argv, &i, a);
    if (rc < 0) return rc;
    if (rc == 1) {
      if (a->length_given || a->depth_given)
        return obc_fail(OBC_EINVAL, "sweep takes --lengths and --depths, not --length/--depth");
      continue;
    }
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    static const char *const valued[] = {"--lengths", "--depths", "--window",
                                         "--topk",    "--recent", "--oracle"};
    bool known = false;
    for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(arg, valued[k]);
    if (!known) return obc_fail(OBC_EINVAL, "unknown option '%s' (see obcache sweep --help)", arg);
    if (!v) return obc_fail(OBC_EINVAL, "%s: missing value", arg);
    i++;
    ObcAnalysisConfig *c = &s->analysis;
    if (!strcmp(arg, "--lengths")) {
      s->n_lengths = 0;
      rc = obc_parse_size_list(arg, v, s->lengths, &s->n_lengths, SWEEP_MAX_CELLS);
    } else if (!strcmp(arg, "--depths")) {
      s->n_depths = 0;
      rc = obc_parse_size_list(arg, v, s->depths, &s->n_depths, SWEEP_MAX_CELLS);
    } else if (!strcmp(arg, "--window")) {
      c->n_windows = 0;
      rc = obc_parse_size_list(arg, v, c->windows, &c->n_windows, OBC_ANALYSIS_MAX_LIST);
    } else if (!strcmp(arg, "--topk")) {
      c->n_topk = 0;
      rc = obc_parse_size_list(arg, v, c->topk, &c->n_topk, OBC_ANALYSIS_MAX_LIST);
    } else if (!strcmp(arg, "--recent")) {
      rc = obc_parse_size(arg, v, &c->recent);
    } else if (!strcmp(arg, "--oracle")) {
      rc = oracle_steps_parse(arg, v, &c->oracle);
    }
    if (rc) return rc;
  }
  return OBC_OK;
}

int cmd_sweep(int argc, char **argv) {
  CaptureArgs a;
  capture_args_default(&a);
  SweepOptions s;
  memset(&s, 0, sizeof s);
  analysis_config_default(&s.analysis);
  static const size_t default_lengths[] = {1024, 2048}, default_depths[] = {0, 25, 50, 75, 100};
  memcpy(s.lengths, default_lengths, sizeof default_lengths);
  s.n_lengths = 2;
  memcpy(s.depths, default_depths, sizeof default_depths);
  s.n_depths = 5;
  bool help = false;
  int rc = parse_args(argc, argv, &a, &s, &help);
  if (rc) return rc;
  if (help) {
    print_help(stdout);
    return 0;
  }
  if (!a.out_path) return obc_fail(OBC_EINVAL, "missing -o DIR (see obcache sweep --help)");
  char command_line[1024];
  capture_args_command_line(argc, argv, command_line, sizeof command_line);
  s.niah = a.niah;
  s.capture = a.capture;
  s.capture.progress = isatty(fileno(stderr));
  s.command_line = command_line;

  Model *model = NULL;
  rc = model_load(a.model_path, &model);
  if (!rc && !model->tokenizer)
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer", model->path);
  if (!rc) rc = sweep_run(model, &s, a.out_path);
  if (!rc) printf("wrote %s/summary.csv\n", a.out_path);
  model_free(model);
  return rc;
}
