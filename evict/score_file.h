/* Scores from a file (--score NAME=file:PATH[:DATASET]): a runtime row of
 * the table of score sources (evict/source.h) whose scores are read from an
 * HDF5 dataset (scores/scores_read.h) and kept as the generic quantities
 * are (--sinks, --recent, --protect, --alloc). The first spelling names the
 * file; after it NAME alone means the same file in the process, so lists of
 * score names (replay --sweep --scores) carry NAME. Outputs record NAME. */
#ifndef OBC_EVICT_SCORE_FILE_H
#define OBC_EVICT_SCORE_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "evict/policy.h"

#define EVICT_FILE_MAX_SCORES 16

/* Whether text is spelled NAME=file:... */
bool evict_score_file_spelled(const char *text);
/* Parses NAME=file:PATH[:DATASET] (scores_file_spec_parse), checks that
 * NAME is no row's and records it; NAME already recorded must name the
 * same file and dataset. A recorded NAME alone is taken as it is. Copies
 * NAME into name (size). */
int evict_score_file_resolve(const char *text, char *name, size_t size);
/* Records NAME, the score a command writes for each eval sample (eval
 * --score-cmd), with the file it is read from, or points NAME recorded so
 * at another file (path "" until a command has written one). NAME must be
 * spelled as in NAME=file: and be no row's name; a NAME recorded from
 * NAME=file: is refused. */
int evict_score_file_set(const char *name, const char *path, const char *dataset);
/* Forgets every recorded NAME: a command starts from none. */
void evict_score_file_clear(void);
/* Whether NAME was recorded by evict_score_file_resolve or _set. */
bool evict_score_file_known(const char *name);
/* The path and dataset ("" when left out) of a recorded NAME, or NULL. */
const char *evict_score_file_path(const char *name);
const char *evict_score_file_dataset(const char *name);

/* EvictSource.scores of the row: the file's first n positions. */
int evict_file_scores(TraceReader *reader, const EvictPolicy *policy, size_t n, double *scores,
                      size_t *window);

#endif
