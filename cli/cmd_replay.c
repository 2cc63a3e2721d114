/* `obcache replay`: what an eviction policy costs on a captured trace, with
 * the model decoding over the pruned cache (the default), offline from the
 * trace alone (--offline), or for every score x budget of a sweep (--sweep,
 * sweep/replay_sweep.h). Decoding-time eviction over a long text is
 * `obcache dynamic` (cli/cmd_dynamic.c). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_options.h"
#include "common/obc_parse.h"
#include "common/obc_text.h"
#include "common/obc_thread.h"
#include "replay/model_replay.h"
#include "replay/offline.h"
#include "evict/policy_args.h"
#include "replay/replay_report.h"
#include "runtime/runtime.h"
#include "sweep/replay_pairs.h"
#include "sweep/replay_sweep.h"

static const char usage[] =
    "usage: obcache replay TRACE [--model M] (--keep KEEP.h5 | policy options)\n"
    "                      [-o DIR]\n"
    "       obcache replay --offline TRACE (--keep KEEP.h5 | policy options) [-o DIR]\n"
    "       obcache replay --sweep (TRACE | SWEEP_DIR) [--scores S,..]\n"
    "                      [--budgets B,..] [--no-model] [policy options] [-o DIR]\n"
    "\n"
    "Model replay (default): loads the prompt K/V of TRACE as the model's cache (no\n"
    "prefill), drops the evicted rows per (layer, KV head), and decodes the captured\n"
    "steps from the first generated token: free-running (greedy; is the needle's\n"
    "value still in the answer, how long a prefix of it, what share of its tokens?\n"
    "token agreement with the full-cache answer and the first diverging step) and\n"
    "teacher-forced (KL divergence of every step's next-token distribution from the\n"
    "trace's full-cache logits, per step and mean). Writes DIR/replay.json and\n"
    "DIR/replay_steps.csv (step,token_full,token_replay,kl_forced).\n"
    "\n"
    "Query protocols (--protocol, kvpress's meanings): agnostic (default) compresses\n"
    "the context alone, then re-runs the question and the template tail through the\n"
    "model against the compressed cache at their own positions (their K/V and the\n"
    "first answer token recomputed), then decodes; aware compresses context and\n"
    "question together and re-runs the template tail and answer prefix after the\n"
    "question the same way; agnostic-captured keeps agnostic's set but the question's\n"
    "K/V as captured with the whole context (a leak of the evicted tokens). A keep\n"
    "file brings its own protocol.\n"
    "\n"
    "Offline replay (--offline): for every captured decode step and query head, the\n"
    "exact attention output over the kept prompt positions plus the generated\n"
    "tokens against the captured output: relative error, attention mass lost,\n"
    "needle-span retention. Writes DIR/offline_heads.csv, offline_layers.csv,\n"
    "offline_steps.csv and offline.json. It recomputes nothing: the decode queries\n"
    "(and the question's K/V) are the captured ones, computed with the whole\n"
    "context, so under agnostic it shows what losing the evicted context positions\n"
    "does to those captured queries, not the re-run question's answer (model replay).\n"
    "\n"
    "Decoding-time eviction over a long text is its own command: obcache dynamic.\n";

typedef struct {
  const char *trace_path, *keep_path, *model_path, *out_dir;
  bool offline, sweep, sinks_given, recent_given;
  size_t steps, threads;
  bool steps_given;
  size_t max_new_tokens; /* --max-new-tokens N: N answer tokens = N - 1 decode steps */
  bool max_new_tokens_given;
  const char *device; /* --device: the model replay's runtime backend */
  bool save_logits;
  ModelWeightsMode weights;
  EvictPolicy policy;
  EvictProtocolList protocols; /* --protocol P,P.. (--sweep) */
  EvictPolicyProtocolTarget protocol_target;
  /* --sweep only */
  SweepReplayConfig sweep_config; /* its scores and budgets: the defaults --help shows */
  const char *scores, *budgets;   /* --scores S,.. and --budgets B,.. */
  const char *pairs;              /* --pairs X+obc_vk,..: the scores X and X+obc_vk */
  bool no_model, batch_given, offline_batch_given;
  size_t batch, offline_batch;
} ReplayArgs;

