/* Finding and running gnuplot, the external program that draws every figure.
 * gnuplot is looked up on PATH once, before anything is written, so that a
 * machine without it gets one clear line and no half-made output folder. */
#ifndef OBC_PLOT_GNUPLOT_H
#define OBC_PLOT_GNUPLOT_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
  char path[4096]; /* the gnuplot executable found on PATH */
} PlotGnuplot;

/* Finds gnuplot on PATH; OBC_ENOTFOUND with the install hint when absent. */
int plot_gnuplot_find(PlotGnuplot *gnuplot);

/* Starts `gnuplot -e ASSIGNMENTS SCRIPT` with its output going to log_path,
 * and registers the child with obc_pending_child_add (Ctrl-C kills it before
 * the pending files go). Several may run at once; reap them with
 * plot_gnuplot_wait. */
int plot_gnuplot_start(const PlotGnuplot *gnuplot, const char *script, const char *assignments,
                       const char *log_path, pid_t *child);
/* Waits for any started gnuplot to end: *child and its wait status. It
 * reaps whichever child ends first, so call it only while the gnuplots are
 * the process's only children (true of `obcache plot` and `sweep`). */
int plot_gnuplot_wait(pid_t *child, int *status);
/* The verdict on a gnuplot that ended with status: OBC_OK, or
 * OBC_EEXTERNAL with the one-line message (the script, how it ended and
 * gnuplot's last message from log_path) in message. Removes log_path. The
 * caller decides whether to raise it with obc_fail (only the first failure
 * of several running at once is reported). */
int plot_gnuplot_outcome(const char *script, int status, const char *log_path, char *message,
                         size_t size);

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
