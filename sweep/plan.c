/* DIR/plan.json of a sweep (sweep/plan.h): writing it, and reading it back
 * with every field checked. */
#include "sweep/plan.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_hash.h"
#include "common/obc_json.h"
#include "formats/json_file.h"
#include "model/model.h"

int sweep_plan_set_grid(SweepPlan *plan, const size_t *lengths, size_t n_lengths,
                        const size_t *depths, size_t n_depths) {
  size_t n = n_lengths * n_depths;
  if (!n || n > SWEEP_PLAN_MAX_CELLS)
    return obc_fail(OBC_EINVAL, "sweep: a grid of %zu cells (1..%d allowed)", n,
                    SWEEP_PLAN_MAX_CELLS);
  free(plan->cells);
  plan->cells = obc_calloc(n, sizeof *plan->cells, "the sweep's cells");
  if (!plan->cells) return OBC_ENOMEM;
  plan->n_cells = n;
  for (size_t i = 0; i < n_lengths; i++)
    for (size_t j = 0; j < n_depths; j++) {
      SweepPlanCell *c = &plan->cells[i * n_depths + j];
      c->id = i * n_depths + j;
      c->length = lengths[i];
      c->depth = depths[j];
      snprintf(c->name, sizeof c->name, "L%zu_D%zu", c->length, c->depth);
    }
  return OBC_OK;
}

static void sample_name(SweepPlanCell *c) {
  snprintf(c->name, sizeof c->name, "%s_L%zu_S%zu", c->task, c->length, c->sample);
}

int sweep_plan_set_samples(SweepPlan *plan, const char (*tasks)[32], size_t n_tasks,
                           const size_t *lengths, size_t n_lengths, size_t n_samples) {
  /* The product only once each factor is known not to wrap it. */
  size_t n = n_tasks && n_lengths && n_samples <= SWEEP_PLAN_MAX_CELLS / (n_tasks * n_lengths)
                 ? n_tasks * n_lengths * n_samples
             : n_tasks && n_lengths ? SIZE_MAX
                                    : 0;
  if (!n || n > SWEEP_PLAN_MAX_CELLS)
    return obc_fail(OBC_EINVAL, "eval: %zu samples in all (1..%d allowed)", n,
                    SWEEP_PLAN_MAX_CELLS);
  free(plan->cells);
  plan->cells = obc_calloc(n, sizeof *plan->cells, "the eval's samples");
  if (!plan->cells) return OBC_ENOMEM;
  plan->n_cells = n;
  size_t id = 0;
  for (size_t t = 0; t < n_tasks; t++)
    for (size_t l = 0; l < n_lengths; l++)
      for (size_t s = 0; s < n_samples; s++, id++) {
        SweepPlanCell *c = &plan->cells[id];
        c->id = id;
        c->length = lengths[l];
        c->sample = s;
        snprintf(c->task, sizeof c->task, "%s", tasks[t]);
        sample_name(c);
      }
  return OBC_OK;
}

int sweep_plan_add_option(SweepPlan *plan, const char *word) {
  if (plan->n_options == SWEEP_PLAN_MAX_OPTIONS)
    return obc_fail(OBC_EINVAL, "sweep: more than %d option words", SWEEP_PLAN_MAX_OPTIONS);
  if (strlen(word) >= 4096) return obc_fail(OBC_EINVAL, "sweep: an option of 4096+ characters");
  char *copy = strdup(word);
  if (!copy) return obc_fail(OBC_ENOMEM, "sweep: out of memory");
  plan->options[plan->n_options++] = copy;
  return OBC_OK;
}

int sweep_run_option_index(const SweepRunOption *table, size_t n, const char *word) {
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(table[i].name);
    if (!strncmp(word, table[i].name, len) && (word[len] == '\0' || word[len] == '='))
      return (int)i;
  }
  return -1;
}

