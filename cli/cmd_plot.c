/* `obcache plot DIR`: the command-line face of plots/plot.h. Parses the
 * options, renders the figures of an analysis or sweep folder with gnuplot
 * and prints the files it wrote, one per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"
#include "plots/plot.h"

/* The usage text of plot --help: what it does, its figures, where the
 * scripts are read from (malloc'd; NULL when out of memory). */
static char *plot_usage(const char *scripts_dir) {
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (!out) return NULL;
  fputs(
      "usage: obcache plot DIR [-o OUTDIR] [--format png,svg] [--window W] [--k K]\n"
      "                        [--only NAME[,NAME...]] [--jobs N]\n"
      "\n"
      "Renders the figures of an analysis folder (DIR/report.json and the CSVs written\n"
      "by `obcache analyze TRACE -o DIR`), of a sweep folder (DIR/summary.csv), of a\n"
      "replay sweep (DIR/replay_sweep.csv of `obcache replay --sweep`), of a dynamic-\n"
      "eviction run (DIR/dynamic.csv of `obcache dynamic`) or of an eval\n"
      "folder (DIR/accuracy.csv of `obcache eval`; also OUTDIR/index.html) as PNG\n"
      "and SVG images, with gnuplot (an external program found on PATH; install\n"
      "gnuplot-nox). Titles name the model, the window and the budget from report.json.\n"
      "Each image is written under a temporary name and renamed when gnuplot succeeded;\n"
      "the files written are printed one per line. Figures whose data file is missing\n"
      "are skipped with a note on stderr.\n"
      "\n"
      "figures (OUTDIR/NAME.png and OUTDIR/NAME.svg):\n",
      out);
  size_t count = 0;
  const PlotFigure *figures = plot_figures(&count);
  for (size_t i = 0; i < count; i++) {
    fprintf(out, "  %s  (%s, plots/%s)\n", figures[i].name, figures[i].data, figures[i].script);
    fprintf(out, "%6s", "");
    obc_text_print_wrapped(out, figures[i].question, 6, 6, 80);
  }
  fprintf(out,
          "\n"
          "The gnuplot scripts are read from %s\n"
          "(override with $OBC_PLOTS_DIR); edit them to change a figure, and re-render one\n"
          "by hand as shown in plots/README.md, e.g.\n"
          "  gnuplot -e \"data='DIR/recall.csv'; window=16; outfile='k.png'\" \\\n"
          "    plots/recall_k.gp\n",
          scripts_dir);
  if (fclose(out)) {
    free(text);
    return NULL;
  }
  return text;
}

static void show_formats(const void *target, char *text, size_t size) {
  unsigned formats = *(const unsigned *)target;
  snprintf(text, size, "%s%s%s", formats & PLOT_PNG ? "png" : "",
           formats == (PLOT_PNG | PLOT_SVG) ? "," : "", formats & PLOT_SVG ? "svg" : "");
}

/* "png", "svg" or "png,svg" -> PLOT_PNG | PLOT_SVG. */
static int parse_formats(void *target, const char *option, const char *text) {
  (void)option;
  unsigned *formats = target;
  char buf[64], *items[8];
  size_t n = 0;
  int rc = obc_split_list("--format", text, buf, sizeof buf, items, 8, &n);
  if (rc) return rc;
  *formats = 0;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(items[i], "png"))
      *formats |= PLOT_PNG;
    else if (!strcmp(items[i], "svg"))
      *formats |= PLOT_SVG;
    else
      return obc_fail(OBC_EINVAL, "--format: unknown format '%s' (expected png, svg or png,svg)",
                      items[i]);
  }
  return OBC_OK;
}

int cmd_plot(int argc, char **argv) {
  PlotOptions options = {.formats = PLOT_PNG | PLOT_SVG};
  const ObcOption table[] = {
      OBC_OPT_TEXT("--output", "OUTDIR", &options.out_dir, "output folder, created if needed",
                   .alias = "-o", .default_text = "DIR/plots"),
      OBC_OPT_CUSTOM("--format", "LIST", &options.formats, parse_formats,
                     "png, svg or png,svg (PNG via pngcairo when gnuplot has it, else png)",
                     .show = show_formats),
      OBC_OPT_SIZE(
          "--window", "W", &options.window,
          "the perturbation window the recall_k, needle_k, bias_* and recall_layers figures show "
          "(default: the report's main_window)"),
      OBC_OPT_SIZE(
          "--topk", "K", &options.k,
          "the budget of recall_window, bias_* and recall_layers (default: the report's main_k, "
          "else 40); for a sweep, the k rows of summary.csv to draw"),
      OBC_OPT_SIZE("--k", "K", &options.k, NULL, .renamed = "--topk"),
      OBC_OPT_TEXT("--only", "LIST", &options.only,
                   "draw only these figures (comma-separated names below)"),
      OBC_OPT_SIZE("--jobs", "N", &options.jobs,
                   "gnuplot processes at once (the images are the same for any N; at most 16)",
                   .default_text = "one per processor"),
  };
  const ObcOptionList list = OBC_OPTION_LIST(table);
  ObcArguments args;
  int parsed = obc_options_parse("plot", &list, 1, argc, argv, &args);
  if (parsed) return parsed;
  if (args.help) {
    char *usage = plot_usage(plot_scripts_dir(&options));
    if (!usage) return obc_fail(OBC_ENOMEM, "plot --help: out of memory");
    obc_options_print_usage(stdout, usage, &list, 1);
    free(usage);
    return 0;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "one folder expected, got %s and %s", args.positional[0],
                    args.positional[1]);
  if (args.n_positional) options.dir = args.positional[0];
  if (!options.dir)
    return obc_fail(OBC_EINVAL,
                    "missing the analysis folder (usage: obcache plot DIR [options]; "
                    "see --help)");
  PlotResult *result = calloc(1, sizeof *result);
  if (!result) return obc_fail(OBC_ENOMEM, "plot: out of memory");
  int rc = plot_render(&options, result);
  if (!rc) {
    for (size_t i = 0; i < result->n_skipped; i++)
      fprintf(stderr, "obcache plot: skipped %s\n", result->skipped[i]);
    for (size_t i = 0; i < result->n_written; i++) printf("%s\n", result->written[i]);
  }
  free(result);
  return rc;
}
