/* The budget sweep (sweep/replay_sweep.h): for every trace, every score's per-head
 * scores once, then every budget's kept set, offline replay and model replay;
 * rows are collected in memory and written at the end, with the means over
 * traces that the replay figures draw. */
#include "sweep/replay_sweep.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "common/obc_time.h"
#include "replay/model_replay.h"
#include "replay/offline.h"
#include "sweep/cell.h"
#include "sweep/plan.h"
#include "sweep/replay_pairs.h"

void sweep_replay_config_default(SweepReplayConfig *c) {
  static const char *const scores[] = {"attn",     "attn_maxpool", "attn_vl1",   "obc_v",
                                       "obc_k",    "obc_vk",       "recency",    "random",
                                       "oracle@1", "oracle@T",     "decode_attn"};
  static const char *const budgets[] = {"1%", "2%", "5%", "10%", "20%", "40%"};
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < sizeof scores / sizeof *scores; i++)
    snprintf(c->scores[c->n_scores++], sizeof c->scores[0], "%s", scores[i]);
  for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++)
    snprintf(c->budgets[c->n_budgets++], sizeof c->budgets[0], "%s", budgets[i]);
  evict_policy_default(&c->base);
  c->with_model = true;
}

/* One (trace, score, budget) result. */
typedef struct {
  size_t trace, score, budget; /* indices */
  size_t tokens, candidates;
  ReplayOfflineSummary offline;
  int needle_found;                                  /* -1 without model replay or needle */
  double needle_prefix, needle_chars, needle_tokens; /* NaN without model replay or needle */
  double agreement, first_divergence, kl_forced;     /* first_divergence: none = steps + 1 */
  size_t n_steps;   /* replayed decode steps (0 without model replay) */
  double *kl_steps; /* (n_steps) teacher-forced KL per step, or NULL */
} SweepCell;

/* The sweep's rows: every score under every protocol (protocol-major). */
typedef struct {
  char label[64]; /* the score, or score:protocol when several are swept */
  size_t score;   /* index into the given scores */
  EvictProtocol protocol;
} SweepRow;

typedef struct {
  SweepRow rows[EVICT_SWEEP_MAX];
  size_t n_rows;
  size_t n_given, n_protocols; /* given scores and protocols */
  char (*traces)[4096];        /* (n_traces) */
  size_t n_traces;
  SweepCell *cells; /* (n_traces * n_scores * n_budgets) */
  size_t n_cells;
  char trace_model[256];    /* the model named by the first trace (titles without --model) */
  double model_seconds;     /* wall time of the model replays (not their set-up) */
  size_t model_sets;        /* kept sets replayed with the model */
  double offline_seconds;   /* wall time of the offline replays */
  const char *command_line; /* recorded in the --keep-out files */
} SweepRun;

static int name_order(const void *a, const void *b) { return strcmp(a, b); }

/* The traces of a sweep folder (sweep/cell.h): those of its finished cells,
 * in plan order; unfinished cells are named and skipped. */
static int list_cell_traces(const char *input, SweepRun *run) {
  SweepPlan plan;
  int rc = sweep_plan_read(input, &plan);
  for (size_t i = 0; !rc && i < plan.n_cells && run->n_traces < EVICT_SWEEP_MAX_TRACES; i++) {
    SweepCellState state;
    char detail[512];
    rc =
        sweep_cell_state(input, &plan.cells[i], SWEEP_STALE_AFTER_S, &state, detail, sizeof detail);
    if (!rc && state != SWEEP_CELL_DONE)
      fprintf(stderr, "replay: %s: cell %zu %s is %s, left out\n", input, i, plan.cells[i].name,
              sweep_cell_state_name(state));
    else if (!rc)
      snprintf(run->traces[run->n_traces++], sizeof run->traces[0], "%s/cells/%zu/trace.h5", input,
               i);
  }
  if (!rc && run->n_traces == 0)
    rc = obc_fail(OBC_ENOTFOUND, "%s: no finished cell in the sweep folder", input);
  sweep_plan_free(&plan);
  return rc;
}

/* The traces of input: the file itself, a sweep folder's finished cells, or
 * the folder's *.h5 by name. */
static int list_traces(const char *input, SweepRun *run) {
  struct stat st;
  if (stat(input, &st) != 0)
    return obc_fail(OBC_EIO, "%s: not found (expected a trace or a sweep folder)", input);
  run->traces = obc_calloc(EVICT_SWEEP_MAX_TRACES, sizeof *run->traces, "trace list");
  if (!run->traces) return OBC_ENOMEM;
  if (!S_ISDIR(st.st_mode)) {
    snprintf(run->traces[0], sizeof run->traces[0], "%s", input);
    run->n_traces = 1;
    return OBC_OK;
  }
  char plan_path[4096];
  snprintf(plan_path, sizeof plan_path, "%s/plan.json", input);
  if (access(plan_path, F_OK) == 0) return list_cell_traces(input, run);
  DIR *dir = opendir(input);
  if (!dir) return obc_fail(OBC_EIO, "%s: cannot list the folder", input);
  struct dirent *e;
  while ((e = readdir(dir)) && run->n_traces < EVICT_SWEEP_MAX_TRACES) {
    size_t n = strlen(e->d_name);
    if (n > 3 && !strcmp(e->d_name + n - 3, ".h5") && !strstr(e->d_name, ".tmp."))
      snprintf(run->traces[run->n_traces++], sizeof run->traces[0], "%s/%s", input, e->d_name);
  }
  closedir(dir);
  if (run->n_traces == 0)
    return obc_fail(OBC_ENOTFOUND,
                    "%s: no *.h5 traces in the folder (expected obcache sweep's "
                    "output)",
                    input);
  qsort(run->traces, run->n_traces, sizeof *run->traces, name_order);
  return OBC_OK;
}

