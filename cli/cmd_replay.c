/* `obcache replay`: what an eviction policy costs, offline from the trace
 * alone (--offline) or with the model decoding over the pruned cache (the
 * default); --sweep and --dynamic run the budget sweep and the decoding-time
 * eviction experiment (sweep/replay_sweep.h, evict/dynamic.h). */
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
#include "evict/dynamic.h"
#include "evict/model_replay.h"
#include "evict/offline.h"
#include "evict/policy_args.h"
#include "evict/replay_report.h"
#include "runtime/runtime.h"
#include "sweep/replay_pairs.h"
#include "sweep/replay_sweep.h"
#include "tokenizer/text_input.h"

static void print_help(FILE *out, const ObcOptionList *lists, size_t n_lists) {
  fprintf(out,
          "usage: obcache replay TRACE [--model M] (--keep KEEP.h5 | policy options) [-o DIR]\n"
          "       obcache replay --offline TRACE (--keep KEEP.h5 | policy options) [-o DIR]\n"
          "       obcache replay --sweep (TRACE | SWEEP_DIR) [--scores S,..] [--budgets B,..]\n"
          "                      [--no-model] [policy options] [-o DIR]\n"
          "       obcache replay --dynamic [--model M] [--text kjv|FILE] [--tokens N]\n"
          "                      [--budgets 256,512,1024] [--scores S,..] [-o DIR]\n"
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
          "question together; agnostic-captured keeps agnostic's set but the question's\n"
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
          "\n");
  obc_options_print_help(out, lists, n_lists);
}

typedef struct {
  const char *trace_path, *keep_path, *model_path, *out_dir;
  bool offline, sweep, no_model, dynamic, sinks_given, recent_given;
  const char *text;
  size_t tokens, chunk, ppl_window, max_text_bytes;
  const char *scores, *budgets; /* --sweep lists */
  size_t steps, threads, batch, offline_batch;
  const char *device; /* --device: the model replay's runtime backend */
  EvictPolicy policy;
  EvictProtocolList protocols; /* --protocol P,P.. (--sweep) */
  EvictPolicyProtocolTarget protocol_target;
  const char *pairs; /* --pairs X+obc_vk,..: the sweep's scores X and X+obc_vk */
  bool save_logits;
  ModelWeightsMode weights;
} ReplayArgs;

