/* `obcache dynamic`: decoding-time eviction, the paper's PG19 experiment
 * (evict/dynamic.h). The model decodes a long text teacher-forced with a
 * fixed cache budget per (layer, KV head), evicting by each running score as
 * it goes; the perplexity of every (score, budget) against the full cache. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "common/obc_options.h"
#include "common/obc_text.h"
#include "common/obc_thread.h"
#include "evict/dynamic.h"
#include "evict/policy_args.h"
#include "model/model.h"
#include "runtime/runtime.h"
#include "tokenizer/text_input.h"

static const char usage[] =
    "usage: obcache dynamic [--model M] [--haystack kjv|FILE] [--tokens N]\n"
    "                       [--budgets B,..] [--scores S,..] [--sinks N]\n"
    "                       [--recent R|P%] [--chunk C] [-o DIR]\n"
    "\n"
    "Teacher-forced decoding over a long text with a fixed cache budget per (layer,\n"
    "KV head): every new row adds to each cached token's running score, and whenever\n"
    "a head holds more than the budget its lowest-scoring tokens are evicted (outside\n"
    "the --sinks and the --recent window; recency keeps the sinks and the most\n"
    "recent tokens only; the H2O paper's split is --sinks 4 --recent 50%). Prints\n"
    "the perplexity of the text under each score and budget against the full\n"
    "cache, and writes DIR/dynamic.csv (score, budget, position, window and\n"
    "cumulative perplexity) and DIR/dynamic.json; draw them with obcache plot DIR.\n";

typedef struct {
  EvictDynamicConfig config;
  const char *model_path, *out_dir;
  ModelWeightsMode weights;
  ObcSizeList budgets; /* --budgets into config.budgets */
  const char *scores;  /* --scores S,.. */
} DynamicArgs;

/* --recent R (tokens) or P% (of each budget, 1..99). */
static int parse_recent(void *target, const char *option, const char *value) {
  EvictDynamicConfig *c = target;
  size_t n = strlen(value);
  if (n > 1 && value[n - 1] == '%') {
    char digits[32];
    size_t percent = 0;
    snprintf(digits, sizeof digits, "%.*s", (int)(n - 1), value);
    int rc = obc_parse_size(option, digits, &percent);
    if (!rc && (percent < 1 || percent > 99))
      rc = obc_fail(OBC_EINVAL, "%s %s: expected a share of 1..99%% of each budget", option, value);
    if (!rc) c->recent_percent = percent, c->recent = 0;
    return rc;
  }
  c->recent_percent = 0;
  return obc_parse_size(option, value, &c->recent);
}

static int score_check(EvictPolicy *probe, const char *name) {
  (void)probe;
  EvictDynamicScore score;
  return evict_dynamic_score_parse("--scores", name, &score);
}

static int parse_args(int argc, char **argv, DynamicArgs *a, bool *help) {
  EvictDynamicConfig *c = &a->config;
  char score_names[128], scores_help[256], default_scores[256];
  evict_dynamic_score_list(", ", " or ", score_names, sizeof score_names);
  snprintf(scores_help, sizeof scores_help, "running scores to evict by: %s (attn is H2O's)",
           score_names);
  evict_join_names((const char(*)[32])c->scores, c->n_scores, ", ", default_scores,
                   sizeof default_scores);
  a->budgets = (ObcSizeList){c->budgets, &c->n_budgets, EVICT_DYNAMIC_MAX};
  const ObcOption options[] = {
      OBC_OPT_TEXT("--model", "M", &a->model_path, "GGUF file or HF folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      MODEL_WEIGHTS_OPTION(&a->weights),
      OBC_OPT_TEXT("--haystack", "kjv|FILE", &c->text,
                   "the text: kjv (Debian's bible-kjv) or a UTF-8 text file"),
      OBC_OPT_TEXT("--text", "kjv|FILE", &c->text, NULL, .renamed = "--haystack"),
      OBC_OPT_SIZE("--tokens", "N", &c->n_tokens, "tokens of the text to decode"),
      text_max_bytes_option(&c->max_text_bytes),
      OBC_OPT_CUSTOM("--budgets", "B,..", &a->budgets, obc_option_parse_size_list,
                     "cache budgets in tokens per (layer, KV head)",
                     .show = obc_option_show_size_list),
      OBC_OPT_TEXT("--scores", "S,..", &a->scores, scores_help, .default_text = default_scores),
      OBC_OPT_SIZE("--sinks", "N", &c->sinks,
                   "first N positions never evicted (the H2O paper's split: --sinks 4 "
                   "--recent 50%)",
                   .default_text = "none"),
      OBC_OPT_CUSTOM("--recent", "R|P%", c, parse_recent,
                     "last R positions never evicted, or P% of each budget",
                     .default_text = "none"),
      OBC_OPT_SIZE("--chunk", "C", &c->chunk,
                   "tokens fed per forward call, eviction after each (the cache holds at most "
                   "budget + C - 1; 1 = strict)"),
      OBC_OPT_SIZE("--ppl-window", "N", &c->ppl_window, "positions per perplexity window"),
      OBC_OPT_SIZE("--threads", "N", &c->threads, "OpenMP threads", .default_text = "all cores"),
      RUNTIME_DEVICE_OPTION(&c->device),
      OBC_OPT_TEXT("--output", "DIR", &a->out_dir, "output folder", .alias = "-o"),
  };
  const ObcOptionList lists[] = {OBC_OPTION_LIST(options)};
  ObcArguments args;
  int rc = obc_options_parse("dynamic", lists, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, lists, 1);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "'%s': obcache dynamic takes no trace (it reads --haystack)",
                    args.positional[0]);
  if (a->scores)
    rc = evict_parse_names("--scores", a->scores, c->scores, &c->n_scores, EVICT_DYNAMIC_MAX,
                           score_check);
  return rc;
}

int cmd_dynamic(int argc, char **argv) {
  DynamicArgs a;
  memset(&a, 0, sizeof a);
  evict_dynamic_config_default(&a.config);
  a.out_dir = "dynamic-eviction";
  bool help = false;
  int rc = parse_args(argc, argv, &a, &help);
  if (rc || help) return rc;
  if (a.config.threads) obc_set_threads(a.config.threads);
  char command_line[4096];
  obc_text_command_line(argc, argv, command_line, sizeof command_line);
  Model *model = NULL;
  rc = model_load_with(a.model_path ? a.model_path : model_default_path(),
                       &(ModelLoadOptions){.weights = a.weights}, &model);
  if (!rc) rc = evict_dynamic_run(model, &a.config, a.out_dir, command_line);
  model_free(model);
  return rc;
}
