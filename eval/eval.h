/* Task accuracy over many samples (`obcache eval`, docs/SCIENCE.md "Task
 * accuracy"). An eval is a sweep folder (sweep/plan.h, sweep/cell.h) whose
 * cells are samples (task, length, sample index). Running a sample: build
 * its RULER prompt (prompts/ruler_task.h), capture one prefill and the
 * full-cache answer into the cell's trace, then replay every policy x
 * budget x protocol with the model in the loop (free-running, batched),
 * plus oracle@T, and score each answer with RULER's string_match_all; the
 * recall of each kept set against oracle@T's at the same budget and
 * protocol is recorded beside it. The cell keeps sample.json (every
 * answer), prompt.json and, with keep_traces, trace.h5. The merge turns the
 * finished samples into accuracy.csv, paired.csv, recall.csv,
 * recall_policy.csv, samples.csv, prompts.jsonl and eval.json. */
#ifndef OBC_EVAL_H
#define OBC_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prompts/ruler_task.h"
#include "evict/policy.h"
#include "model/model.h"
#include "sweep/plan.h"

#define EVAL_MAX_TASKS 16
#define EVAL_MAX_LENGTHS 16
#define EVAL_MAX_SCORES 64
#define EVAL_MAX_BUDGETS 16
#define EVAL_MAX_SCORE_CMDS 8
/* Longest prompt an eval plans (the plan file's bound on a length). */
#define EVAL_MAX_LENGTH (1 << 30)
#define EVAL_ORACLE "oracle@T"
#define EVAL_FULL "full"
/* Rows captured before the question beyond the question and template tail:
 * the 64-row windows of SnapKV-like presets under the agnostic protocol. */
#define EVAL_ROWS_BEFORE_QUESTION 64
/* Resamples of the paired bootstrap, and its seed. */
#define EVAL_BOOTSTRAP_RESAMPLES 10000
#define EVAL_BOOTSTRAP_SEED 20251008u

/* A policy whose scores a command writes for each sample (--score-cmd
 * NAME=CMD, eval/score_cmd.h): NAME is among the configuration's scores,
 * kept from the file CMD writes as a score from a file is. */
typedef struct {
  char name[32];
  const char *command; /* run by /bin/sh -c; not owned */
} EvalScoreCmd;

typedef struct {
  char tasks[EVAL_MAX_TASKS][32]; /* (n_tasks) RULER task names */
  size_t n_tasks;
  size_t lengths[EVAL_MAX_LENGTHS]; /* (n_lengths) prompt + answer tokens */
  size_t n_lengths;
  size_t samples;                   /* per (task, length) */
  uint64_t seed;                    /* sample i draws from seed + i */
  char scores[EVAL_MAX_SCORES][32]; /* (n_scores) policies, canonical names, oracle@T last */
  size_t n_scores;
  char budgets[EVAL_MAX_BUDGETS][32]; /* (n_budgets) as given: "10%", "0.25", "512" */
  size_t n_budgets;
  EvalScoreCmd score_cmds[EVAL_MAX_SCORE_CMDS]; /* (n_score_cmds) */
  size_t n_score_cmds;
  EvictProtocol protocols[EVICT_N_PROTOCOLS]; /* (n_protocols) */
  size_t n_protocols;
  EvictPolicy base;      /* window, sinks, recent, protect, seed of every policy */
  RulerOptions ruler;    /* essay haystack, word list, chat template */
  size_t max_new_tokens; /* cap on RULER's tokens_to_generate; 0 = RULER's */
  bool keep_traces;      /* leave each sample's trace.h5 in its cell */
  size_t threads;        /* 0 = default */
  const char *device;    /* runtime backend of capture and replay */
  size_t batch;          /* replay sequences decoded together (0 = by memory) */
  const char *command_line;
} EvalConfig;

void eval_config_default(EvalConfig *config);
/* Checks the configuration before any sample runs: known tasks, scores and
 * budgets that parse, no task, length, score or budget twice (25% and 0.25
 * are one budget), at most SWEEP_PLAN_MAX_CELLS samples in all, every
 * length longer than its task's answer and, with a model, within its
 * context. */
int eval_config_check(const EvalConfig *config, const Model *model);
/* The same with the model at model_path (NULL: the default), loaded for its
 * context and freed: what a plan is checked against before it is written. */
int eval_config_check_model(const EvalConfig *config, const char *model_path);

/* Fails (one line) when plan.json is not what its options make: the
 * configuration does not pass eval_config_check, its seed is not the
 * options' --seed, or its samples are not the (task, length, sample index)
 * of the options, each once, in order: a damaged or forged plan.json. */
int eval_config_check_plan(const EvalConfig *config, const SweepPlan *plan);

/* What running samples shares: the model, the configuration, the sources
 * RULER's generators draw from, and the progress of this process. */
typedef struct {
  const Model *model;
  const EvalConfig *config;
  RulerSources sources;
  size_t total, done; /* samples this process runs, and has run */
  double start;       /* obc_now_seconds() when it began */
} EvalRunner;

int eval_runner_open(EvalRunner *runner, const Model *model, const EvalConfig *config,
                     size_t total);
void eval_runner_close(EvalRunner *runner);
/* A SweepCellRun (sweep/grid.h): runs one sample into out. */
int eval_run_sample(void *runner, const SweepPlanCell *cell, const char *out);

/* Merges DIR's finished samples (sweep/grid.c states) into DIR/accuracy.csv,
 * paired.csv, recall.csv, recall_policy.csv, samples.csv, prompts.jsonl and
 * eval.json, prints the accuracy
 * and paired tables, and fails naming the samples that are not finished
 * (the files then hold the finished ones). */
int eval_merge(const char *dir, const SweepPlan *plan, const EvalConfig *config,
               double stale_after);
/* Prints, from the discordance of DIR's finished samples (a pilot), the
 * pairs (samples per length) and samples per task that each pooled pairing
 * needs to detect an accuracy difference delta with 80% power at alpha 0.05:
 * Connor's normal approximation (eval_mcnemar_samples_normal) and the first
 * count from there at which the exact test's power reaches 80%. */
int eval_samples_needed(const char *dir, const SweepPlan *plan, const EvalConfig *config,
                        double stale_after, double delta);

#endif