/* A kept set as DIR/TRACE.SCORE.BUDGET.PROTOCOL.h5 (--keep-out). */
static int write_keep(const SweepReplayConfig *c, const SweepRun *run, size_t t, size_t s, size_t b,
                      const EvictKeepSet *keep) {
  const char *base = strrchr(run->traces[t], '/');
  base = base ? base + 1 : run->traces[t];
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s/%.*s.%s.%s.%s.h5", c->keep_out, (int)(strlen(base) - 3),
                   base, c->scores[run->rows[s].score], c->budgets[b],
                   evict_protocol_name(run->rows[s].protocol));
  if (n < 0 || (size_t)n >= sizeof path)
    return obc_fail(OBC_EINVAL, "--keep-out %s: a keep file's path is too long", c->keep_out);
  return evict_keep_write(path, keep, run->traces[t], run->command_line);
}

/* Checks every budget against the trace before any long computation. */
static int check_budgets(const SweepReplayConfig *c, const SweepRun *run, TraceReader *reader) {
  for (size_t s = 0; s < run->n_rows; s++)
    for (size_t b = 0; b < c->n_budgets; b++) {
      EvictPolicy p = c->base;
      size_t n = 0, k = 0;
      p.protocol = run->rows[s].protocol;
      int rc = evict_policy_set_score(&p, c->scores[run->rows[s].score]);
      if (!rc) rc = evict_policy_set_budget(&p, c->budgets[b]);
      if (!rc) rc = evict_policy_candidates(&p, trace_meta(reader), &n);
      if (!rc) rc = evict_policy_budget_tokens(&p, n, &k);
      if (rc) return obc_fail_context(rc, "%s", trace_path(reader));
    }
  return OBC_OK;
}

/* The model-replay fields of a cell. */
static int sweep_cell_from_replay(const ReplayAnswer *replay, SweepCell *cell) {
  cell->needle_found = replay->needle_found;
  if (replay->needle_chars > 0) {
    cell->needle_prefix = (double)replay->needle_prefix;
    cell->needle_chars = (double)replay->needle_chars;
    cell->needle_tokens = replay->needle_tokens;
  }
  cell->agreement = replay->agreement;
  cell->first_divergence =
      (double)(replay->first_divergence ? replay->first_divergence : replay->n_steps + 1);
  cell->kl_forced = replay->kl_forced_mean;
  cell->n_steps = replay->n_steps;
  cell->kl_steps = obc_malloc(replay->n_steps * sizeof *cell->kl_steps + 1, "KL per step");
  if (!cell->kl_steps) return OBC_ENOMEM;
  memcpy(cell->kl_steps, replay->kl_forced, replay->n_steps * sizeof *cell->kl_steps);
  return OBC_OK;
}

/* The progress line of a finished cell (on a terminal only). */
static void report_cell(const SweepReplayConfig *c, const SweepRun *run, const SweepCell *cell) {
  if (!isatty(STDERR_FILENO)) return;
  fprintf(stderr, "\rreplay sweep: trace %zu/%zu, %-9s %-5s rel.err %.3f needle %s KL %.3g   ",
          cell->trace + 1, run->n_traces, run->rows[cell->score].label, c->budgets[cell->budget],
          cell->offline.rel_error,
          cell->needle_found < 0 ? "n/a"
          : cell->needle_found   ? "yes"
                                 : "no",
          cell->kl_forced);
}

/* Kept sets waiting for one batched model replay (replay_model_run_batch),
 * with the cells they fill. */
typedef struct {
  EvictKeepSet *keeps; /* (cap) */
  size_t *cells;       /* (cap) indices into run->cells */
  ReplayAnswer *outs;  /* (cap) */
  size_t n, cap;
} SweepPending;

static void pending_free(SweepPending *q) {
  for (size_t i = 0; i < q->n; i++) evict_keep_set_free(&q->keeps[i]);
  free(q->keeps);
  free(q->cells);
  free(q->outs);
  memset(q, 0, sizeof *q);
}

/* Replays the waiting sets together and fills their cells. */
static int pending_flush(const SweepReplayConfig *c, Replayer *replayer, SweepRun *run,
                         SweepPending *q) {
  double start = obc_now_seconds();
  int rc = replay_model_run_batch(replayer, q->keeps, q->n, c->batch, q->outs);
  run->model_seconds += obc_now_seconds() - start;
  run->model_sets += q->n;
  for (size_t i = 0; i < q->n && !rc; i++) {
    rc = sweep_cell_from_replay(&q->outs[i], &run->cells[q->cells[i]]);
    if (!rc) report_cell(c, run, &run->cells[q->cells[i]]);
  }
  for (size_t i = 0; i < q->n; i++) evict_keep_set_free(&q->keeps[i]);
  q->n = 0;
  return rc;
}

/* The model replay of one cell's kept set (keep is taken over): at once
 * with --batch 1, else queued for the next batched pass. */
static int replay_cell(const SweepReplayConfig *c, Replayer *replayer, SweepRun *run, size_t cell,
                       EvictKeepSet *keep, SweepPending *q) {
  if (c->batch == 1) {
    double start = obc_now_seconds();
    int rc = replay_model_run(replayer, keep, q->outs);
    run->model_seconds += obc_now_seconds() - start;
    run->model_sets++;
    if (!rc) rc = sweep_cell_from_replay(q->outs, &run->cells[cell]);
    if (!rc) report_cell(c, run, &run->cells[cell]);
    evict_keep_set_free(keep);
    return rc;
  }
  q->keeps[q->n] = *keep;
  q->cells[q->n++] = cell;
  return q->n == q->cap ? pending_flush(c, replayer, run, q) : OBC_OK;
}

