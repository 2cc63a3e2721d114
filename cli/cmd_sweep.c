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
#include "common/obc_options.h"
#include "model/model.h"

static void print_help(FILE *out, const ObcOptionList *lists, size_t n_lists) {
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
          "\n");
  obc_options_print_help(out, lists, n_lists);
}

static int reject_single_cell(void *target, const char *option, const char *value) {
  (void)target, (void)option, (void)value;
  return obc_fail(OBC_EINVAL, "sweep takes --lengths and --depths, not --length/--depth");
}

/* Parses argv into a and s; prints the help instead when asked (*help). */
static int parse_args(int argc, char **argv, CaptureArgs *a, SweepOptions *s, bool *help) {
  AnalysisConfig *c = &s->analysis;
  ObcSizeList lengths = {s->lengths, &s->n_lengths, SWEEP_MAX_CELLS};
  ObcSizeList depths = {s->depths, &s->n_depths, SWEEP_MAX_CELLS};
  ObcSizeList windows = {c->windows, &c->n_windows, OBC_ANALYSIS_MAX_LIST};
  ObcSizeList topk = {c->topk, &c->n_topk, OBC_ANALYSIS_MAX_LIST};
  const ObcOption own[] = {
      {"--lengths", NULL, "N[,N...]", "prompt lengths in tokens", "1024,2048", OBC_OPTION_CUSTOM,
       &lengths, obc_option_parse_size_list, NULL},
      {"--depths", NULL, "D[,D...]", "needle depths in percent", "0,25,50,75,100",
       OBC_OPTION_CUSTOM, &depths, obc_option_parse_size_list, NULL},
      {"-o", NULL, "DIR", "output folder (required)", NULL, OBC_OPTION_TEXT, &a->out_path, NULL,
       NULL},
      {"--length", NULL, "N", NULL, NULL, OBC_OPTION_CUSTOM, NULL, reject_single_cell, NULL},
      {"--depth", NULL, "D", NULL, NULL, OBC_OPTION_CUSTOM, NULL, reject_single_cell, NULL},
      OBC_OPTION_HEADING("\nanalysis:"),
      {"--window", NULL, "W[,W...]",
       "perturbation windows, the first is the main one (default: analyze's sweep 1, 2, 4, ... "
       "and its main window)",
       NULL, OBC_OPTION_CUSTOM, &windows, obc_option_parse_size_list, NULL},
      {"--topk", NULL, "K[,K...]",
       "budgets, the first is the summary's k (default 40 and analyze's curve)", NULL,
       OBC_OPTION_CUSTOM, &topk, obc_option_parse_size_list, NULL},
      {"--recent", NULL, "R", "also analyse with a recent window of R positions", NULL,
       OBC_OPTION_SIZE, &c->recent, NULL, NULL},
      {"--oracle", NULL, "1|T|N|a-b",
       "oracle of the first decode step (default), all steps, step N or steps a-b (1-based)", NULL,
       OBC_OPTION_CUSTOM, &c->oracle, oracle_steps_parse_option, NULL},
      OBC_OPTION_HEADING(""),
  };
  ObcOption shared[CAPTURE_ARGS_N_OPTIONS];
  capture_args_options(a, shared);
  const ObcOptionList lists[] = {OBC_OPTION_LIST(own), OBC_OPTION_LIST(shared)};
  ObcArguments args;
  int rc = obc_options_parse("sweep", lists, 2, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    print_help(stdout, lists, 2);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache sweep --help)",
                    args.positional[0]);
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
  if (help) return 0;
  if (!a.out_path) return obc_fail(OBC_EINVAL, "missing -o DIR (see obcache sweep --help)");
  char command_line[1024];
  capture_args_command_line(argc, argv, command_line, sizeof command_line);
  s.niah = a.niah;
  s.capture = a.capture;
  s.capture.progress = isatty(fileno(stderr));
  s.command_line = command_line;

  Model *model = NULL;
  rc = model_load_with(a.model_path, &(ModelLoadOptions){a.weights}, &model);
  if (!rc && !model->tokenizer)
    rc = obc_fail(OBC_EINVAL, "%s: the model has no tokenizer", model->path);
  if (!rc) rc = sweep_run(model, &s, a.out_path);
  if (!rc) printf("wrote %s/summary.csv\n", a.out_path);
  model_free(model);
  return rc;
}
