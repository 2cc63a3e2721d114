/* libFuzzer harness: a sweep folder (sweep/cell.h) made of the input's
 * plan.json and the complete.json (manifest) of its cell 0, beside a fixed
 * rows.csv and cell.json. The input is plan.json, a NUL byte, then
 * complete.json. The plan is read and checked, every cell's state is taken
 * (cell 0's manifest verified against its files) and the merge writes
 * summary.csv and index.html. Seeds: tests/fuzz/make_seeds.py. */
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "sweep/capture_sweep.h"
#include "sweep/plan.h"
#include "tests/fuzz/fuzz_common.h"

/* The files of cell 0 besides its manifest; make_seeds.py hashes these bytes. */
static const char fuzz_rows[] = "160,0,4242,1,1,attn,40,0.500000,0.250000\n";
static const char fuzz_cell[] =
    "{\"id\": 0, \"needle\": \"4242\", \"answer\": \" 4242\", "
    "\"found\": true}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool quiet;
  if (!quiet) /* the merge lists unfinished cells on stdout */
    quiet = freopen("/dev/null", "w", stdout) != NULL;
  size_t plan_n, manifest_n;
  const uint8_t *manifest;
  fuzz_split(data, size, &plan_n, &manifest, &manifest_n);
  const char *dir = fuzz_scratch();
  char cells[4608], cell[4608], path[4096];
  snprintf(cells, sizeof cells, "%s/cells", dir);
  snprintf(cell, sizeof cell, "%s/0", cells);
  fuzz_write("plan.json", data, plan_n, path, sizeof path);
  mkdir(cells, 0755);
  mkdir(cell, 0755);
  fuzz_write_in(cell, "complete.json", manifest, manifest_n);
  fuzz_write_in(cell, "rows.csv", fuzz_rows, sizeof fuzz_rows - 1);
  fuzz_write_in(cell, "cell.json", fuzz_cell, sizeof fuzz_cell - 1);

  SweepPlan plan;
  if (!sweep_plan_read(dir, &plan)) {
    SweepGridStatus status;
    if (!sweep_merge_summary(dir, &plan, SWEEP_STALE_AFTER_S, &status))
      sweep_merge_index(dir, &plan, &status, NULL, 0);
    sweep_grid_status_free(&status);
    sweep_plan_free(&plan);
  }
  obc_error_clear();

  fuzz_remove_in(cell, "complete.json");
  fuzz_remove_in(cell, "rows.csv");
  fuzz_remove_in(cell, "cell.json");
  rmdir(cell);
  rmdir(cells);
  return 0;
}