static int pending_init(const SweepReplayConfig *c, const SweepRun *run, Replayer *replayer,
                        SweepPending *q) {
  memset(q, 0, sizeof *q);
  q->cap = c->batch == 1 ? 1 : replay_model_batch_seqs(replayer, c->batch) / 2;
  size_t cells = run->n_rows * c->n_budgets;
  if (q->cap > cells) q->cap = cells ? cells : 1;
  q->keeps = obc_malloc(q->cap * sizeof *q->keeps, "batched replay sets");
  q->cells = obc_malloc(q->cap * sizeof *q->cells, "batched replay sets");
  q->outs = obc_malloc(q->cap * sizeof *q->outs, "replay results");
  return q->keeps && q->cells && q->outs ? OBC_OK : OBC_ENOMEM;
}

/* A cell of trace t, score s, budget b (tokens kept of candidates), with
 * its results unset. */
static SweepCell cell_new(size_t t, size_t s, size_t b, size_t tokens, size_t candidates) {
  return (SweepCell){.trace = t,
                     .score = s,
                     .budget = b,
                     .tokens = tokens,
                     .candidates = candidates,
                     .needle_found = -1,
                     .needle_prefix = NAN,
                     .needle_chars = NAN,
                     .needle_tokens = NAN,
                     .agreement = NAN,
                     .first_divergence = NAN,
                     .kl_forced = NAN};
}

/* Kept sets gathered for one offline pass, whose cells are
 * run->cells[run->n_cells ..]. */
typedef struct {
  EvictKeepSet *keeps; /* (cap) */
  size_t n, cap;
} SweepChunk;

/* Bytes of kept-set masks a sweep holds at once (one chunk). */
#define SWEEP_SETS_BYTES ((size_t)512 << 20)

static int chunk_init(const SweepReplayConfig *c, const SweepRun *run, const TraceMeta *meta,
                      SweepChunk *chunk) {
  size_t per_set = meta->model.n_layers * meta->model.n_kv_heads * meta->n_prompt + 1;
  size_t all = run->n_rows * c->n_budgets;
  chunk->cap = c->offline_batch ? c->offline_batch : SWEEP_SETS_BYTES / per_set;
  chunk->cap = chunk->cap < 1 ? 1 : chunk->cap > all ? all : chunk->cap;
  chunk->n = 0;
  chunk->keeps = obc_malloc(chunk->cap * sizeof *chunk->keeps, "kept sets");
  return chunk->keeps ? OBC_OK : OBC_ENOMEM;
}

static void chunk_free(SweepChunk *chunk) {
  for (size_t i = 0; i < chunk->n; i++) evict_keep_set_free(&chunk->keeps[i]);
  free(chunk->keeps);
  memset(chunk, 0, sizeof *chunk);
}

/* The chunk's offline replay, one pass (replay_offline_run_many), or one set
 * at a time with --offline-batch 1 (replay_offline_run, the reference), into
 * its cells, which then count as made; then its model replays in order (the
 * sets are handed over, the chunk left empty). */
static int chunk_flush(const SweepReplayConfig *c, TraceReader *reader, Replayer *replayer,
                       SweepRun *run, SweepChunk *chunk, SweepPending *pending) {
  size_t n = chunk->n, cell0 = run->n_cells;
  ReplayOfflineResult *outs = obc_malloc(n * sizeof *outs, "offline results");
  int rc = outs ? OBC_OK : OBC_ENOMEM;
  double start = obc_now_seconds();
  for (size_t i = 0; i < n && !rc && c->offline_batch == 1; i++)
    rc = replay_offline_run(reader, &chunk->keeps[i], &outs[i]);
  if (!rc && c->offline_batch != 1) rc = replay_offline_run_many(reader, chunk->keeps, n, outs);
  run->offline_seconds += obc_now_seconds() - start;
  for (size_t i = 0; i < n && !rc; i++) {
    replay_offline_summarise(&outs[i], &run->cells[cell0 + i].offline);
    replay_offline_result_free(&outs[i]);
  }
  free(outs);
  if (!rc) run->n_cells += n;
  chunk->n = 0;
  for (size_t i = 0; i < n; i++) {
    if (!rc && replayer)
      rc = replay_cell(c, replayer, run, cell0 + i, &chunk->keeps[i], pending);
    else {
      evict_keep_set_free(&chunk->keeps[i]);
      if (!rc) report_cell(c, run, &run->cells[cell0 + i]);
    }
  }
  return rc;
}

