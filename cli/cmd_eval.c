/* `obcache eval`: task accuracy over many samples of RULER's synthetic tasks
 * (eval/eval.h). Like `obcache sweep`, an eval is a folder with a plan whose
 * cells (here: samples) any process can run: one command makes the plan,
 * runs every sample and merges; or --plan makes the plan, `eval DIR --cell I
 * | --shard i/N` runs samples (a Slurm array task each, scripts/slurm/), and
 * `eval DIR --merge` writes the tables and figures from the finished ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture_args.h"
#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"
#include "eval/eval.h"
#include "eval/score_cmd.h"
#include "evict/policy_args.h"
#include "evict/preset.h"
#include "evict/score_file.h"
#include "model/model.h"
#include "plots/plot.h"
#include "plots/plot_eval.h"
#include "runtime/runtime.h"
#include "sweep/grid.h"
#include "sweep/plan.h"
#include "sweep/replay_pairs.h"

typedef struct {
  EvalConfig config;
  const char *tasks, *scores, *pairs, *budgets, *budget_rule, *protocols, *out_dir, *model_path;
  ModelWeightsMode weights;
  bool plan_only, merge, no_figures, run_score_cmds;
  const char *cell, *shard, *samples_for;
  double stale_after;
} EvalArgs;

static const char *usage =
    "usage: obcache eval --tasks T,.. --lengths N,.. --samples N [options] -o DIR\n"
    "       obcache eval ... --plan -o DIR\n"
    "       obcache eval DIR [--cell I | --shard i/N] [--threads N]\n"
    "       obcache eval DIR --merge\n"
    "       obcache eval DIR --samples-for D\n"
    "\n"
    "Task accuracy of eviction policies over many samples of RULER's synthetic tasks\n"
    "(niah_single_1/2/3, niah_multikey_1/2/3, niah_multivalue, niah_multiquery, vt,\n"
    "cwe, fwe; docs/SCIENCE.md, \"Task accuracy\"). Each sample is a function of\n"
    "(task, length, seed): one prefill captures what the policies and the oracle\n"
    "need, the full-cache answer is decoded, and every policy x budget x protocol,\n"
    "and oracle@T (the answer-aware reference), is replayed with the model in the\n"
    "loop, each answer ending at its first stop token; each answer is scored with\n"
    "RULER's string_match_all (correct = every answer found), and each kept set's\n"
    "recall against oracle@T's at the same budget is recorded beside it.\n"
    "\n"
    "Writes DIR/accuracy.csv (task, length, policy, budget, protocol, n, correct,\n"
    "accuracy with its Wilson 95% interval, RULER's score = mean string_match_all\n"
    "(0..1) with its bootstrap 95% interval, recall, kept share; task \"all\" pools\n"
    "the samples for the accuracy and, as RULER averages, takes the mean of the\n"
    "task means for the score; policy \"full\" is the uncompressed cache),\n"
    "paired.csv (each X vs X+obc_S on the same samples: accuracy difference with a\n"
    "paired bootstrap 95% interval and the exact McNemar p; RULER's score of each,\n"
    "their difference with a paired bootstrap 95% interval and the sign-flip p,\n"
    "exact up to 16 non-zero differences, else 10000 Monte Carlo draws; the\n"
    "discordant pairs and mde80, the accuracy difference the exact McNemar test\n"
    "detects with 80% power at alpha 0.05 for that n; over the pooled rows the\n"
    "Holm-adjusted p and a verdict: holds, fails or undecided),\n"
    "recall.csv (accuracy by recall quartile and the AUC of recall as a predictor\n"
    "of correctness), recall_policy.csv (that AUC within each policy, budget and\n"
    "protocol), samples.csv (every answer), prompts.jsonl (every prompt: text, ids,\n"
    "spans, answers), eval.json, and\n"
    "DIR/plots/ (the figures and index.html). The printed tables lead with RULER's\n"
    "score x100 [bootstrap 95%], the accuracy beside it.\n"
    "\n"
    "A run is resumable and shardable like obcache sweep: --plan writes\n"
    "DIR/plan.json; `eval DIR` runs the samples that are not finished (all, one with\n"
    "--cell, or those with id % N == i with --shard i/N) under locks, each into\n"
    "DIR/cells/<id>/ (sample.json, prompt.json; trace.h5 with --keep-traces);\n"
    "`eval DIR --merge` verifies them and writes the tables; `eval DIR --samples-for\n"
    "D` reads a pilot's finished samples and prints how many each pairing needs to\n"
    "detect an accuracy difference D. The merge of shards\n"
    "equals the one-process run; scripts/slurm/submit.sh DIR N runs it on Slurm.\n";

/* --answer-prefix-space drop|keep into RulerOptions.answer_space. */
static int parse_answer_space(void *target, const char *option, const char *value) {
  bool *space = target;
  if (!strcmp(value, "drop") || !strcmp(value, "keep")) {
    *space = !strcmp(value, "keep");
    return OBC_OK;
  }
  return obc_fail(OBC_EINVAL, "%s %s: expected drop (kvpress) or keep (RULER)", option, value);
}

