/* Inputs of the figures of eviction folders (evict/): a replay sweep folder
 * (replay_sweep.csv + replay_sweep.json of `obcache replay --sweep`) and a
 * dynamic-eviction folder (dynamic.csv + dynamic.json of `obcache dynamic`).
 * Gives the gnuplot variables those scripts take: the scores
 * (or budgets) present in the CSV in file order, the model's name and
 * whether the model was run. */
#ifndef OBC_PLOT_REPLAY_H
#define OBC_PLOT_REPLAY_H

#include "plots/plot_gnuplot.h"

/* Adds data, scores, model (and with_model / budgets) for the CSV `data`
 * of dir (replay_sweep.csv or dynamic.csv). */
int plot_replay_args(const char *dir, const char *data, PlotArgs *args);

#endif