int sweep_plan_add_argv(SweepPlan *plan, int argc, char **argv, const SweepRunOption *table,
                        size_t n, const char *const *file_options, size_t n_file) {
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    int k = sweep_run_option_index(table, n, argv[i]);
    if (k >= 0) {
      if (!table[k].flag && !strchr(argv[i], '=')) i++; /* skip its value */
      continue;
    }
    rc = sweep_plan_add_option(plan, argv[i]);
    bool file_option = false;
    for (size_t f = 0; f < n_file; f++) file_option |= !strcmp(argv[i], file_options[f]);
    if (!rc && file_option && i + 1 < argc) {
      char real[PATH_MAX];
      const char *value = argv[++i];
      bool file = strcmp(value, "kjv") && strcmp(value, "noise") && realpath(value, real);
      rc = sweep_plan_add_option(plan, file ? real : value);
    }
  }
  return rc;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder: the hash of "<name>\0<bytes as text>\0<file hash as text>\n" of
 * every regular file, sorted by name. */
static int hash_folder(const char *path, uint64_t *hash, uint64_t *bytes) {
  DIR *dir = opendir(path);
  if (!dir) return obc_fail(OBC_EIO, "%s: cannot list the folder", path);
  char *names[1024];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(dir)) && n < 1024)
    if (e->d_name[0] != '.' && (names[n] = strdup(e->d_name))) n++;
  closedir(dir);
  qsort(names, n, sizeof *names, by_name);
  int rc = 0;
  *hash = OBC_HASH_SEED;
  *bytes = 0;
  for (size_t i = 0; i < n; i++) {
    char file[8192];
    struct stat st;
    snprintf(file, sizeof file, "%s/%s", path, names[i]);
    if (!rc && !stat(file, &st) && S_ISREG(st.st_mode)) {
      uint64_t h = 0, size = 0;
      rc = obc_hash_file(file, &h, &size);
      char line[512];
      int len =
          snprintf(line, sizeof line, "%s%c%" PRIu64 "%c%016" PRIx64 "\n", names[i], 0, size, 0, h);
      *hash = obc_hash_bytes(*hash, line, (size_t)len);
      *bytes += size;
    }
    free(names[i]);
  }
  return rc;
}

int sweep_plan_hash_model(const char *path, uint64_t *hash, uint64_t *bytes) {
  bool folder = false;
  int rc = model_locate(path, &folder, NULL);
  if (rc) return rc;
  return folder ? hash_folder(path, hash, bytes) : obc_hash_file(path, hash, bytes);
}

int sweep_plan_check_model(const SweepPlan *plan, const char *path) {
  uint64_t hash = 0, bytes = 0;
  int rc = sweep_plan_hash_model(path, &hash, &bytes);
  if (rc) return rc;
  if (hash != plan->model_hash || bytes != plan->model_bytes)
    return obc_fail(OBC_EINVAL,
                    "%s: not the plan's model (checksum %016llx, %llu bytes; the plan has "
                    "%016llx, %llu bytes)",
                    path, (unsigned long long)hash, (unsigned long long)bytes,
                    (unsigned long long)plan->model_hash, (unsigned long long)plan->model_bytes);
  return OBC_OK;
}

static void hex64(uint64_t value, char out[17]) { snprintf(out, 17, "%016" PRIx64, value); }

