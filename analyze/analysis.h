/* The analyser's driver: streams a trace one (layer, KV head) at a time,
 * computes every score and exact error for a list of perturbation windows
 * (scores/scores.h) and the true eviction error (oracle/oracle.h), and
 * reduces them at once to recall, rank correlation, needle retention and
 * position-bias figures, so memory does not grow with the number of layers.
 * analysis_write_outputs (analyze/report.c) turns the result into the files of
 * the analysis folder. */
#ifndef OBC_ANALYSIS_H
#define OBC_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "scores/scores.h"
#include "scores/scores_read.h"
#include "oracle/oracle_steps.h"
#include "traces/trace.h"

#define OBC_ANALYSIS_MAX_LIST 64 /* longest --window / --topk list */
#define OBC_ANALYSIS_DEFAULT_MAIN_WINDOW 64
#define OBC_ANALYSIS_DEFAULT_MAIN_K 40
#define OBC_ANALYSIS_DEFAULT_BUCKETS 20
#define OBC_ANALYSIS_DEFAULT_TAYLOR_POINTS 4000
#define OBC_ANALYSIS_MAX_REFERENCES 3
#define OBC_ANALYSIS_MAX_FILE_SCORES 8 /* --score NAME=file:PATH[:DATASET] */

/* What to compute. Lists hold what the user asked for; analysis_config_resolve
 * fills the defaults from the trace, sorts and validates. */
typedef struct {
  size_t windows[OBC_ANALYSIS_MAX_LIST]; /* ascending, distinct after resolve */
  size_t n_windows;                      /* 0 = default sweep 1, 2, 4, ..., max */
  size_t main_window;                    /* first --window value; 0 = default */
  size_t topk[OBC_ANALYSIS_MAX_LIST];    /* ascending, distinct after resolve */
  size_t n_topk;                         /* 0 = default curve */
  size_t main_k;                         /* first --topk value; 0 = default */
  bool topk_given;                       /* user list (strict checks) */
  size_t recent;                         /* R; recall is reported for r = 0 and r = R */
  OracleSteps oracle;                    /* the main reference (--oracle); default oracle@1 */
  ScoreOptions score_options;
  size_t buckets;         /* structural-bias buckets B */
  size_t taylor_points;   /* points of taylor.csv in total */
  size_t threads;         /* 0 = OpenMP default */
  const char *scores_out; /* per-token quantities at the main window; NULL = none */
  /* Scores read from files (scores/scores_read.h), ranked beside the
   * quantities: they have no window. */
  ScoresFileSpec file_scores[OBC_ANALYSIS_MAX_FILE_SCORES];
  size_t n_file_scores;
} AnalysisConfig;

void analysis_config_default(AnalysisConfig *config);

/* Fills the defaults that depend on the trace and checks every value against
 * it; errors name the option and the valid range. */
int analysis_config_resolve(AnalysisConfig *config, const TraceMeta *meta);

/* Spearman pairs: each quantity against the oracle(s), and each Taylor score
 * against its exact counterpart. reference is a quantity index, or
 * OBC_REF_ORACLE(i) for the result's oracle reference i. */
#define OBC_REF_ORACLE(i) (-1 - (int)(i))
typedef struct {
  ScoreQuantity quantity;
  int reference;
} AnalysisSpearmanPair;

/* One point of the Taylor-versus-exact scatter (taylor.csv). */
typedef struct {
  size_t layer, kv_head, position;
  double exact_v, obc_v, exact_k, obc_k, exact_vk, obc_vk, remove, oracle;
} AnalysisTaylorPoint;

/* Everything the report is made of. "head" below is the flat index
 * layer * n_kv_heads + kv_head. */
