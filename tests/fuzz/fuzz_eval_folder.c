/* libFuzzer harness: the files of an eval folder that `obcache eval DIR
 * --merge` reads (eval/eval.h): plan.json, and the sample.json and
 * prompt.json of its cell 0. The input is plan.json, a NUL byte,
 * sample.json, a NUL byte, prompt.json. When the plan reads, cell 0 is
 * committed with the two files (so that its manifest verifies); then the
 * command merges: the plan's options are parsed again into its
 * configuration (--score-cmd among them, which a merge never runs) and
 * checked against its samples, and the cell's answers against its prompt's
 * references. Seeds: tests/fuzz/make_seeds.py (a real eval's files). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "sweep/cell.h"
#include "sweep/plan.h"
#include "tests/fuzz/fuzz_common.h"

static const char *const outputs[] = {"accuracy.csv",      "paired.csv",  "recall.csv",
                                      "recall_policy.csv", "samples.csv", "prompts.jsonl",
                                      "eval.json",         "plan.json"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool quiet;
  if (!quiet) /* the merge prints its tables on stdout */
    quiet = freopen("/dev/null", "w", stdout) != NULL;
  size_t plan_n, rest_n, sample_n, prompt_n;
  const uint8_t *rest, *prompt;
  fuzz_split(data, size, &plan_n, &rest, &rest_n);
  fuzz_split(rest, rest_n, &sample_n, &prompt, &prompt_n);
  const char *dir = fuzz_scratch();
  fuzz_write_in(dir, "plan.json", data, plan_n);
  SweepPlan plan;
  char cell_dir[4608] = "";
  if (sweep_plan_read(dir, &plan) == OBC_OK) {
    char partial[4096];
    if (plan.n_cells && sweep_cell_begin(dir, &plan.cells[0], partial, sizeof partial) == OBC_OK) {
      fuzz_write_in(partial, "sample.json", rest, sample_n);
      fuzz_write_in(partial, "prompt.json", prompt, prompt_n);
      if (sweep_cell_commit(dir, &plan.cells[0], partial)) abort();
      sweep_cell_path(dir, &plan.cells[0], cell_dir, sizeof cell_dir);
    }
    sweep_plan_free(&plan);
  }
  obc_error_clear();
  char *argv[] = {"eval", (char *)dir, "--merge", "--no-figures", NULL};
  cmd_eval(4, argv);
  obc_error_clear();
  if (cell_dir[0]) {
    static const char *const cell_files[] = {"sample.json", "prompt.json", "complete.json"};
    for (size_t i = 0; i < sizeof cell_files / sizeof *cell_files; i++)
      fuzz_remove_in(cell_dir, cell_files[i]);
    rmdir(cell_dir);
  }
  char path[8192];
  snprintf(path, sizeof path, "%s/cells", dir);
  rmdir(path);
  for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++) fuzz_remove_in(dir, outputs[i]);
  return 0;
}