int sweep_plan_write(const char *dir, const SweepPlan *plan) {
  cJSON *root = cJSON_CreateObject();
  cJSON *options = cJSON_CreateArray(), *cells = cJSON_CreateArray();
  char hex[17];
  hex64(plan->model_hash, hex);
  cJSON_AddStringToObject(root, "format", SWEEP_PLAN_FORMAT);
  cJSON_AddStringToObject(root, "command", plan->command[0] ? plan->command : "sweep");
  cJSON_AddStringToObject(root, "obcache_version", plan->version);
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "path", plan->model_path);
  cJSON_AddNumberToObject(model, "bytes", (double)plan->model_bytes);
  cJSON_AddStringToObject(model, "fnv1a64", hex);
  cJSON_AddStringToObject(root, "haystack", plan->haystack);
  char seed[32]; /* a string: a 64-bit seed does not fit a JSON number exactly */
  snprintf(seed, sizeof seed, "%" PRIu64, plan->seed);
  cJSON_AddStringToObject(root, "seed", seed);
  for (size_t i = 0; i < plan->n_options; i++)
    cJSON_AddItemToArray(options, cJSON_CreateString(plan->options[i]));
  cJSON_AddItemToObject(root, "options", options);
  for (size_t i = 0; i < plan->n_cells; i++) {
    const SweepPlanCell *c = &plan->cells[i];
    cJSON *cell = cJSON_CreateObject();
    cJSON_AddNumberToObject(cell, "id", (double)c->id);
    cJSON_AddStringToObject(cell, "name", c->name);
    cJSON_AddNumberToObject(cell, "length", (double)c->length);
    if (c->task[0]) {
      cJSON_AddStringToObject(cell, "task", c->task);
      cJSON_AddNumberToObject(cell, "sample", (double)c->sample);
    } else {
      cJSON_AddNumberToObject(cell, "depth", (double)c->depth);
    }
    cJSON_AddItemToArray(cells, cell);
  }
  cJSON_AddItemToObject(root, "cells", cells);
  return obc_json_write(dir, "plan.json", root);
}

/* --- reading ------------------------------------------------------------ */

typedef struct {
  const char *path;
  const cJSON *root;
} PlanReader;

static int bad(const PlanReader *r, const char *what) {
  return obc_fail(OBC_EFORMAT, "%s: %s", r->path, what);
}

/* A string member of obj copied into out (size bytes); false if absent, not
 * a string or too long. */
static bool get_string(const cJSON *obj, const char *name, char *out, size_t size) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsString(item) || strlen(item->valuestring) >= size) return false;
  memcpy(out, item->valuestring, strlen(item->valuestring) + 1);
  return true;
}

/* A whole number in [0, max] exactly representable in a double. */
static bool get_count(const cJSON *obj, const char *name, uint64_t max, uint64_t *out) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!(v >= 0 && v <= (double)max && v <= 9007199254740992.0) || v != (double)(uint64_t)v)
    return false;
  *out = (uint64_t)v;
  return true;
}

static int read_model(const PlanReader *r, SweepPlan *plan) {
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(r->root, "model");
  char hex[32], *end = NULL;
  if (!cJSON_IsObject(model) ||
      !get_string(model, "path", plan->model_path, sizeof plan->model_path))
    return bad(r, "\"model\" must be an object with a \"path\"");
  if (!get_count(model, "bytes", UINT64_MAX, &plan->model_bytes))
    return bad(r, "\"model.bytes\" must be a whole number");
  if (!get_string(model, "fnv1a64", hex, sizeof hex) || strlen(hex) != 16)
    return bad(r, "\"model.fnv1a64\" must be 16 hex digits");
  plan->model_hash = strtoull(hex, &end, 16);
  if (*end) return bad(r, "\"model.fnv1a64\" must be 16 hex digits");
  return 0;
}

static int read_options(const PlanReader *r, SweepPlan *plan) {
  const cJSON *options = cJSON_GetObjectItemCaseSensitive(r->root, "options");
  if (!cJSON_IsArray(options)) return bad(r, "\"options\" must be an array of strings");
  const cJSON *item;
  cJSON_ArrayForEach(item, options) {
    if (!cJSON_IsString(item)) return bad(r, "\"options\" must be an array of strings");
    if (plan->n_options == SWEEP_PLAN_MAX_OPTIONS || strlen(item->valuestring) >= 4096)
      return bad(r, "\"options\" has too many or too long words");
    int rc = sweep_plan_add_option(plan, item->valuestring);
    if (rc) return rc;
  }
  return 0;
}

/* A cell of an eval's plan: a task name of letters, digits and '_', and a
 * sample index. */