static void show_answer_space(const void *target, char *text, size_t size) {
  snprintf(text, size, "%s", *(const bool *)target ? "keep" : "drop");
}

/* --score-cmd NAME=CMD, repeatable: one more command of the configuration. */
static int parse_score_cmd(void *target, const char *option, const char *value) {
  EvalConfig *c = target;
  if (c->n_score_cmds == EVAL_MAX_SCORE_CMDS)
    return obc_fail(OBC_EINVAL, "%s: at most %d commands", option, EVAL_MAX_SCORE_CMDS);
  int rc = eval_score_cmd_parse(option, value, &c->score_cmds[c->n_score_cmds]);
  if (!rc) c->n_score_cmds++;
  return rc;
}

static int parse_args(int argc, char **argv, EvalArgs *a, ObcArguments *args, bool print) {
  EvalConfig *c = &a->config;
  ObcSizeList lengths = {c->lengths, &c->n_lengths, EVAL_MAX_LENGTHS};
  const ObcOption own[] = {
      OBC_OPTION_HEADING("samples:"),
      OBC_OPT_TEXT("--tasks", "T,..", &a->tasks, "RULER tasks (see above)",
                   .default_text = "niah_single_1"),
      OBC_OPT_CUSTOM("--lengths", "N,..", &lengths, obc_option_parse_size_list,
                     "prompt lengths in tokens, RULER's max_seq_length (the prompt plus RULER's "
                     "tokens_to_generate fit in N)",
                     .alias = "--length", .show = obc_option_show_size_list),
      OBC_OPT_SIZE("--samples", "N", &c->samples, "samples per task and length"),
      OBC_OPT_UINT64("--seed", "S", &c->seed,
                     "sample i of every task and length draws from seed S + i"),
      OBC_OPT_TEXT(
          "--haystack", "H", &c->ruler.essay,
          "haystack of RULER's essay tasks (RULER: Paul Graham's essays): kjv or a text file"),
      OBC_OPT_TEXT("--essay", "H", &c->ruler.essay, NULL, .renamed = "--haystack"),
      OBC_OPT_TEXT("--words", "FILE", &c->ruler.words, "word list of cwe (RULER: wonderwords)",
                   .default_text = "/usr/share/dict/words (wamerican)"),
      OBC_OPT_FLAG("--no-chat-template", &c->ruler.no_chat_template,
                   "plain text even when the model has a chat template"),
      OBC_OPT_CUSTOM("--answer-prefix-space", "drop|keep", &c->ruler.answer_space,
                     parse_answer_space,
                     "after the chat template, the answer prefix without its leading space (drop: "
                     "kvpress's RULER data) or with it (keep: RULER's template + \" The special "
                     "...\"); without a template the space is always there",
                     .show = show_answer_space),
      OBC_OPT_SIZE(
          "--max-new-tokens", "N", &c->max_new_tokens,
          "at most N answer tokens, the prefill's token included as in transformers' "
          "max_new_tokens, so N - 1 decode steps (oracle@T's T); N >= 2 (RULER: niah 128, vt 30, "
          "cwe 120, fwe 50); prompts do not change",
          .default_text = "RULER's"),
      OBC_OPTION_HEADING("\npolicies:"),
      OBC_OPT_TEXT(
          "--scores", "S,..", &a->scores,
          "policies, as evict --score names them: the published methods (h2o, tova, snapkv, "
          "adakv-snapkv, ...) and their pairings such as snapkv+obc_k, or any other score "
          "(attn, obc_vk, random); oracle@T is always added",
          .default_text = "snapkv,snapkv+obc_k"),
      OBC_OPT_TEXT("--pairs", "X+obc_S,..", &a->pairs,
                   "adds each entry and its baseline X to --scores"),
      OBC_OPT_CUSTOM(
          "--score-cmd", "NAME=CMD", c, parse_score_cmd,
          "a policy NAME whose scores CMD writes for each sample: after the sample's capture, "
          "/bin/sh -c CMD runs in this working directory with $OBC_TRACE (the sample's trace), "
          "$OBC_SCORES (the HDF5 file it must write, as python/obcache's write_scores does: one "
          "dataset [layers, kv_heads, >= prompt positions], higher = keep, the trace's "
          "trace_hash), $OBC_SCORE_NAME, $OBC_PROMPT (prompt.json), $OBC_MODEL and $OBC_SAMPLE, "
          "its output in the cell's score-cmd-NAME.log; NAME is then kept and replayed as "
          "--scores entries are. A command that fails fails its sample (cells/<id>.failed says "
          "why). Repeatable (docs/PYTHON.md)"),
      OBC_OPT_TEXT("--budgets", "B,..", &a->budgets,
                   "kept share (10%, 0.25) or tokens of the candidates",
                   .default_text = "10%,25%,50%"),
      OBC_OPT_TEXT("--budget-rule", "R", &a->budget_rule,
                   "how a fractional budget becomes a count for every policy and the oracle: "
                   "floor (floor(n x B)) or kvpress (int(n * (1 - cr)) in double, as kvpress; "
                   "obcache evict --help)",
                   .default_text = "floor"),
      OBC_OPT_TEXT(
          "--protocol", "P,..", &a->protocols,
          "agnostic (the context compressed before the question is seen, the question re-run), "
          "aware, agnostic-captured",
          .default_text = "agnostic"),
      OBC_OPT_SIZE("--window", "W", &c->base.window,
                   "score window of the generic scores (presets fix their own)",
                   .default_text = "min(" OBC_OPTION_SPELLED(EVICT_DEFAULT_WINDOW) ", captured)"),
      OBC_OPT_FLAG("--keep-traces", &c->keep_traces,
                   "keep each sample's trace.h5 in its cell (large)"),
      OBC_OPTION_HEADING("\nrunning:"),
      OBC_OPT_TEXT("--output", "DIR", &a->out_dir, "the eval folder", .alias = "-o"),
      OBC_OPT_TEXT("--model", "M", &a->model_path, "GGUF file or HF folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_SIZE("--threads", "N", &c->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&c->device),
      OBC_OPT_SIZE("--batch", "N", &c->batch,
                   "replay sequences decoded together (1 = one after another)",
                   .default_text = "all, in passes of 1 GiB"),
      OBC_OPT_FLAG("--plan", &a->plan_only,
                   "only write DIR/plan.json; run the samples with obcache eval DIR"),
      OBC_OPT_TEXT("--cell", "I", &a->cell, "run only sample I of DIR's plan (with DIR)"),
      OBC_OPT_TEXT("--shard", "i/N", &a->shard, "run the samples with id % N == i (with DIR)"),
      OBC_OPT_FLAG("--merge", &a->merge, "merge DIR's finished samples (with DIR)"),
      OBC_OPT_FLAG("--run-score-cmds", &a->run_score_cmds,
                   "with DIR, run the --score-cmd commands of DIR/plan.json: without it eval DIR "
                   "refuses a plan that has any, since a folder's plan could run anything"),
      OBC_OPT_DOUBLE("--stale-after", "S", &a->stale_after,
                     "seconds without a heartbeat after which another host's lock is stale"),
      OBC_OPT_FLAG("--no-figures", &a->no_figures, "merge without drawing the figures"),
      OBC_OPT_TEXT("--samples-for", "D", &a->samples_for,
                   "with DIR, a pilot: the samples each pooled pairing needs to detect an "
                   "accuracy difference D (0.05 or 5%) with 80% power at alpha 0.05, from the "
                   "discordance of DIR's finished samples; writes nothing"),
  };
  const ObcOptionList lists[] = {OBC_OPTION_LIST(own)};
  int rc = obc_options_parse("eval", lists, 1, argc, argv, args);
  if (!rc && args->help && print) obc_options_print_usage(stdout, usage, lists, 1);
  return rc;
}

static void args_default(EvalArgs *a) {
  memset(a, 0, sizeof *a);
  eval_config_default(&a->config);
  a->stale_after = SWEEP_STALE_AFTER_S;
}

/* "niah_single_1, ..., fwe" into out. */
static const char *task_names(char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < ruler_task_count() && used < size; i++)
    used +=
        (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", ruler_task_at(i)->name);
  return out;
}

/* The --score-cmd names after the --scores: each once, none the name of
 * another policy or of the full cache, each recorded as a score from a
 * file (evict/score_file.h) whose file each sample's command writes. */
static int add_score_cmds(EvalConfig *c) {
  size_t given = c->n_scores;
  for (size_t i = 0; i < c->n_score_cmds; i++) {
    const char *name = c->score_cmds[i].name;
    for (size_t j = 0; j < c->n_scores; j++)
      if (!strcmp(name, c->scores[j]))
        return j < given
                   ? obc_fail(OBC_EINVAL, "--score-cmd %s: already a policy of --scores", name)
                   : obc_fail(OBC_EINVAL, "--score-cmd %s: given twice", name);
    if (!strcmp(name, EVAL_FULL))
      return obc_fail(OBC_EINVAL, "--score-cmd %s: %s is the uncompressed cache's row", name,
                      EVAL_FULL);
    if (c->n_scores == EVAL_MAX_SCORES)
      return obc_fail(OBC_EINVAL, "--score-cmd %s: more than %d policies", name, EVAL_MAX_SCORES);
    int rc = evict_score_file_set(name, "", "");
    if (rc) return rc;
    snprintf(c->scores[c->n_scores++], sizeof c->scores[0], "%s", name);
  }
  return OBC_OK;
}

/* The lists into the configuration, checked. */
static int resolve_lists(EvalArgs *a) {
  EvalConfig *c = &a->config;
  int rc = OBC_OK;
  if (a->tasks) {
    char buf[1024], *items[EVAL_MAX_TASKS];
    size_t n = 0;
    rc = obc_split_list("--tasks", a->tasks, buf, sizeof buf, items, EVAL_MAX_TASKS, &n);
    c->n_tasks = 0;
    char names[512];
    for (size_t i = 0; i < n && !rc; i++) {
      if (!ruler_task_find(items[i]))
        rc = obc_fail(OBC_EINVAL, "--tasks: unknown task '%s' (expected one of %s)", items[i],
                      task_names(names, sizeof names));
      else
        snprintf(c->tasks[c->n_tasks++], sizeof c->tasks[0], "%s", items[i]);
    }
  }
  if (!rc && a->scores)
    rc = evict_parse_names("--scores", a->scores, c->scores, &c->n_scores, EVAL_MAX_SCORES,
                           evict_policy_set_score);
  if (!rc && a->pairs) {
    if (!a->scores) c->n_scores = 0; /* --pairs alone: the pairs are the scores */
    rc = sweep_pairs_expand(a->pairs, c->scores, &c->n_scores, EVAL_MAX_SCORES);
    for (size_t i = 0; i < c->n_scores && !rc; i++) {
      EvictPolicy probe;
      evict_policy_default(&probe);
      rc = evict_policy_set_score(&probe, c->scores[i]);
      if (!rc) snprintf(c->scores[i], sizeof c->scores[i], "%s", probe.score);
    }
  }
  for (size_t i = 0; i < c->n_scores && !rc; i++)
    if (evict_score_file_known(c->scores[i]))
      rc = obc_fail(OBC_EINVAL,
                    "--scores %s: a score from a file fits the one trace whose hash it records, "
                    "and eval captures a trace per sample (hint: evict or replay --sweep on a "
                    "sample's trace, kept with --keep-traces)",
                    c->scores[i]);
  for (size_t i = 0; i < c->n_scores && !rc; i++)
    if (!strcmp(c->scores[i], EVAL_ORACLE))
      rc = obc_fail(OBC_EINVAL, "--scores: %s is always replayed, as the reference", EVAL_ORACLE);
  if (!rc) rc = add_score_cmds(c);
  if (!rc && a->budgets)
    rc = evict_parse_names("--budgets", a->budgets, c->budgets, &c->n_budgets, EVAL_MAX_BUDGETS,
                           evict_policy_set_budget);
  if (!rc && a->budget_rule) rc = evict_policy_set_budget_rule(&c->base, a->budget_rule);
  if (!rc && a->protocols) {
    char buf[256], *items[EVICT_N_PROTOCOLS];
    size_t n = 0;
    rc = obc_split_list("--protocol", a->protocols, buf, sizeof buf, items, EVICT_N_PROTOCOLS, &n);
    c->n_protocols = 0;
    for (size_t i = 0; i < n && !rc; i++) {
      EvictPolicy probe;
      evict_policy_default(&probe);
      rc = evict_policy_set_protocol(&probe, items[i]);
      for (size_t j = 0; j < c->n_protocols && !rc; j++)
        if (c->protocols[j] == probe.protocol)
          rc = obc_fail(OBC_EINVAL, "--protocol: %s given twice", items[i]);
      if (!rc) c->protocols[c->n_protocols++] = probe.protocol;
    }
  }
  return rc;
}

/* --- the plan's options ------------------------------------------------- */

/* Options that belong to one run, not to the plan: where it goes (-o, which
 * cannot be given with DIR), the model (stored with its checksum), threads,
 * backend, batch, which samples run. */
static const SweepRunOption run_only[] = {{"-o", false},
                                          {"--output", false},
                                          {"--model", false},
                                          {"--threads", false},
                                          {"--device", false},
                                          {"--batch", false},
                                          {"--cell", false},
                                          {"--shard", false},
                                          {"--stale-after", false},
                                          {"--samples-for", false},
                                          {"--run-score-cmds", true},
                                          {"--plan", true},
                                          {"--merge", true},
                                          {"--no-figures", true}};
enum { N_RUN_ONLY = sizeof run_only / sizeof *run_only, RUN_ONLY_PLAN_OWNED = 2 };
/* Option values that name files, made absolute in the plan. */
static const char *const file_options[] = {"--haystack", "--essay", "--words"};

static int make_plan(const EvalArgs *a, int argc, char **argv, SweepPlan *plan) {
  memset(plan, 0, sizeof *plan);
  snprintf(plan->command, sizeof plan->command, "eval");
  snprintf(plan->version, sizeof plan->version, "%s", OBC_VERSION);
  int rc = model_locate(a->model_path, NULL, plan->model_path);
  if (!rc) rc = sweep_plan_hash_model(plan->model_path, &plan->model_hash, &plan->model_bytes);
  if (!rc) rc = sweep_plan_add_argv(plan, argc, argv, run_only, N_RUN_ONLY, file_options, 2);
  if (!rc) snprintf(plan->haystack, sizeof plan->haystack, "%s", a->config.ruler.essay);
  plan->seed = a->config.seed;
  const EvalConfig *c = &a->config;
  if (!rc)
    rc = sweep_plan_set_samples(plan, c->tasks, c->n_tasks, c->lengths, c->n_lengths, c->samples);
  return rc;
}

/* The configuration a plan was made with: its options parsed again. */
static int plan_config(const SweepPlan *plan, EvalArgs *a) {
  args_default(a);
  char *argv[SWEEP_PLAN_MAX_OPTIONS + 1];
  argv[0] = "eval";
  for (size_t i = 0; i < plan->n_options; i++) argv[i + 1] = plan->options[i];
  ObcArguments args;
  int rc = parse_args((int)plan->n_options + 1, argv, a, &args, false);
  if (!rc && args.n_positional)
    rc = obc_fail(OBC_EFORMAT, "stray option word '%s'", args.positional[0]);
  if (!rc) rc = resolve_lists(a);
  if (rc) return obc_fail_context(rc, "%s", plan->path);
  return eval_config_check_plan(&a->config, plan);
}

/* --- running and merging -------------------------------------------------- */

static int load_model(const SweepPlan *plan, const char *override, ModelWeightsMode weights,
                      Model **model) {
  const char *path = override ? override : plan->model_path;
  int rc = sweep_plan_check_model(plan, path);
  if (rc) return rc;
  return model_load_with(path, &(ModelLoadOptions){.weights = weights}, model);
}

/* Runs DIR's pending samples. trusted: the plan's --score-cmd commands may
 * run (the command line that made the plan, or --run-score-cmds). */
static int run_plan(const char *dir, const SweepPlan *plan, const EvalArgs *given,
                    const char *command_line, bool trusted) {
  EvalArgs a;
  int rc = plan_config(plan, &a);
  a.config.threads = given->config.threads;
  a.config.device = given->config.device;
  a.config.batch = given->config.batch;
  a.config.command_line = command_line;
  SweepSelection selection;
  if (!rc)
    rc = sweep_selection_parse(given->cell, given->shard, given->stale_after, plan, &selection);
  size_t *ids = rc ? NULL : obc_calloc(plan->n_cells, sizeof *ids, "the samples to run");
  size_t n = 0;
  SweepRunCounts counts = {0};
  if (!rc && !ids) rc = OBC_ENOMEM;
  if (!rc) rc = sweep_pending_cells(dir, plan, &selection, ids, &n, &counts);
  if (!rc && n && a.config.n_score_cmds && !trusted) {
    char shown[160];
    obc_text_escape(shown, sizeof shown, a.config.score_cmds[0].command, false);
    rc = obc_fail(OBC_EINVAL,
                  "%s/plan.json runs %zu command(s) for each sample (--score-cmd %s=%s%s); give "
                  "--run-score-cmds to run them",
                  dir, a.config.n_score_cmds, a.config.score_cmds[0].name, shown,
                  a.config.n_score_cmds > 1 ? ", ..." : "");
  }
  Model *model = NULL;
  if (!rc && n) rc = load_model(plan, given->model_path, a.weights, &model);
  if (!rc && n) rc = eval_config_check(&a.config, model);
  if (!rc && n)
    a.config.base.model = model->path; /* the W_o of criticalkv-snapkv, criticalkv-adakv */
  EvalRunner runner;
  if (!rc && n && !(rc = eval_runner_open(&runner, model, &a.config, n))) {
    rc = sweep_run_cells(eval_run_sample, &runner, plan, dir, &selection, ids, n, &counts);
    eval_runner_close(&runner);
  }
  sweep_run_counts_print("eval", dir, "samples", &counts);
  model_free(model);
  free(ids);
  return rc;
}

static int merge(const char *dir, const SweepPlan *plan, const EvalArgs *given) {
  EvalArgs a;
  int rc = plan_config(plan, &a);
  if (!rc) rc = eval_merge(dir, plan, &a.config, given->stale_after);
  if (rc) return rc;
  printf(
      "wrote %s/accuracy.csv, paired.csv, recall.csv, recall_policy.csv, samples.csv, "
      "prompts.jsonl and eval.json\n",
      dir);
  if (given->no_figures) return OBC_OK;
  PlotOptions options = {.dir = dir, .formats = PLOT_PNG | PLOT_SVG};
  PlotResult result;
  if (plot_eval(dir, &options, &result)) { /* the tables stand without the figures */
    fprintf(stderr, "eval: figures not drawn: %s\n", obc_error_message());
    obc_error_clear();
  } else {
    printf("wrote %s/plots/ (%zu files, index.html among them)\n", dir, result.n_written);
  }
  return OBC_OK;
}

/* --samples-for D: "5%" or "0.05", a difference in (0, 1). */
static int samples_for(const char *dir, const SweepPlan *plan, const EvalArgs *given) {
  char *end = NULL, number[64];
  double delta = strtod(given->samples_for, &end);
  snprintf(number, sizeof number, "%.*s", (int)(end - given->samples_for), given->samples_for);
  if (!obc_parse_is_decimal(number))
    delta = NAN;
  else if (*end == '%' && !end[1])
    delta /= 100.0;
  else if (*end)
    delta = NAN;
  if (!(delta > 0.0 && delta < 1.0))
    return obc_fail(OBC_EINVAL,
                    "--samples-for: expected an accuracy difference in (0, 1) such "
                    "as 0.05 or 5%%, not '%s'",
                    given->samples_for);
  EvalArgs a;
  int rc = plan_config(plan, &a);
  return rc ? rc : eval_samples_needed(dir, plan, &a.config, given->stale_after, delta);
}

/* `eval DIR ...`: only the run-time options may be given. */
static int check_dir_mode(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] != '-') continue;
    int k = sweep_run_option_index(run_only, N_RUN_ONLY, argv[i]);
    if (k < RUN_ONLY_PLAN_OWNED)
      return obc_fail(OBC_EINVAL,
                      "obcache eval DIR takes its settings from DIR/plan.json; %s cannot be "
                      "given here (only --cell, --shard, --merge, --samples-for, --threads, "
                      "--device, --batch, --model, --stale-after, --no-figures, "
                      "--run-score-cmds)",
                      argv[i]);
    if (!run_only[k].flag && !strchr(argv[i], '=')) i++;
  }
  return OBC_OK;
}