static int sweep_trace(const SweepReplayConfig *c, const Model *model, size_t t, SweepRun *run) {
  TraceReader *reader = NULL;
  int rc = trace_open(run->traces[t], &reader);
  if (rc) return rc;
  if (t == 0)
    snprintf(run->trace_model, sizeof run->trace_model, "%s", trace_meta(reader)->model.name);
  size_t first = 0;
  if (trace_meta_decode_rows(trace_meta(reader), &first) == 0)
    rc = obc_fail(OBC_EINVAL, "%s: no decode rows captured (replay needs them)", run->traces[t]);
  if (!rc) rc = check_budgets(c, run, reader);
  unsigned char *protect = NULL;
  if (!rc) rc = evict_policy_protected(&c->base, trace_meta(reader), run->traces[t], &protect);
  Replayer *replayer = NULL;
  if (!rc && model)
    rc = replay_model_open(model, reader, c->steps, c->threads, c->device, &replayer);
  SweepPending pending = {0};
  if (!rc && replayer) rc = pending_init(c, run, replayer, &pending);
  /* The (score, budget) kept sets are gathered in chunks (all of the
   * trace's when their masks fit in SWEEP_SETS_BYTES), each replayed offline
   * in one pass (replay_offline_run_many) and then handed to the model replay
   * in order. */
  SweepChunk chunk = {0};
  if (!rc) rc = chunk_init(c, run, trace_meta(reader), &chunk);
  const TraceMeta *meta = trace_meta(reader);
  for (size_t s = 0; s < run->n_rows && !rc; s++) {
    EvictPolicy p = c->base;
    p.protocol = run->rows[s].protocol;
    rc = evict_policy_set_score(&p, c->scores[run->rows[s].score]);
    double *scores = NULL;
    size_t n = 0, window = 0;
    if (!rc) rc = evict_policy_scores(reader, &p, &scores, &n, &window);
    for (size_t b = 0; b < c->n_budgets && !rc; b++) {
      rc = evict_policy_set_budget(&p, c->budgets[b]);
      EvictKeepSet *keep = &chunk.keeps[chunk.n];
      if (!rc)
        rc = evict_keep_from_scores(&p, scores, meta->model.n_layers, meta->model.n_kv_heads,
                                    meta->n_prompt, n, protect, keep);
      if (rc) {
        obc_fail_context(rc, "%s", run->traces[t]);
        break;
      }
      keep->window = window;
      snprintf(keep->trace_hash, sizeof keep->trace_hash, "%s", meta->content_hash);
      if (c->keep_out && (rc = write_keep(c, run, t, s, b, keep))) break;
      run->cells[run->n_cells + chunk.n++] = cell_new(t, s, b, keep->budget, n);
      if (chunk.n == chunk.cap) rc = chunk_flush(c, reader, replayer, run, &chunk, &pending);
    }
    free(scores);
  }
  if (!rc && chunk.n) rc = chunk_flush(c, reader, replayer, run, &chunk, &pending);
  chunk_free(&chunk);
  if (!rc && pending.n > 0) rc = pending_flush(c, replayer, run, &pending);
  if (isatty(STDERR_FILENO) && run->n_cells > 0) fprintf(stderr, "\n");
  pending_free(&pending);
  replay_model_close(replayer);
  free(protect);
  trace_close(reader);
  return rc;
}

/* A CSV cell: 9 significant digits (as the analysis CSVs), so that a reader
 * rounding it to the printed table's 4 decimals rounds once and gets the
 * table's number. */
static const char *number(double v, char *buf, size_t size) {
  if (isfinite(v))
    snprintf(buf, size, "%.9g", v);
  else
    snprintf(buf, size, "nan");
  return buf;
}

/* The mean over traces of one (score, budget). */
typedef struct {
  double fraction, rel_error, rel_error_step1, mass_lost, needle_kept, needle_found, agreement,
      first_divergence, kl_forced;
  double needle_prefix, needle_prefix_share, needle_tokens; /* over traces with a needle */
  size_t n_found;                                           /* traces with a needle match */
} SweepMean;

/* A measure of the printed tables. */
typedef enum {
  SWEEP_NEEDLE_FOUND,        /* share of traces whose answer has the needle */
  SWEEP_KL_FORCED,           /* teacher-forced KL, mean over decode steps */
  SWEEP_REL_ERROR,           /* offline relative output error */
  SWEEP_NEEDLE_KEPT,         /* share of the needle span kept */
  SWEEP_NEEDLE_PREFIX_SHARE, /* share of the value's characters from its start */
  SWEEP_FIRST_DIVERGENCE,    /* first diverging free-running step */
} SweepMeasure;

static double mean_measure(const SweepMean *m, SweepMeasure measure) {
  switch (measure) {
    case SWEEP_NEEDLE_FOUND: return m->needle_found;
    case SWEEP_KL_FORCED: return m->kl_forced;
    case SWEEP_REL_ERROR: return m->rel_error;
    case SWEEP_NEEDLE_KEPT: return m->needle_kept;
    case SWEEP_NEEDLE_PREFIX_SHARE: return m->needle_prefix_share;
    case SWEEP_FIRST_DIVERGENCE: return m->first_divergence;
  }
  return NAN;
}

static void sweep_mean(const SweepRun *run, size_t s, size_t b, SweepMean *m) {
  memset(m, 0, sizeof *m);
  size_t n = 0;
  for (size_t i = 0; i < run->n_cells; i++) {
    const SweepCell *c = &run->cells[i];
    if (c->score != s || c->budget != b) continue;
    n++;
    m->fraction += (double)c->tokens / c->candidates;
    m->rel_error += c->offline.rel_error;
    m->rel_error_step1 += c->offline.rel_error_step1;
    m->mass_lost += c->offline.mass_lost;
    m->needle_kept += c->offline.needle_kept;
    m->agreement += c->agreement;
    m->first_divergence += c->first_divergence;
    m->kl_forced += c->kl_forced;
    if (c->needle_found >= 0) {
      m->needle_found += c->needle_found;
      m->needle_prefix += c->needle_prefix;
      m->needle_prefix_share += c->needle_prefix / c->needle_chars;
      m->needle_tokens += c->needle_tokens;
      m->n_found++;
    }
  }
  double *fields[] = {&m->fraction,    &m->rel_error, &m->rel_error_step1,  &m->mass_lost,
                      &m->needle_kept, &m->agreement, &m->first_divergence, &m->kl_forced};
  for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) *fields[f] = n ? *fields[f] / n : NAN;
  double *needle[] = {&m->needle_found, &m->needle_prefix, &m->needle_prefix_share,
                      &m->needle_tokens};
  for (size_t f = 0; f < sizeof needle / sizeof *needle; f++)
    *needle[f] = m->n_found ? *needle[f] / m->n_found : NAN;
}

