/* Finding and running gnuplot, the external program that draws every figure.
 * gnuplot is looked up on PATH once, before anything is written, so that a
 * machine without it gets one clear line and no half-made output folder. */
#ifndef OBC_PLOT_GNUPLOT_H
#define OBC_PLOT_GNUPLOT_H

#include <stddef.h>

typedef struct {
  char path[4096]; /* the gnuplot executable found on PATH */
} PlotGnuplot;

/* Finds gnuplot on PATH; OBC_ENOTFOUND with the install hint when absent. */
int plot_gnuplot_find(PlotGnuplot *gnuplot);

/* Runs `gnuplot -e ASSIGNMENTS SCRIPT` with its output captured in log_path
 * (removed afterwards). Fails with OBC_EEXTERNAL and gnuplot's last message
 * when it exits non-zero or is killed. */
int plot_gnuplot_run(const PlotGnuplot *gnuplot, const char *script, const char *assignments,
                     const char *log_path);

/* Gnuplot -e text of "name=value;" assignments, built up in a fixed buffer. */
typedef struct {
  char text[16384];
  size_t used;
  int overflow; /* set when text was too small; plot_args_check fails then */
} PlotArgs;

void plot_args_init(PlotArgs *args);
/* name='value' (single quotes; a quote inside is doubled, as gnuplot wants). */
void plot_args_string(PlotArgs *args, const char *name, const char *value);
/* name=value for a whole number. */
void plot_args_size(PlotArgs *args, const char *name, size_t value);
/* name=value for a real number (%.6g). */
void plot_args_double(PlotArgs *args, const char *name, double value);
int plot_args_check(const PlotArgs *args);

#endif
