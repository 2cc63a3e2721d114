/* libFuzzer harness: the sample.json of an eval's finished sample (eval/eval.h),
 * the file `obcache eval --merge` reads back from every cell. The input is the
 * file; the harness commits it as cell 0 of a one-sample plan (so that its
 * manifest verifies and the merge reads it) under the default configuration
 * (niah_single_1 at 1024 tokens; snapkv and snapkv+obc_k at 10,
 * 25 and 50%, agnostic) and merges: every field is checked, and a sample that
 * does not fit the configuration is refused with one line. Seeds:
 * tests/fuzz/make_seeds.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "eval/eval.h"
#include "sweep/cell.h"
#include "sweep/plan.h"
#include "tests/fuzz/fuzz_common.h"

/* The cell's prompt.json, fixed: the fuzzed file is sample.json. */
static const char fuzz_prompt[] =
    "{\"task\": \"niah_single_1\", \"length\": 1024, \"ids\": [1, 2]}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool quiet;
  if (!quiet) /* the merge prints its tables on stdout */
    quiet = freopen("/dev/null", "w", stdout) != NULL;
  EvalConfig config;
  eval_config_default(&config);
  SweepPlan plan = {.command = "eval"};
  const char *dir = fuzz_scratch();
  char partial[4096], cell_dir[4608], path[8192];
  if (sweep_plan_set_samples(&plan, config.tasks, 1, config.lengths, 1, 1)) abort();
  if (sweep_cell_begin(dir, &plan.cells[0], partial, sizeof partial)) abort();
  fuzz_write_in(partial, "sample.json", data, size);
  fuzz_write_in(partial, "prompt.json", fuzz_prompt, sizeof fuzz_prompt - 1);
  if (sweep_cell_commit(dir, &plan.cells[0], partial)) abort();
  eval_merge(dir, &plan, &config, SWEEP_STALE_AFTER_S);
  obc_error_clear();
  sweep_cell_path(dir, &plan.cells[0], cell_dir, sizeof cell_dir);
  fuzz_remove_in(cell_dir, "sample.json");
  fuzz_remove_in(cell_dir, "prompt.json");
  fuzz_remove_in(cell_dir, "complete.json");
  rmdir(cell_dir);
  snprintf(path, sizeof path, "%s/cells", dir);
  rmdir(path);
  static const char *const outputs[] = {"accuracy.csv",      "paired.csv",  "recall.csv",
                                        "recall_policy.csv", "samples.csv", "prompts.jsonl",
                                        "eval.json"};
  for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++) fuzz_remove_in(dir, outputs[i]);
  sweep_plan_free(&plan);
  return 0;
}