/* kl_steps.csv: the teacher-forced KL of every (score, budget, decode step),
 * mean over the traces that replayed that step; no rows without the model. */
static int write_kl_steps(ObcOutputSet *set, const SweepReplayConfig *c, const SweepRun *run) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "kl_steps.csv", &fp);
  if (rc) return rc;
  fprintf(fp, "score,budget,fraction,step,traces,kl_forced,protocol\n");
  size_t max_steps = 0;
  for (size_t i = 0; i < run->n_cells; i++)
    max_steps = run->cells[i].n_steps > max_steps ? run->cells[i].n_steps : max_steps;
  for (size_t s = 0; s < run->n_rows; s++)
    for (size_t b = 0; b < c->n_budgets; b++)
      for (size_t t = 0; t < max_steps; t++) {
        double kl = 0.0, fraction = 0.0;
        size_t n = 0;
        for (size_t i = 0; i < run->n_cells; i++) {
          const SweepCell *x = &run->cells[i];
          if (x->score != s || x->budget != b || t >= x->n_steps) continue;
          kl += x->kl_steps[t];
          fraction += (double)x->tokens / (double)x->candidates;
          n++;
        }
        if (n)
          fprintf(fp, "%s,%s,%.6g,%zu,%zu,%.6g,%s\n", run->rows[s].label, c->budgets[b],
                  fraction / n, t + 1, n, kl / n, evict_protocol_name(run->rows[s].protocol));
      }
  return obc_output_close(set, fp);
}

/* Every pair of the sweep's rows: baseline and paired score under the same
 * protocol (sweep/replay_pairs.h); returns the count (at most max). */
static size_t row_pairs(const SweepReplayConfig *c, const SweepRun *run, SweepPair *pairs,
                        size_t max) {
  SweepPair by_score[EVICT_SWEEP_MAX];
  size_t n = sweep_pairs_find((const char(*)[32])c->scores, run->n_given, by_score,
                              EVICT_SWEEP_MAX),
         count = 0;
  for (size_t p = 0; p < run->n_protocols; p++)
    for (size_t i = 0; i < n && count < max; i++)
      pairs[count++] = (SweepPair){.baseline = p * run->n_given + by_score[i].baseline,
                                   .paired = p * run->n_given + by_score[i].paired};
  return count;
}

/* replay_pairs.csv: per pair and budget the baseline's and the paired
 * score's means side by side (only when the sweep has pairs). */
static int write_pairs(ObcOutputSet *set, const SweepReplayConfig *c, const SweepRun *run) {
  SweepPair pairs[EVICT_SWEEP_MAX];
  size_t n = row_pairs(c, run, pairs, EVICT_SWEEP_MAX);
  if (n == 0) return OBC_OK;
  FILE *fp = NULL;
  int rc = obc_output_open(set, "replay_pairs.csv", &fp);
  if (rc) return rc;
  fprintf(fp,
          "protocol,baseline,paired,budget,fraction,traces,needle_found_baseline,"
          "needle_found_paired,needle_prefix_share_baseline,needle_prefix_share_paired,"
          "kl_forced_baseline,kl_forced_paired,rel_error_baseline,rel_error_paired\n");
  for (size_t i = 0; i < n; i++)
    for (size_t b = 0; b < c->n_budgets; b++) {
      SweepMean x, y;
      sweep_mean(run, pairs[i].baseline, b, &x);
      sweep_mean(run, pairs[i].paired, b, &y);
      char v[6][32];
      fprintf(fp, "%s,%s,%s,%s,%.6g,%zu,%s,%s,%s,%s,%s,%s,%.6g,%.6g\n",
              evict_protocol_name(run->rows[pairs[i].baseline].protocol),
              c->scores[run->rows[pairs[i].baseline].score],
              c->scores[run->rows[pairs[i].paired].score], c->budgets[b], x.fraction, run->n_traces,
              number(x.needle_found, v[0], 32), number(y.needle_found, v[1], 32),
              number(x.needle_prefix_share, v[2], 32), number(y.needle_prefix_share, v[3], 32),
              number(x.kl_forced, v[4], 32), number(y.kl_forced, v[5], 32), x.rel_error,
              y.rel_error);
    }
  return obc_output_close(set, fp);
}

/* The paired table: per protocol, one row per pair and budget columns,
 * each cell "baseline -> paired" of needle retrieval (with the model) or
 * the offline relative output error. */