typedef struct {
  size_t n_layers, n_kv_heads, n_heads; /* n_heads = n_layers * n_kv_heads */
  size_t n_prompt;
  size_t oracle_steps; /* decode steps of the main reference (--oracle) */
  /* The oracles recall is measured against: 0 is --oracle (the main one:
   * bias, Taylor, summary), then oracle@1 and oracle@T unless already there. */
  size_t n_references;
  char reference_names[OBC_ANALYSIS_MAX_REFERENCES][48]; /* "oracle@1", "oracle@T", ... */
  size_t reference_first[OBC_ANALYSIS_MAX_REFERENCES];   /* 1-based first decode step */
  size_t reference_steps[OBC_ANALYSIS_MAX_REFERENCES];   /* decode steps summed */
  size_t n_recents;                                      /* 1 (r = 0) or 2 (r = 0, R) */
  size_t recents[2];
  /* (n_references, n_heads, OBC_Q_COUNT, n_windows, n_recents, n_topk); NaN
   * where k <= r. Reference i starts at i * analysis_recall_stride. */
  double *recall;
  /* The file scores' recall (config->file_scores), no window:
   * (n_references, n_heads, n_file_scores, n_recents, n_topk); NaN where
   * k <= r; NULL without file scores. */
  double *file_recall;
  /* Same shape as recall: share of the "needle" span kept; NULL without that span. */
  double *needle;
  size_t n_pairs;
  AnalysisSpearmanPair *pairs; /* (n_pairs) */
  double *spearman;            /* (n_heads, n_pairs, n_windows); NaN when undefined */
  /* Means over heads. Quantity index OBC_Q_COUNT is the oracle (its
   * selection ignores window and recent: stored for every w and r alike). */
  double *bias_share; /* (OBC_Q_COUNT + 1, n_windows, n_recents, n_topk, buckets) */
  double *bias_norm;  /* (OBC_Q_COUNT + 1, n_windows, buckets) */
  size_t n_taylor;
  AnalysisTaylorPoint *taylor; /* (n_taylor) */
  double seconds;              /* wall time of the analysis */
  /* Wall time by phase: reading + conversion, window sweep, oracle, and the
   * reductions (selection, recall, ranks, bias). */
  double seconds_read, seconds_sweep, seconds_oracle, seconds_reduce;
} AnalysisResult;

/* Runs the analysis; on success *result owns its arrays (analysis_result_free).
 * Writes config->scores_out (temp name, renamed at the end) when set.
 * progress: keep a progress line (layer, time by phase) updated on stderr. */
int analysis_run(TraceReader *reader, const AnalysisConfig *config, bool progress,
                 AnalysisResult *result);
void analysis_result_free(AnalysisResult *result);

/* Index helpers for the result arrays. */
size_t analysis_recall_index(const AnalysisResult *result, const AnalysisConfig *config,
                             size_t head, size_t q, size_t w, size_t r, size_t k);

/* The entry of result->file_recall. */
size_t analysis_file_recall_index(const AnalysisResult *result, const AnalysisConfig *config,
                                  size_t ref, size_t head, size_t f, size_t r, size_t k);

/* Entries of one reference's block of result->recall. */
size_t analysis_recall_stride(const AnalysisResult *result, const AnalysisConfig *config);

/* The reference's name: "oracle@1", "oracle@T", "oracle@a-b" or a quantity name. */
const char *analysis_reference_name(const AnalysisResult *result, int reference);

/* The files of the analysis folder (report.c): report.json, recall.csv,
 * recall_layers.csv, recall_heads.csv, spearman.csv, needle.csv (with a
 * needle span), bias.csv, taylor.csv. All are written under temporary names
 * and renamed together at the end; on failure none is left. command_line is
 * recorded in report.json. */
int analysis_write_outputs(const char *dir, const char *trace_path, const TraceMeta *meta,
                           const AnalysisConfig *config, const AnalysisResult *result,
                           const char *command_line);

/* The summary table (recall@main_k per score at the main window, r = 0 and
 * r = R, and Spearman vs the oracle) on out. */
void analysis_print_summary(FILE *out, const char *trace_path, const TraceMeta *meta,
                            const AnalysisConfig *config, const AnalysisResult *result);

#endif
