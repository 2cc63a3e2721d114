/* `obcache plot DIR`: the command-line face of plots/plot.h. Parses the
 * options, renders the figures of an analysis or sweep folder with gnuplot
 * and prints the files it wrote, one per line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "plots/plot.h"

/* Prints text wrapped at width columns, every line indented by indent. */
static void print_wrapped(FILE *out, const char *text, size_t indent, size_t width) {
  size_t column = indent;
  fprintf(out, "%*s", (int)indent, "");
  while (*text) {
    size_t word = strcspn(text, " ");
    if (column > indent && column + 1 + word > width) {
      fprintf(out, "\n%*s", (int)indent, "");
      column = indent;
    } else if (column > indent) {
      fputc(' ', out);
      column++;
    }
    fprintf(out, "%.*s", (int)word, text);
    column += word;
    text += word;
    while (*text == ' ') text++;
  }
  fputc('\n', out);
}

static void print_help(FILE *out, const char *scripts_dir) {
  fprintf(out,
          "usage: obcache plot DIR [-o OUTDIR] [--format png,svg] [--window W] [--k K]\n"
          "                        [--only NAME[,NAME...]]\n"
          "\n"
          "Renders the figures of an analysis folder (DIR/report.json and the CSVs written\n"
          "by `obcache analyze TRACE -o DIR`), of a sweep folder (DIR/summary.csv), of a\n"
          "replay sweep (DIR/replay_sweep.csv of `obcache replay --sweep`) or of a dynamic-\n"
          "eviction run (DIR/dynamic.csv of `obcache replay --dynamic`) as PNG\n"
          "and SVG images, with gnuplot (an external program found on PATH; install\n"
          "gnuplot-nox). Titles name the model, the window and the budget from report.json.\n"
          "Each image is written under a temporary name and renamed when gnuplot succeeded;\n"
          "the files written are printed one per line. Figures whose data file is missing\n"
          "are skipped with a note on stderr.\n"
          "\n"
          "options:\n"
          "  -o OUTDIR        output folder (default DIR/plots; created if needed)\n"
          "  --format LIST    png, svg or png,svg (default png,svg; PNG via pngcairo when\n"
          "                   gnuplot has it, else png)\n"
          "  --window W       the perturbation window the recall_k, needle_k, bias_* and\n"
          "                   recall_layers figures show (default: the report's main_window)\n"
          "  --k K            the budget of recall_window, bias_* and recall_layers\n"
          "                   (default: the report's main_k, else 40); for a sweep, the k\n"
          "                   rows of summary.csv to draw\n"
          "  --only LIST      draw only these figures (comma-separated names below)\n"
          "\n"
          "figures (OUTDIR/NAME.png and OUTDIR/NAME.svg):\n");
  size_t count = 0;
  const PlotFigure *figures = plot_figures(&count);
  for (size_t i = 0; i < count; i++) {
    fprintf(out, "  %s  (%s, plots/%s)\n", figures[i].name, figures[i].data, figures[i].script);
    print_wrapped(out, figures[i].question, 6, 80);
  }
  fprintf(out,
          "\n"
          "The gnuplot scripts are read from %s\n"
          "(override with $OBC_PLOTS_DIR); edit them to change a figure, and re-render one by\n"
          "hand as shown in plots/README.md, e.g.\n"
          "  gnuplot -e \"data='DIR/recall.csv'; window=16; outfile='k.png'\" plots/recall_k.gp\n",
          scripts_dir);
}

/* "png", "svg" or "png,svg" -> PLOT_PNG | PLOT_SVG. */
static int parse_formats(const char *text, unsigned *formats) {
  char buf[64];
  if (strlen(text) >= sizeof buf)
    return obc_fail(OBC_EINVAL, "--format: expected png, svg or png,svg, got '%s'", text);
  snprintf(buf, sizeof buf, "%s", text);
  *formats = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (!strcmp(tok, "png")) *formats |= PLOT_PNG;
    else if (!strcmp(tok, "svg")) *formats |= PLOT_SVG;
    else return obc_fail(OBC_EINVAL, "--format: unknown format '%s' (expected png, svg or png,svg)", tok);
  }
  if (!*formats) return obc_fail(OBC_EINVAL, "--format: empty list (expected png, svg or png,svg)");
  return OBC_OK;
}

int cmd_plot(int argc, char **argv) {
  PlotOptions options = {.formats = PLOT_PNG | PLOT_SVG};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      print_help(stdout, plot_scripts_dir(&options));
      return 0;
    }
    int takes_value = !strcmp(arg, "-o") || !strcmp(arg, "--output") ||
                      !strcmp(arg, "--format") || !strcmp(arg, "--window") ||
                      !strcmp(arg, "--k") || !strcmp(arg, "--only");
    if (takes_value && i + 1 >= argc) return obc_fail(OBC_EINVAL, "%s: missing value", arg);
    int rc = OBC_OK;
    if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) options.out_dir = argv[++i];
    else if (!strcmp(arg, "--format")) rc = parse_formats(argv[++i], &options.formats);
    else if (!strcmp(arg, "--window")) rc = obc_parse_size("--window", argv[++i], &options.window);
    else if (!strcmp(arg, "--k")) rc = obc_parse_size("--k", argv[++i], &options.k);
    else if (!strcmp(arg, "--only")) options.only = argv[++i];
    else if (arg[0] == '-' && arg[1]) rc = obc_fail(OBC_EINVAL, "unknown option %s (see obcache plot --help)", arg);
    else if (options.dir) rc = obc_fail(OBC_EINVAL, "one folder expected, got %s and %s", options.dir, arg);
    else options.dir = arg;
    if (rc) return rc;
  }
  if (!options.dir)
    return obc_fail(OBC_EINVAL, "missing the analysis folder (usage: obcache plot DIR [options]; "
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