static void print_pairs(const SweepReplayConfig *c, const SweepRun *run) {
  SweepPair pairs[EVICT_SWEEP_MAX];
  size_t n = row_pairs(c, run, pairs, EVICT_SWEEP_MAX);
  if (n == 0) return;
  static const struct {
    SweepMeasure measure;
    const char *title;
  } tables[] = {
      {SWEEP_NEEDLE_FOUND, "needle retrieval"},
      {SWEEP_KL_FORCED, "KL(full || evicted), teacher-forced"},
      {SWEEP_REL_ERROR, "offline relative output error"},
  };
  for (size_t k = c->with_model ? 0 : 2; k < sizeof tables / sizeof *tables; k++) {
    SweepMeasure which = tables[k].measure;
    printf("\nbaseline vs baseline + OBCache: %s (baseline -> paired)\n", tables[k].title);
    printf("%-10s %-26s", "protocol", "pair");
    for (size_t b = 0; b < c->n_budgets; b++) printf(" %15s", c->budgets[b]);
    printf("\n");
    for (size_t i = 0; i < n; i++) {
      char pair[64];
      snprintf(pair, sizeof pair, "%s vs +%s", c->scores[run->rows[pairs[i].baseline].score],
               c->scores[run->rows[pairs[i].paired].score] +
                   strlen(c->scores[run->rows[pairs[i].baseline].score]) + 1);
      printf("%-10s %-26s", evict_protocol_name(run->rows[pairs[i].baseline].protocol), pair);
      for (size_t b = 0; b < c->n_budgets; b++) {
        SweepMean x, y;
        sweep_mean(run, pairs[i].baseline, b, &x);
        sweep_mean(run, pairs[i].paired, b, &y);
        double u = mean_measure(&x, which), v = mean_measure(&y, which);
        char cell[32];
        snprintf(cell, sizeof cell, "%.3g->%.3g", u, v);
        printf(" %15s", cell);
      }
      printf("\n");
    }
  }
}

/* Every score under every protocol, protocol-major, with its label. */
static int build_rows(const SweepReplayConfig *c, SweepRun *run) {
  EvictProtocol protocols[EVICT_N_PROTOCOLS] = {c->base.protocol};
  size_t n_protocols = c->n_protocols ? c->n_protocols : 1;
  if (c->n_protocols) memcpy(protocols, c->protocols, n_protocols * sizeof *protocols);
  if (n_protocols * c->n_scores > EVICT_SWEEP_MAX)
    return obc_fail(OBC_EINVAL, "replay --sweep: %zu scores x %zu protocols (expected at most %d)",
                    c->n_scores, n_protocols, EVICT_SWEEP_MAX);
  run->n_given = c->n_scores;
  run->n_protocols = n_protocols;
  run->n_rows = 0;
  for (size_t p = 0; p < n_protocols; p++)
    for (size_t s = 0; s < c->n_scores; s++) {
      SweepRow *row = &run->rows[run->n_rows++];
      row->score = s;
      row->protocol = protocols[p];
      if (n_protocols > 1)
        snprintf(row->label, sizeof row->label, "%s:%s", c->scores[s],
                 evict_protocol_name(protocols[p]));
      else
        snprintf(row->label, sizeof row->label, "%s", c->scores[s]);
    }
  return OBC_OK;
}

/* ---- the CSV columns ---- */

/* How a column prints its value: text, a count, an int, a double (%.6g), or
 * a double through number() ("nan" for a missing value). */
typedef enum {
  SWEEP_COLUMN_TEXT,
  SWEEP_COLUMN_SIZE,
  SWEEP_COLUMN_INT,
  SWEEP_COLUMN_REAL,
  SWEEP_COLUMN_NUMBER,
} SweepColumnKind;

/* One column of a CSV: its header name, how it prints, and where its value
 * lies in the row's record (offsetof). */
typedef struct {
  const char *name;
  SweepColumnKind kind;
  size_t offset;
} SweepColumn;

/* A row of replay_cells.csv: one (trace, score, budget). */
typedef struct {
  const char *trace, *score, *budget, *protocol;
  SweepCell cell;
} SweepCellRecord;

/* A row of replay_sweep.csv: the mean over traces of one (score, budget). */
typedef struct {
  const char *score, *budget, *protocol;
  size_t traces;
  SweepMean mean;
} SweepMeanRecord;