/* Refuses, in one line, an option that the chosen mode does not take. */
static int check_mode_options(const ReplayArgs *a) {
  if (!a->sweep) {
    const char *sweep_only = a->scores                  ? "--scores"
                             : a->budgets               ? "--budgets"
                             : a->pairs                 ? "--pairs"
                             : a->no_model              ? "--no-model"
                             : a->sweep_config.keep_out ? "--keep-out"
                             : a->batch_given           ? "--batch"
                             : a->offline_batch_given   ? "--offline-batch"
                                                        : NULL;
    if (sweep_only) return obc_fail(OBC_EINVAL, "%s: only with --sweep", sweep_only);
    if (a->protocols.n > 1)
      return obc_fail(OBC_EINVAL, "--protocol: a list of protocols only with --sweep");
  }
  if (a->sweep && (a->keep_path || a->offline))
    return obc_fail(OBC_EINVAL,
                    "%s: not with --sweep (it runs offline and model replay itself from "
                    "--scores and --budgets)",
                    a->keep_path ? "--keep" : "--offline");
  if (a->save_logits && (a->sweep || a->offline))
    return obc_fail(OBC_EINVAL, "--save-logits: model replay only (not with %s)",
                    a->sweep ? "--sweep" : "--offline");
  if (a->offline && (a->steps_given || a->max_new_tokens_given))
    return obc_fail(OBC_EINVAL, "%s: the model replay's (--offline reads every captured step)",
                    a->steps_given ? "--steps" : "--max-new-tokens");
  if (a->steps_given && a->max_new_tokens_given)
    return obc_fail(OBC_EINVAL,
                    "--steps and --max-new-tokens: give one (--max-new-tokens N = --steps N-1)");
  if (a->max_new_tokens_given && a->max_new_tokens < 2)
    return obc_fail(OBC_EINVAL,
                    "--max-new-tokens %zu: expected at least 2 (the first answer token and one "
                    "decode step)",
                    a->max_new_tokens);
  if (a->offline && a->device)
    return obc_fail(OBC_EINVAL, "--device: the model replay's (--offline runs no model)");
  return OBC_OK;
}