int cmd_eval(int argc, char **argv) {
  EvalArgs a;
  evict_score_file_clear();
  args_default(&a);
  ObcArguments args;
  int rc = parse_args(argc, argv, &a, &args, true);
  if (rc || args.help) return rc;
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache eval --help)",
                    args.positional[1]);
  char command_line[1024];
  obc_text_command_line(argc, argv, command_line, sizeof command_line);
  SweepPlan plan;
  if (args.n_positional) {
    const char *dir = args.positional[0];
    if ((rc = check_dir_mode(argc, argv))) return rc;
    if ((rc = sweep_plan_read(dir, &plan))) return rc;
    rc = sweep_plan_check_command(dir, &plan, "eval");
    if (!rc && a.merge && a.samples_for)
      rc = obc_fail(OBC_EINVAL, "--merge and --samples-for are two commands: give one");
    if (!rc)
      rc = a.samples_for ? samples_for(dir, &plan, &a)
           : a.merge     ? merge(dir, &plan, &a)
                         : run_plan(dir, &plan, &a, command_line, a.run_score_cmds);
    sweep_plan_free(&plan);
    return rc;
  }
  const char *dir = a.out_dir;
  if (a.merge || a.cell || a.shard || a.samples_for)
    return obc_fail(OBC_EINVAL,
                    "--merge, --cell, --shard and --samples-for take an eval folder: "
                    "obcache eval DIR --merge");
  if (!dir) return obc_fail(OBC_EINVAL, "missing -o DIR (see obcache eval --help)");
  if ((rc = resolve_lists(&a))) return rc;
  if ((rc = eval_config_check_model(&a.config, a.model_path))) return rc;
  rc = make_plan(&a, argc, argv, &plan);
  if (!rc) rc = sweep_plan_write_or_match(dir, &plan);
  if (!rc && a.plan_only)
    printf("wrote %s/plan.json: %zu samples; run them with obcache eval %s [--shard i/N]\n", dir,
           plan.n_cells, dir);
  if (!rc && !a.plan_only) rc = run_plan(dir, &plan, &a, command_line, true);
  if (!rc && !a.plan_only) rc = merge(dir, &plan, &a);
  sweep_plan_free(&plan);
  return rc;
}
