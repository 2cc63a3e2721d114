/* A sweep's plan: DIR/plan.json, written once by `obcache sweep --plan` and
 * read by every process that runs a cell or merges (sweep/cell.h). It holds
 * what reproduces each cell: the model file and its checksum, the capture
 * and analysis options as given on the command line (re-parsed for every
 * cell, so a cell runs exactly as the one-process sweep would), and the grid
 * of cells, each with a stable id. The file is untrusted input: every field
 * is checked, and a damaged plan fails with one line naming the file. */
#ifndef OBC_SWEEP_PLAN_H
#define OBC_SWEEP_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SWEEP_PLAN_FORMAT "obcache-sweep-plan/1"
#define SWEEP_PLAN_MAX_CELLS 4096
#define SWEEP_PLAN_MAX_OPTIONS 256

typedef struct {
  size_t id;     /* index in the plan; the cell's folder is cells/<id> */
  size_t length; /* prompt length in tokens */
  size_t depth;  /* needle depth in percent (a sweep's cells) */
  char task[32]; /* RULER task (an eval's cells); "" in a sweep */
  size_t sample; /* sample index within (task, length) (an eval's cells) */
  char name[64]; /* "L<length>_D<depth>", or "<task>_L<length>_S<sample>" */
} SweepPlanCell;

typedef struct {
  char command[16];                      /* "sweep" or "eval": the command that runs it */
  char version[64];                      /* obcache version that wrote the plan */
  char model_path[4096];                 /* absolute */
  uint64_t model_hash;                   /* obc_hash FNV-1a 64 of the model file (or folder) */
  uint64_t model_bytes;                  /* its size */
  char *options[SWEEP_PLAN_MAX_OPTIONS]; /* (n_options) owned copies, argv order */
  size_t n_options;
  char haystack[4096]; /* resolved, for people reading the plan */
  uint64_t seed;
  SweepPlanCell *cells; /* (n_cells) by id */
  size_t n_cells;
  char path[4096]; /* DIR/plan.json it was read from, for messages; "" when made here */
} SweepPlan;

/* The grid lengths x depths (lengths outer), ids 0, 1, ... in that order. */
int sweep_plan_set_grid(SweepPlan *plan, const size_t *lengths, size_t n_lengths,
                        const size_t *depths, size_t n_depths);
/* The samples tasks x lengths x samples (tasks outer, then lengths), ids 0,
 * 1, ... in that order, for `obcache eval`. */
int sweep_plan_set_samples(SweepPlan *plan, const char (*tasks)[32], size_t n_tasks,
                           const size_t *lengths, size_t n_lengths, size_t n_samples);
/* An option of the command line that is not the plan's (where it goes,
 * which cells run, threads, the model), and whether it takes no value. */
typedef struct {
  const char *name;
  bool flag;
} SweepRunOption;
/* Index in table (n) of the option word (also "--name=value"), or -1. */
int sweep_run_option_index(const SweepRunOption *table, size_t n, const char *word);
/* Adds argv[1..argc) to plan->options without the run-only options of table
 * (n) and their values; the value of each option named in file_options
 * (n_file) that names an existing file becomes an absolute path (not the
 * built-in "kjv" and "noise"), so that every machine finds it. */
int sweep_plan_add_argv(SweepPlan *plan, int argc, char **argv, const SweepRunOption *table,
                        size_t n, const char *const *file_options, size_t n_file);
/* Adds an owned copy of one command-line word to plan->options. */
int sweep_plan_add_option(SweepPlan *plan, const char *word);

/* Checksum of a model: the file, or for a Hugging Face folder every regular
 * file in it, by name. */
int sweep_plan_hash_model(const char *path, uint64_t *hash, uint64_t *bytes);

/* Fails (one line) when the model at path is not the plan's (checksum and
 * size). */
int sweep_plan_check_model(const SweepPlan *plan, const char *path);
/* DIR/plan.json: written under a temporary name; read and checked. */
int sweep_plan_write(const char *dir, const SweepPlan *plan);
int sweep_plan_read(const char *dir, SweepPlan *plan);
void sweep_plan_free(SweepPlan *plan);
/* DIR's plan for a new or resumed run: writes plan (creating DIR) when DIR
 * has none (a plan that cannot be written leaves no folder behind), accepts
 * an existing one that equals it (command, model, options, cells), and
 * fails naming the folder otherwise. */
int sweep_plan_write_or_match(const char *dir, const SweepPlan *plan);
/* Fails (one line) when the plan read from dir belongs to another command. */
int sweep_plan_check_command(const char *dir, const SweepPlan *plan, const char *command);

#endif