static int parse_args(int argc, char **argv, ReplayArgs *a, bool *help) {
  char default_scores[1024], default_budgets[512], scores_help[512];
  evict_join_names((const char(*)[32])a->sweep_config.scores, a->sweep_config.n_scores, ", ",
                   default_scores, sizeof default_scores);
  evict_join_names((const char(*)[32])a->sweep_config.budgets, a->sweep_config.n_budgets, ", ",
                   default_budgets, sizeof default_budgets);
  snprintf(scores_help, sizeof scores_help,
           "the scores swept, as --score names them (oracle and decode_attn without @steps "
           "take --oracle: 1 and T); each entry is its own policy, so oracle@1 and oracle@T "
           "sit side by side; NAME=file:PATH[:DATASET] sweeps a score read from a file "
           "(docs/CLI.md, \"Scores from a file\")");
  const ObcOption own[] = {
      OBC_OPT_FLAG("--offline", &a->offline, "offline replay from the trace alone (see above)"),
      OBC_OPT_TEXT("--keep", "KEEP.h5", &a->keep_path,
                   "kept positions from obcache evict (else the policy options); not with "
                   "--sweep"),
      OBC_OPT_TEXT("--model", "M", &a->model_path,
                   "GGUF file or HF folder (also the W_o of --score criticalkv-snapkv and "
                   "criticalkv-adakv, --no-model or not)",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_SIZE("--steps", "T", &a->steps,
                   "decode steps of the model replay after the first answer token (the answer "
                   "has T + 1 tokens)",
                   .default_text = "all captured", .seen = &a->steps_given),
      OBC_OPT_SIZE("--max-new-tokens", "N", &a->max_new_tokens,
                   "answer tokens of the model replay, the first answer token included as in "
                   "transformers' max_new_tokens: --steps N-1 (N >= 2)",
                   .default_text = "all captured", .seen = &a->max_new_tokens_given),
      OBC_OPT_SIZE("--threads", "N", &a->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&a->device),
      OBC_OPT_FLAG("--save-logits", &a->save_logits,
                   "model replay only: also write DIR/replay_logits.f32, float32 (rows, vocab): "
                   "under --protocol agnostic first the re-run's logits of the first answer "
                   "token, then every teacher-forced step's"),
      OBC_OPT_TEXT("--output", "DIR", &a->out_dir, "output folder", .alias = "-o",
                   .default_text =
                       "TRACE without .h5 + \"-replay\"; for --sweep \"-replay-sweep\", "
                       "or DIR/replay for a sweep folder"),
      OBC_OPTION_HEADING(
          "\nbudget sweep (--sweep): every score x budget x protocol (--protocol\n"
          "agnostic,aware) on TRACE or on every *.h5 of a sweep folder, offline and (unless\n"
          "--no-model) with the model; prints the tables and writes replay_cells.csv,\n"
          "replay_sweep.csv (means over traces), kl_steps.csv (teacher-forced KL per score,\n"
          "budget and decode step) and replay_sweep.json; draw them with obcache plot DIR.\n"
          "When the scores hold pairs X and X+obc_* (the paper's baseline vs baseline +\n"
          "OBCache), also the paired table and replay_pairs.csv (docs/SCIENCE.md, \"Paired\n"
          "sweep\"). The options below are the sweep's only."),
      OBC_OPT_FLAG("--sweep", &a->sweep, "run the budget sweep"),
      OBC_OPT_TEXT("--scores", "S,..", &a->scores, scores_help, .default_text = default_scores),
      OBC_OPT_TEXT("--pairs", "X+obc_S,..", &a->pairs,
                   "adds each entry and its baseline X to --scores (X+obc_vk pairs with X), for "
                   "the paired table"),
      OBC_OPT_TEXT("--budgets", "B,..", &a->budgets, "the budgets swept, as --budget takes them",
                   .default_text = default_budgets),
      OBC_OPT_FLAG("--no-model", &a->no_model,
                   "offline replay only (synthetic traces, quick looks)"),
      OBC_OPT_TEXT("--keep-out", "DIR", &a->sweep_config.keep_out,
                   "also write every kept set as a keep file (obcache evict's format) into the "
                   "existing folder DIR, named TRACE.SCORE.BUDGET.PROTOCOL.h5"),
      OBC_OPT_SIZE("--batch", "N", &a->batch,
                   "model-replay sequences decoded together, two per kept set (free-running and "
                   "teacher-forced), sharing every weight pass; 1 = one set after another (the "
                   "reference path); results agree up to rounding",
                   .default_text = "all, in passes of 1 GiB", .seen = &a->batch_given),
      OBC_OPT_SIZE("--offline-batch", "N", &a->offline_batch,
                   "kept sets replayed offline together, sharing each read of the trace and each "
                   "row's logits; 1 = one set after another (the reference path); results agree "
                   "up to double rounding",
                   .default_text = "all of a trace", .seen = &a->offline_batch_given),
      OBC_OPTION_HEADING(""),
  };
  ObcOption policy_options[EVICT_POLICY_N_OPTIONS];
  a->protocol_target.list = &a->protocols;
  evict_policy_options(&a->policy, &a->sinks_given, &a->recent_given, &a->protocol_target,
                       policy_options);
  const ObcOptionList lists[] = {OBC_OPTION_LIST(own), OBC_OPTION_LIST(policy_options)};
  ObcArguments args;
  int rc = obc_options_parse("replay", lists, 2, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, lists, 2);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "one TRACE expected, got '%s' and '%s'", args.positional[0],
                    args.positional[1]);
  if (args.n_positional) a->trace_path = args.positional[0];
  if (!a->trace_path) return obc_fail(OBC_EINVAL, "missing TRACE (see obcache replay --help)");
  rc = check_mode_options(a);
  if (!rc && a->max_new_tokens_given) a->steps = a->max_new_tokens - 1;
  return rc;
}