#define CELL_COLUMN(name, kind, field) \
  { name, SWEEP_COLUMN_##kind, offsetof(SweepCellRecord, field) }
static const SweepColumn cell_columns[] = {
    CELL_COLUMN("trace", TEXT, trace),
    CELL_COLUMN("score", TEXT, score),
    CELL_COLUMN("budget", TEXT, budget),
    CELL_COLUMN("tokens", SIZE, cell.tokens),
    CELL_COLUMN("candidates", SIZE, cell.candidates),
    CELL_COLUMN("rel_error", REAL, cell.offline.rel_error),
    CELL_COLUMN("rel_error_step1", REAL, cell.offline.rel_error_step1),
    CELL_COLUMN("mass_lost", REAL, cell.offline.mass_lost),
    CELL_COLUMN("needle_kept", NUMBER, cell.offline.needle_kept),
    CELL_COLUMN("needle_found", INT, cell.needle_found),
    CELL_COLUMN("needle_prefix", NUMBER, cell.needle_prefix),
    CELL_COLUMN("needle_chars", NUMBER, cell.needle_chars),
    CELL_COLUMN("needle_tokens", NUMBER, cell.needle_tokens),
    CELL_COLUMN("agreement", NUMBER, cell.agreement),
    CELL_COLUMN("first_divergence", NUMBER, cell.first_divergence),
    CELL_COLUMN("kl_forced", NUMBER, cell.kl_forced),
    CELL_COLUMN("protocol", TEXT, protocol),
};
#undef CELL_COLUMN

#define MEAN_COLUMN(name, kind, field) \
  { name, SWEEP_COLUMN_##kind, offsetof(SweepMeanRecord, field) }
static const SweepColumn mean_columns[] = {
    MEAN_COLUMN("score", TEXT, score),
    MEAN_COLUMN("budget", TEXT, budget),
    MEAN_COLUMN("fraction", REAL, mean.fraction),
    MEAN_COLUMN("traces", SIZE, traces),
    MEAN_COLUMN("rel_error", REAL, mean.rel_error),
    MEAN_COLUMN("rel_error_step1", REAL, mean.rel_error_step1),
    MEAN_COLUMN("mass_lost", REAL, mean.mass_lost),
    MEAN_COLUMN("needle_kept", NUMBER, mean.needle_kept),
    MEAN_COLUMN("needle_found", NUMBER, mean.needle_found),
    MEAN_COLUMN("needle_prefix", NUMBER, mean.needle_prefix),
    MEAN_COLUMN("needle_prefix_share", NUMBER, mean.needle_prefix_share),
    MEAN_COLUMN("needle_tokens", NUMBER, mean.needle_tokens),
    MEAN_COLUMN("agreement", NUMBER, mean.agreement),
    MEAN_COLUMN("first_divergence", NUMBER, mean.first_divergence),
    MEAN_COLUMN("kl_forced", NUMBER, mean.kl_forced),
    MEAN_COLUMN("protocol", TEXT, protocol),
};
#undef MEAN_COLUMN

static void write_header(FILE *fp, const SweepColumn *columns, size_t n) {
  for (size_t i = 0; i < n; i++) fprintf(fp, "%s%s", i ? "," : "", columns[i].name);
  fputc('\n', fp);
}

/* One row: every column's value from record. */
static void write_row(FILE *fp, const SweepColumn *columns, size_t n, const void *record) {
  for (size_t i = 0; i < n; i++) {
    const char *at = (const char *)record + columns[i].offset;
    char buf[32];
    if (i) fputc(',', fp);
    switch (columns[i].kind) {
      case SWEEP_COLUMN_TEXT: fputs(*(const char *const *)at, fp); break;
      case SWEEP_COLUMN_SIZE: fprintf(fp, "%zu", *(const size_t *)at); break;
      case SWEEP_COLUMN_INT: fprintf(fp, "%d", *(const int *)at); break;
      case SWEEP_COLUMN_REAL: fprintf(fp, "%.6g", *(const double *)at); break;
      case SWEEP_COLUMN_NUMBER: fputs(number(*(const double *)at, buf, sizeof buf), fp); break;
    }
  }
  fputc('\n', fp);
}

#define N_COLUMNS(table) (sizeof(table) / sizeof *(table))

/* The files of the set, in order (replay_pairs.csv only with pairs). */
static int write_files(ObcOutputSet *set, const SweepReplayConfig *c, const SweepRun *run,
                       const char *model_name, const char *command_line) {
  FILE *fp = NULL;
  int rc = obc_output_open(set, "replay_cells.csv", &fp);
  if (rc) return rc;
  write_header(fp, cell_columns, N_COLUMNS(cell_columns));
  for (size_t i = 0; i < run->n_cells; i++) {
    const SweepCell *x = &run->cells[i];
    SweepCellRecord record = {
        .trace = run->traces[x->trace],
        .score = run->rows[x->score].label,
        .budget = c->budgets[x->budget],
        .protocol = evict_protocol_name(run->rows[x->score].protocol),
        .cell = *x,
    };
    write_row(fp, cell_columns, N_COLUMNS(cell_columns), &record);
  }
  if ((rc = obc_output_close(set, fp))) return rc;

  if ((rc = obc_output_open(set, "replay_sweep.csv", &fp))) return rc;
  write_header(fp, mean_columns, N_COLUMNS(mean_columns));
  for (size_t s = 0; s < run->n_rows; s++)
    for (size_t b = 0; b < c->n_budgets; b++) {
      SweepMeanRecord record = {
          .score = run->rows[s].label,
          .budget = c->budgets[b],
          .protocol = evict_protocol_name(run->rows[s].protocol),
          .traces = run->n_traces,
      };
      sweep_mean(run, s, b, &record.mean);
      write_row(fp, mean_columns, N_COLUMNS(mean_columns), &record);
    }
  if ((rc = obc_output_close(set, fp))) return rc;
  if ((rc = write_kl_steps(set, c, run))) return rc;
  if ((rc = write_pairs(set, c, run))) return rc;

  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "kind", "replay_sweep");
  cJSON_AddStringToObject(root, "tool_version", OBC_VERSION);
  cJSON_AddStringToObject(root, "command_line", command_line ? command_line : "");
  cJSON_AddStringToObject(root, "model", model_name);
  cJSON *traces = cJSON_AddArrayToObject(root, "traces");
  for (size_t t = 0; t < run->n_traces; t++)
    cJSON_AddItemToArray(traces, cJSON_CreateString(run->traces[t]));
  cJSON_AddNumberToObject(root, "window", (double)c->base.window);
  cJSON_AddNumberToObject(root, "recent", (double)c->base.recent);
  cJSON_AddNumberToObject(root, "sinks", (double)c->base.sinks);
  cJSON_AddStringToObject(root, "allocation", evict_allocation_name(c->base.allocation));
  cJSON_AddStringToObject(root, "budget_rule", evict_budget_rule_name(c->base.budget_rule));
  cJSON *protocols = cJSON_AddArrayToObject(root, "protocols");
  for (size_t i = 0; i < run->n_protocols; i++)
    cJSON_AddItemToArray(
        protocols, cJSON_CreateString(evict_protocol_name(run->rows[i * run->n_given].protocol)));
  char protect[EVICT_MAX_PROTECT * 64];
  evict_policy_protect_text(&c->base, protect, sizeof protect);
  cJSON_AddStringToObject(root, "protect", protect);
  cJSON_AddStringToObject(root, "protect_budget", EVICT_PROTECT_BUDGET);
  cJSON_AddNumberToObject(root, "seed", (double)c->base.seed);
  cJSON_AddBoolToObject(root, "model_replay", c->with_model);
  cJSON_AddNumberToObject(root, "steps", (double)c->steps);
  return obc_output_json(set, "replay_sweep.json", root);
}

/* replay_cells.csv, replay_sweep.csv, kl_steps.csv, replay_pairs.csv (with
 * pairs) and replay_sweep.json in dir: all of them or none (an output set). */
static int write_outputs(const char *dir, const SweepReplayConfig *c, const SweepRun *run,
                         const char *model_name, const char *command_line) {
  ObcOutputSet set;
  int rc = obc_output_begin(&set, dir);
  if (!rc) rc = write_files(&set, c, run, model_name, command_line);
  return obc_output_end(&set, rc);
}

/* One table of a measure: rows = scores, columns = budgets. */
static void print_table(const SweepReplayConfig *c, const SweepRun *run, SweepMeasure which,
                        const char *title) {
  int width = 12;
  for (size_t s = 0; s < run->n_rows; s++)
    if ((int)strlen(run->rows[s].label) > width) width = (int)strlen(run->rows[s].label);
  printf("\n%s\n%-*s", title, width, "score");
  for (size_t b = 0; b < c->n_budgets; b++) printf(" %9s", c->budgets[b]);
  printf("\n");
  for (size_t s = 0; s < run->n_rows; s++) {
    printf("%-*s", width, run->rows[s].label);
    for (size_t b = 0; b < c->n_budgets; b++) {
      SweepMean m;
      sweep_mean(run, s, b, &m);
      double v = mean_measure(&m, which);
      if (isfinite(v))
        printf(" %9.4f", v);
      else
        printf(" %9s", "-");
    }
    printf("\n");
  }
}

/* Every score under its output name (oracle -> oracle@1 or the --oracle
 * steps), checked once. */
static int canonical_scores(SweepReplayConfig *c) {
  for (size_t s = 0; s < c->n_scores; s++) {
    EvictPolicy p = c->base;
    int rc = evict_policy_set_score(&p, c->scores[s]);
    if (rc) return rc;
    evict_policy_score_name(&p, c->scores[s], sizeof c->scores[s]);
  }
  return OBC_OK;
}

int sweep_replay_run(const char *input, const char *out_dir, const SweepReplayConfig *given,
                     const char *command_line) {
  SweepReplayConfig config = *given, *c = &config;
  int rc = canonical_scores(c);
  if (rc) return rc;
  SweepRun run;
  memset(&run, 0, sizeof run);
  run.command_line = command_line ? command_line : "";
  rc = build_rows(c, &run);
  if (!rc) rc = list_traces(input, &run);
  if (!rc) {
    run.cells =
        obc_malloc(run.n_traces * run.n_rows * c->n_budgets * sizeof *run.cells, "sweep cells");
    if (!run.cells) rc = OBC_ENOMEM;
  }
  Model *model = NULL;
  const char *model_path = c->model_path ? c->model_path : model_default_path();
  if (!rc && c->with_model)
    rc = model_load_with(model_path, &(ModelLoadOptions){.weights = c->weights}, &model);
  for (size_t t = 0; t < run.n_traces && !rc; t++) rc = sweep_trace(c, model, t, &run);
  if (!rc)
    rc =
        write_outputs(out_dir, c, &run, c->with_model ? model_path : run.trace_model, command_line);
  if (!rc) {
    printf("replay sweep: %zu trace(s), %zu scores x %zu budgets x %zu protocol(s) -> %s\n",
           run.n_traces, c->n_scores, c->n_budgets, run.n_protocols, out_dir);
    /* on stderr: timings would make the tables differ between runs */
    fprintf(stderr, "replay sweep: offline replay of %zu kept sets took %.2f s (%s)\n", run.n_cells,
            run.offline_seconds,
            c->offline_batch == 1 ? "one at a time, --offline-batch 1" : "sets together");
    if (c->with_model)
      fprintf(stderr, "replay sweep: model replay of %zu kept sets took %.2f s (%s)\n",
              run.model_sets, run.model_seconds,
              c->batch == 1 ? "one at a time, --batch 1" : "batched");
    if (c->with_model) {
      print_table(c, &run, SWEEP_NEEDLE_FOUND,
                  "needle retrieval (share of traces whose replayed answer has the "
                  "needle's value)");
      print_table(c, &run, SWEEP_NEEDLE_PREFIX_SHARE,
                  "needle prefix (share of the value's characters the answer "
                  "reproduces from its start)");
      print_table(c, &run, SWEEP_KL_FORCED,
                  "KL(full || evicted), teacher-forced, mean over decode steps");
      print_table(c, &run, SWEEP_FIRST_DIVERGENCE,
                  "first decode step whose free-running token differs from the "
                  "full cache's (steps + 1 = none)");
    }
    print_table(c, &run, SWEEP_REL_ERROR,
                "offline relative output error ||o'-o||/||o|| (mean over layers, "
                "heads, decode steps)");
    print_table(c, &run, SWEEP_NEEDLE_KEPT, "share of the needle span kept (offline)");
    print_pairs(c, &run);
  }
  model_free(model);
  free(run.traces);
  for (size_t i = 0; i < run.n_cells; i++) free(run.cells[i].kl_steps);
  free(run.cells);
  return rc;
}