static int parse_args(int argc, char **argv, ReplayArgs *a, bool *help) {
  const ObcOption own[] = {
      OBC_OPTION_HEADING("options:"),
      {"--offline", NULL, NULL, "offline replay from the trace alone (see above)", NULL,
       OBC_OPTION_FLAG, &a->offline, NULL, NULL},
      {"--keep", NULL, "KEEP.h5", "kept positions from obcache evict (else the policy options)",
       NULL, OBC_OPTION_TEXT, &a->keep_path, NULL, NULL},
      {"--model", NULL, "M",
       "GGUF file or HF folder (also the W_o of --score criticalkv-snapkv, --no-model or not)",
       "the embedded SmolLM2", OBC_OPTION_TEXT, &a->model_path, NULL, NULL},
      MODEL_WEIGHTS_OPTION(&a->weights),
      {"--steps", NULL, "T", "decode steps to replay", "all captured", OBC_OPTION_SIZE, &a->steps,
       NULL, NULL},
      {"--threads", NULL, "N", "OpenMP threads", "all cores", OBC_OPTION_SIZE, &a->threads, NULL,
       NULL},
      RUNTIME_DEVICE_OPTION(&a->device),
      {"--save-logits", NULL, NULL,
       "model replay: also write DIR/replay_logits.f32, float32 (rows, vocab): under "
       "--protocol agnostic first the re-run's logits of the first answer token, then every "
       "teacher-forced step's",
       NULL, OBC_OPTION_FLAG, &a->save_logits, NULL, NULL},
      {"-o", NULL, "DIR",
       "output folder (default: TRACE without .h5 + \"-replay\"; for a sweep folder DIR/replay; "
       "for --dynamic dynamic-eviction)",
       NULL, OBC_OPTION_TEXT, &a->out_dir, NULL, NULL},
      OBC_OPTION_HEADING(
          "\nbudget sweep (--sweep): every score x budget x protocol (--protocol agnostic,aware)\n"
          "on TRACE or on every *.h5 of a sweep folder, offline and (unless --no-model) with\n"
          "the model; prints the tables and writes replay_cells.csv, replay_sweep.csv (means\n"
          "over traces), kl_steps.csv (teacher-forced KL per score, budget and decode step)\n"
          "and replay_sweep.json; draw them with obcache plot DIR. When the scores hold pairs\n"
          "X and X+obc_* (the paper's baseline vs baseline + OBCache), also the paired table\n"
          "and replay_pairs.csv (docs/SCIENCE.md, \"Paired sweep\")."),
      {"--sweep", NULL, NULL, "run the budget sweep", NULL, OBC_OPTION_FLAG, &a->sweep, NULL, NULL},
      {"--scores", NULL, "S,..",
       "sweep: default attn,snapkv,vatp,obc_v,obc_k,obc_vk,streaming,random, "
       "oracle@1,oracle@T,decode_attn. oracle and decode_attn without @steps take --oracle "
       "(default 1 and T); "
       "each entry is its own policy, so oracle@1 and oracle@T sit side by side. --dynamic: "
       "attn (H2O), obc_v, obc_k, obc_vk, streaming (default all)",
       NULL, OBC_OPTION_TEXT, &a->scores, NULL, NULL},
      {"--pairs", NULL, "X+obc_S,..",
       "sweep: adds each entry and its baseline X to --scores (X+obc_vk pairs with X), for the "
       "paired table",
       NULL, OBC_OPTION_TEXT, &a->pairs, NULL, NULL},
      {"--budgets", NULL, "B,..",
       "sweep: default 1%,2%,5%,10%,20%,40%. --dynamic: cache budgets in tokens (default "
       "256,512,1024)",
       NULL, OBC_OPTION_TEXT, &a->budgets, NULL, NULL},
      {"--no-model", NULL, NULL, "offline replay only (synthetic traces, quick looks)", NULL,
       OBC_OPTION_FLAG, &a->no_model, NULL, NULL},
      {"--batch", NULL, "N",
       "sweep: model-replay sequences decoded together, two per kept set (free-running and "
       "teacher-forced), sharing every weight pass; 1 = one set after another (the reference "
       "path); results agree up to rounding",
       "all, in passes of 1 GiB", OBC_OPTION_SIZE, &a->batch, NULL, NULL},
      {"--offline-batch", NULL, "N",
       "sweep: kept sets replayed offline together, sharing each read of the trace and each "
       "row's logits; 1 = one set after another (the reference path); results agree up to "
       "double rounding",
       "all of a trace", OBC_OPTION_SIZE, &a->offline_batch, NULL, NULL},
      OBC_OPTION_HEADING(
          "\ndynamic eviction (--dynamic, the paper's PG19 experiment): teacher-forced\n"
          "decoding over a long text with a fixed cache budget per (layer, KV head);\n"
          "every new row adds to each cached token's running score and the lowest are\n"
          "evicted (outside --sinks, default 4, and --recent, default half the budget as\n"
          "in H2O; streaming keeps sinks + the most recent only) whenever a head\n"
          "holds more than the budget. Perplexity against the full cache; writes\n"
          "dynamic.csv and dynamic.json (draw them with obcache plot DIR)."),
      {"--dynamic", NULL, NULL, "run the dynamic-eviction experiment", NULL, OBC_OPTION_FLAG,
       &a->dynamic, NULL, NULL},
      {"--text", NULL, "T", "kjv (default; Debian's bible-kjv) or a UTF-8 text file", NULL,
       OBC_OPTION_TEXT, &a->text, NULL, NULL},
      {"--tokens", NULL, "N", "tokens of the text", "4096", OBC_OPTION_SIZE, &a->tokens, NULL,
       NULL},
      text_max_bytes_option(&a->max_text_bytes),
      {"--chunk", NULL, "C",
       "tokens fed per forward call; eviction after each (default 16; the cache holds at most "
       "budget + C - 1; 1 = strict)",
       NULL, OBC_OPTION_SIZE, &a->chunk, NULL, NULL},
      {"--ppl-window", NULL, "N", "positions per perplexity window", "256", OBC_OPTION_SIZE,
       &a->ppl_window, NULL, NULL},
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
    print_help(stdout, lists, 2);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "one TRACE expected, got '%s' and '%s'", args.positional[0],
                    args.positional[1]);
  if (args.n_positional) a->trace_path = args.positional[0];
  if (!a->trace_path && !a->dynamic)
    return obc_fail(OBC_EINVAL, "missing TRACE (see obcache replay --help)");
  if (a->trace_path && a->dynamic)
    return obc_fail(OBC_EINVAL, "--dynamic reads a text, not a trace (got '%s'; see --text)",
                    a->trace_path);
  return OBC_OK;
}