static int run_sweep(const ReplayArgs *a, const char *command_line) {
  SweepReplayConfig config = a->sweep_config;
  config.base = a->policy;
  config.with_model = !a->no_model;
  config.model_path = a->model_path;
  config.weights = a->weights;
  config.steps = a->steps;
  config.threads = a->threads;
  config.device = a->device;
  config.batch = a->batch;
  config.offline_batch = a->offline_batch;
  int rc = OBC_OK;
  if (a->scores)
    rc = evict_parse_names("--scores", a->scores, config.scores, &config.n_scores, EVICT_SWEEP_MAX,
                           evict_policy_set_score);
  if (!rc && a->pairs) {
    if (!a->scores) config.n_scores = 0; /* --pairs alone: the pairs are the scores */
    rc = sweep_pairs_expand(a->pairs, config.scores, &config.n_scores, EVICT_SWEEP_MAX);
    for (size_t i = 0; i < config.n_scores && !rc; i++) {
      EvictPolicy probe;
      evict_policy_default(&probe);
      rc = evict_policy_set_score(&probe, config.scores[i]);
    }
  }
  if (!rc && a->budgets)
    rc = evict_parse_names("--budgets", a->budgets, config.budgets, &config.n_budgets,
                           EVICT_SWEEP_MAX, evict_policy_set_budget);
  config.n_protocols = a->protocols.n;
  memcpy(config.protocols, a->protocols.protocols, sizeof config.protocols);
  if (rc) return rc;
  char out_dir[4096];
  struct stat st;
  if (a->out_dir)
    snprintf(out_dir, sizeof out_dir, "%s", a->out_dir);
  else if (stat(a->trace_path, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(out_dir, sizeof out_dir, "%s/replay", a->trace_path);
  else
    obc_path_beside(a->trace_path, "-replay-sweep", out_dir, sizeof out_dir);
  return sweep_replay_run(a->trace_path, out_dir, &config, command_line);
}

static void print_offline(const EvictKeepSet *keep, const ReplayOfflineResult *r, const char *dir) {
  ReplayOfflineSummary s;
  replay_offline_summarise(r, &s);
  printf("offline replay: %s, budget %zu of %zu (%s, %s), budget rule %s, %zu decode steps\n",
         keep->policy.score, keep->budget, keep->n_candidates,
         evict_allocation_name(keep->policy.allocation), evict_protocol_name(keep->policy.protocol),
         evict_budget_rule_name(keep->policy.budget_rule), r->n_steps);
  if (keep->policy.protocol != EVICT_PROTOCOL_AWARE && keep->n_candidates < keep->n_prompt)
    printf(
        "  (%s: the captured decode queries and question K/V, computed with the whole "
        "context, over the kept set; model replay re-runs the question)\n",
        evict_protocol_name(keep->policy.protocol));
  printf(
      "  relative output error %.4g (step 1: %.4g), attention mass lost %.4g, needle kept "
      "%.3g -> %s\n",
      s.rel_error, s.rel_error_step1, s.mass_lost, s.needle_kept, dir);
}

static const char *needle_word(int found) {
  return found < 0 ? "n/a" : found ? "found" : "NOT found";
}

/* The model replay's lines: the policy, the re-run, both answers and whether
 * each holds the needle, agreement and the teacher-forced KL. */
static void print_model_replay(const EvictKeepSet *keep, const Replayer *replayer,
                               const ReplayAnswer *r, const char *dir) {
  int full_found = -1;
  const char *full = replay_model_full_answer(replayer, &full_found);
  printf("model replay: %s, budget %zu of %zu (%s, %s), budget rule %s, %zu steps\n",
         keep->policy.score, keep->budget, keep->n_candidates,
         evict_allocation_name(keep->policy.allocation), evict_protocol_name(keep->policy.protocol),
         evict_budget_rule_name(keep->policy.budget_rule), r->n_steps);
  if (r->rerun_tokens) {
    printf(
        "  %s re-run: %zu prompt tokens against the evicted cache, first answer "
        "token %s the full cache's",
        keep->policy.protocol == EVICT_PROTOCOL_AWARE ? "tail" : "question", r->rerun_tokens,
        r->first_token == replay_model_full_token(replayer, 0) ? "equals" : "differs from");
    if (!isnan(r->kl_prefill)) printf(" (KL %.4g)", r->kl_prefill);
    printf("\n");
    fprintf(stderr, "replay: the re-run took %.3f s\n", r->rerun_seconds);
  }
  printf("  full cache: \"%s\" (needle %s)\n", full, needle_word(full_found));
  printf("  evicted:    \"%s\" (needle %s, prefix %zu of %zu characters, %.3g of its tokens)\n",
         r->answer, needle_word(r->needle_found), r->needle_prefix, r->needle_chars,
         r->needle_tokens);
  char diverges[32] = "none";
  if (r->first_divergence) snprintf(diverges, sizeof diverges, "%zu", r->first_divergence);
  printf("  free-running: token agreement %.3f, first diverging step: %s\n", r->agreement,
         diverges);
  printf("  teacher-forced KL(full || evicted): mean %.4g, per step", r->kl_forced_mean);
  for (size_t t = 0; t < r->n_steps; t++) printf(" %.3g", r->kl_forced[t]);
  printf("\n  max relative logit diff (forced) %.3g -> %s\n", r->logits_rel_diff, dir);
}

static int run_model_replay(const ReplayArgs *a, TraceReader *reader, const EvictKeepSet *keep,
                            const char *out_dir, const char *command_line) {
  const char *path = a->model_path ? a->model_path : model_default_path();
  Model *model = NULL;
  Replayer *replayer = NULL;
  ReplayAnswer *result = obc_malloc(sizeof *result, "replay result");
  int rc = result ? model_load_with(path, &(ModelLoadOptions){.weights = a->weights}, &model)
                  : OBC_ENOMEM;
  if (!rc) rc = replay_model_open(model, reader, a->steps, a->threads, a->device, &replayer);
  if (!rc && a->save_logits) rc = replay_model_keep_logits(replayer, true);
  if (!rc) rc = replay_model_run(replayer, keep, result);
  if (!rc) rc = replay_write(out_dir, a->trace_path, path, keep, replayer, result, command_line);
  if (!rc) print_model_replay(keep, replayer, result, out_dir);
  free(result);
  replay_model_close(replayer);
  model_free(model);
  return rc;
}

static int run_offline(const ReplayArgs *a, TraceReader *reader, const EvictKeepSet *keep,
                       const char *out_dir, const char *command_line) {
  ReplayOfflineResult result;
  int rc = replay_offline_run(reader, keep, &result); /* frees its own on failure */
  if (rc) return rc;
  rc = replay_offline_write(out_dir, a->trace_path, keep, &result, command_line);
  if (!rc) print_offline(keep, &result, out_dir);
  replay_offline_result_free(&result);
  return rc;
}

/* `obcache replay --dynamic`: the one line pointing to `obcache dynamic`. */
static bool asks_for_dynamic(int argc, char **argv) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--dynamic")) return true;
  return false;
}

int cmd_replay(int argc, char **argv) {
  if (asks_for_dynamic(argc, argv))
    return obc_fail(OBC_EINVAL,
                    "decoding-time eviction is its own command: obcache dynamic (see obcache "
                    "dynamic --help)");
  ReplayArgs a;
  memset(&a, 0, sizeof a);
  evict_policy_default(&a.policy);
  sweep_replay_config_default(&a.sweep_config);
  bool help = false;
  int rc = parse_args(argc, argv, &a, &help);
  if (rc || help) return rc;
  a.policy.model = a.model_path; /* the model of a preset that reads weights */
  if (a.threads) obc_set_threads(a.threads);
  char out_dir[4096], command_line[4096];
  obc_text_command_line(argc, argv, command_line, sizeof command_line);
  if (a.sweep) return run_sweep(&a, command_line);
  if (a.out_dir)
    snprintf(out_dir, sizeof out_dir, "%s", a.out_dir);
  else
    obc_path_beside(a.trace_path, "-replay", out_dir, sizeof out_dir);

  TraceReader *reader = NULL;
  if ((rc = trace_open(a.trace_path, &reader))) return rc;
  EvictKeepSet keep;
  memset(&keep, 0, sizeof keep);
  size_t first = 0;
  if (trace_meta_decode_rows(trace_meta(reader), &first) == 0)
    rc = obc_fail(OBC_EINVAL,
                  "%s: no decode rows captured (replay needs them; hint: capture "
                  "with --decode >= 1)",
                  a.trace_path);
  if (!rc)
    rc = a.keep_path ? evict_keep_read(a.keep_path, trace_meta(reader), &keep)
                     : evict_policy_apply(reader, &a.policy, &keep);
  if (!rc)
    rc = a.offline ? run_offline(&a, reader, &keep, out_dir, command_line)
                   : run_model_replay(&a, reader, &keep, out_dir, command_line);
  evict_keep_set_free(&keep);
  trace_close(reader);
  return rc;
}