static int read_sample_cell(const PlanReader *r, const cJSON *item, size_t index,
                            SweepPlanCell *cell) {
  uint64_t sample = 0;
  char message[160];
  snprintf(message, sizeof message,
           "cell %zu needs a \"task\" (letters, digits, '_') and a \"sample\" index", index);
  if (!get_string(item, "task", cell->task, sizeof cell->task) || !cell->task[0] ||
      strspn(cell->task, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(cell->task) ||
      !get_count(item, "sample", 1u << 30, &sample))
    return bad(r, message);
  cell->sample = (size_t)sample;
  sample_name(cell);
  return 0;
}

static int read_cell(const PlanReader *r, const cJSON *item, size_t index, bool samples,
                     SweepPlanCell *cell) {
  uint64_t id = 0, length = 0, depth = 0;
  char message[128];
  snprintf(message, sizeof message, "cell %zu needs id = %zu, a length >= 1 and a depth 0..100",
           index, index);
  if (!cJSON_IsObject(item) || !get_count(item, "id", SIZE_MAX, &id) || id != index ||
      !get_count(item, "length", 1u << 30, &length) || length == 0 ||
      (!samples && !get_count(item, "depth", 100, &depth)))
    return bad(r, message);
  cell->id = index;
  cell->length = (size_t)length;
  if (samples) return read_sample_cell(r, item, index, cell);
  cell->depth = (size_t)depth;
  snprintf(cell->name, sizeof cell->name, "L%zu_D%zu", cell->length, cell->depth);
  return 0;
}

static int read_cells(const PlanReader *r, SweepPlan *plan) {
  const cJSON *cells = cJSON_GetObjectItemCaseSensitive(r->root, "cells");
  int n = cJSON_IsArray(cells) ? cJSON_GetArraySize(cells) : 0;
  if (n < 1 || n > SWEEP_PLAN_MAX_CELLS) return bad(r, "\"cells\" must be a non-empty array");
  plan->cells = obc_calloc((size_t)n, sizeof *plan->cells, "the sweep's cells");
  if (!plan->cells) return OBC_ENOMEM;
  plan->n_cells = (size_t)n;
  size_t i = 0;
  const cJSON *item;
  cJSON_ArrayForEach(item, cells) {
    int rc = read_cell(r, item, i, !strcmp(plan->command, "eval"), &plan->cells[i]);
    if (rc) return rc;
    i++;
  }
  return OBC_OK;
}

int sweep_plan_read(const char *dir, SweepPlan *plan) {
  memset(plan, 0, sizeof *plan);
  char path[4096];
  if (snprintf(path, sizeof path, "%s/plan.json", dir) >= (int)sizeof path)
    return obc_fail(OBC_EINVAL, "%s: path too long", dir);
  cJSON *root = NULL;
  int rc = json_file_read(path, &root);
  if (rc == OBC_ENOTFOUND)
    return obc_fail(rc,
                    "%s: no plan.json (not a sweep folder? make one with obcache sweep "
                    "--plan ... -o DIR)",
                    dir);
  if (rc) return rc;
  PlanReader r = {path, root};
  snprintf(plan->path, sizeof plan->path, "%s", path);
  char format[64], seed[32], *end = NULL;
  if (!cJSON_IsObject(root) || !get_string(root, "format", format, sizeof format) ||
      strcmp(format, SWEEP_PLAN_FORMAT))
    rc = bad(&r, "not an obcache sweep plan (\"format\" is not \"" SWEEP_PLAN_FORMAT "\")");
  if (!rc && !cJSON_GetObjectItemCaseSensitive(root, "command"))
    snprintf(plan->command, sizeof plan->command, "sweep");
  else if (!rc && (!get_string(root, "command", plan->command, sizeof plan->command) ||
                   (strcmp(plan->command, "sweep") && strcmp(plan->command, "eval"))))
    rc = bad(&r, "\"command\" must be \"sweep\" or \"eval\"");
  if (!rc && !get_string(root, "obcache_version", plan->version, sizeof plan->version))
    rc = bad(&r, "\"obcache_version\" must be a string");
  if (!rc && !get_string(root, "haystack", plan->haystack, sizeof plan->haystack))
    rc = bad(&r, "\"haystack\" must be a string");
  if (!rc && (!get_string(root, "seed", seed, sizeof seed) || !*seed ||
              strspn(seed, "0123456789") != strlen(seed) ||
              (errno = 0, plan->seed = strtoull(seed, &end, 10), *end || errno)))
    rc = bad(&r, "\"seed\" must be a string of digits below 2^64");
  if (!rc) rc = read_model(&r, plan);
  if (!rc) rc = read_options(&r, plan);
  if (!rc) rc = read_cells(&r, plan);
  cJSON_Delete(root);
  if (rc) sweep_plan_free(plan);
  return rc;
}

void sweep_plan_free(SweepPlan *plan) {
  for (size_t i = 0; i < plan->n_options; i++) free(plan->options[i]);
  free(plan->cells);
  memset(plan, 0, sizeof *plan);
}

/* Length of the shortest prefix of dir (at a '/' or its end) that does not
 * exist: the first folder obc_make_dirs would create; 0 when dir exists. */
static size_t first_missing(const char *dir) {
  char prefix[4096];
  size_t n = strlen(dir);
  for (size_t i = 1; i <= n && i < sizeof prefix; i++) {
    if (dir[i] != '/' && dir[i] != '\0') continue;
    memcpy(prefix, dir, i);
    prefix[i] = '\0';
    if (access(prefix, F_OK)) return i;
  }
  return 0;
}

/* Removes the folders of dir that obc_make_dirs created (down to the
 * prefix of length top), deepest first; rmdir leaves any that is not
 * empty. */
static void remove_created(const char *dir, size_t top) {
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  for (size_t n = strlen(path); top && n >= top; n = strlen(path)) {
    rmdir(path);
    char *slash = strrchr(path, '/');
    if (!slash) break;
    *slash = '\0';
  }
}

static bool same_cell(const SweepPlanCell *a, const SweepPlanCell *b) {
  return a->length == b->length && a->depth == b->depth && a->sample == b->sample &&
         !strcmp(a->task, b->task);
}

int sweep_plan_write_or_match(const char *dir, const SweepPlan *plan) {
  char path[4096];
  snprintf(path, sizeof path, "%s/plan.json", dir);
  if (access(path, F_OK)) {
    size_t top = first_missing(dir);
    int rc = obc_make_dirs(dir);
    if (!rc) rc = sweep_plan_write(dir, plan);
    if (rc) remove_created(dir, top);
    return rc;
  }
  SweepPlan old;
  int rc = sweep_plan_read(dir, &old);
  if (rc) return rc;
  const char *command = plan->command[0] ? plan->command : "sweep";
  bool same = !strcmp(old.command, command) && old.model_hash == plan->model_hash &&
              old.n_cells == plan->n_cells && old.n_options == plan->n_options;
  for (size_t i = 0; same && i < plan->n_options; i++)
    same = !strcmp(old.options[i], plan->options[i]);
  for (size_t i = 0; same && i < plan->n_cells; i++)
    same = same_cell(&old.cells[i], &plan->cells[i]);
  sweep_plan_free(&old);
  if (!same)
    return obc_fail(OBC_EINVAL,
                    "%s: already holds a %s with another plan (model, options or cells); "
                    "choose another folder, or run it with obcache %s %s",
                    dir, old.command[0] ? old.command : "sweep", command, dir);
  printf("%s: resuming the %s of the same plan\n", dir, command);
  return OBC_OK;
}

int sweep_plan_check_command(const char *dir, const SweepPlan *plan, const char *command) {
  if (!strcmp(plan->command, command)) return OBC_OK;
  return obc_fail(OBC_EINVAL,
                  "%s: holds an `obcache %s` plan, not a %s (run it with obcache %s %s)", dir,
                  plan->command, command, plan->command, dir);
}