static int run_sweep(const ReplayArgs *a, const char *command_line) {
  SweepReplayConfig config;
  sweep_replay_config_default(&config);
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

static int dynamic_score_check(EvictPolicy *probe, const char *name) {
  (void)probe;
  static const char *const names[] = {"attn", "obc_v", "obc_k", "obc_vk", "streaming"};
  for (size_t i = 0; i < 5; i++)
    if (!strcmp(name, names[i])) return OBC_OK;
  return obc_fail(OBC_EINVAL,
                  "--scores %s: not a dynamic score (expected attn, obc_v, obc_k, "
                  "obc_vk or streaming)",
                  name);
}

static int run_dynamic(const ReplayArgs *a, const char *command_line) {
  EvictDynamicConfig config;
  evict_dynamic_config_default(&config);
  if (a->text) config.text = a->text;
  config.max_text_bytes = a->max_text_bytes;
  if (a->tokens) config.n_tokens = a->tokens;
  if (a->chunk) config.chunk = a->chunk;
  if (a->ppl_window) config.ppl_window = a->ppl_window;
  if (a->sinks_given) config.sinks = a->policy.sinks;
  if (a->recent_given) config.recent = a->policy.recent;
  config.threads = a->threads;
  config.device = a->device;
  int rc = OBC_OK;
  if (a->scores)
    rc = evict_parse_names("--scores", a->scores, config.scores, &config.n_scores, EVICT_SWEEP_MAX,
                           dynamic_score_check);
  if (!rc && a->budgets) {
    config.n_budgets = 0;
    rc = obc_parse_size_list("--budgets", a->budgets, config.budgets, &config.n_budgets,
                             EVICT_DYNAMIC_MAX);
  }
  if (rc) return rc;
  Model *model = NULL;
  rc = model_load_with(a->model_path ? a->model_path : model_default_path(),
                       &(ModelLoadOptions){a->weights}, &model);
  if (!rc)
    rc = evict_dynamic_run(model, &config, a->out_dir ? a->out_dir : "dynamic-eviction",
                           command_line);
  model_free(model);
  return rc;
}

static void print_offline(const EvictKeepSet *keep, const EvictOfflineResult *r, const char *dir) {
  EvictOfflineSummary s;
  evict_offline_summarise(r, &s);
  printf("offline replay: %s, budget %zu of %zu (%s, %s), %zu decode steps\n", keep->policy.score,
         keep->budget, keep->n_candidates, evict_allocation_name(keep->policy.allocation),
         evict_protocol_name(keep->policy.protocol), r->n_steps);
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

int cmd_replay(int argc, char **argv) {
  ReplayArgs a;
  memset(&a, 0, sizeof a);
  a.max_text_bytes = OBC_TEXT_MAX_BYTES;
  evict_policy_default(&a.policy);
  bool help = false;
  int rc = parse_args(argc, argv, &a, &help);
  if (rc || help) return rc;
  a.policy.model = a.model_path; /* the model of a preset that reads weights */
  if (a.threads) obc_set_threads(a.threads);
  char out_dir[4096], command_line[4096];
  obc_text_command_line(argc, argv, command_line, sizeof command_line);
  if (a.sweep) {
    if (a.offline || a.keep_path)
      return obc_fail(OBC_EINVAL,
                      "--sweep: runs offline and model replay itself from --scores "
                      "and --budgets (no --offline or --keep)");
    return run_sweep(&a, command_line);
  }
  if (a.protocols.n > 1)
    return obc_fail(OBC_EINVAL, "--protocol: a list of protocols only with --sweep");
  if (a.pairs) return obc_fail(OBC_EINVAL, "--pairs: only with --sweep");
  if (a.dynamic) return run_dynamic(&a, command_line);
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
  Model *model = NULL;
  EvictReplayer *replayer = NULL;
  if (!rc && a.offline) {
    EvictOfflineResult result;
    rc = evict_offline_run(reader, &keep, &result); /* frees its own on failure */
    if (!rc) {
      rc = evict_offline_write(out_dir, a.trace_path, &keep, &result, command_line);
      if (!rc) print_offline(&keep, &result, out_dir);
      evict_offline_result_free(&result);
    }
  } else if (!rc) {
    const char *path = a.model_path ? a.model_path : model_default_path();
    EvictModelReplay *result = obc_malloc(sizeof *result, "replay result");
    rc = result ? model_load_with(path, &(ModelLoadOptions){a.weights}, &model) : OBC_ENOMEM;
    if (!rc) rc = evict_replayer_open(model, reader, a.steps, a.threads, a.device, &replayer);
    if (!rc && a.save_logits) rc = evict_replayer_keep_logits(replayer, true);
    if (!rc) rc = evict_replayer_run(replayer, &keep, result);
    if (!rc)
      rc = evict_replay_write(out_dir, a.trace_path, path, &keep, replayer, result, command_line);
    if (!rc) {
      int full_found = -1;
      const char *full = evict_replayer_full_answer(replayer, &full_found);
      printf("model replay: %s, budget %zu of %zu (%s, %s), %zu steps\n", keep.policy.score,
             keep.budget, keep.n_candidates, evict_allocation_name(keep.policy.allocation),
             evict_protocol_name(keep.policy.protocol), result->n_steps);
      if (result->rerun_tokens) {
        printf(
            "  question re-run: %zu prompt tokens against the evicted cache, first answer "
            "token %s the full cache's (KL %.4g)\n",
            result->rerun_tokens,
            result->first_token == evict_replayer_full_token(replayer, 0) ? "equals"
                                                                          : "differs from",
            result->kl_prefill);
        fprintf(stderr, "replay: the question re-run took %.3f s\n", result->rerun_seconds);
      }
      printf("  full cache: \"%s\" (needle %s)\n", full,
             full_found < 0 ? "n/a"
             : full_found   ? "found"
                            : "NOT found");
      printf(
          "  evicted:    \"%s\" (needle %s, prefix %zu of %zu characters, %.3g of its "
          "tokens)\n",
          result->answer,
          result->needle_found < 0 ? "n/a"
          : result->needle_found   ? "found"
                                   : "NOT found",
          result->needle_prefix, result->needle_chars, result->needle_tokens);
      char diverges[32] = "none";
      if (result->first_divergence)
        snprintf(diverges, sizeof diverges, "%zu", result->first_divergence);
      printf("  free-running: token agreement %.3f, first diverging step: %s\n", result->agreement,
             diverges);
      printf("  teacher-forced KL(full || evicted): mean %.4g, per step", result->kl_forced_mean);
      for (size_t t = 0; t < result->n_steps; t++) printf(" %.3g", result->kl_forced[t]);
      printf("\n  max relative logit diff (forced) %.3g -> %s\n", result->logits_rel_diff, out_dir);
    }
    free(result);
  }
  evict_replayer_close(replayer);
  model_free(model);
  evict_keep_set_free(&keep);
  trace_close(reader);
  return rc;
}
