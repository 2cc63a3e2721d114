/* The plot command's work (see plot.h): gather what each figure needs
 * (plot_inputs.h for an analysis folder, plot_sweep.h for a sweep), check the
 * scripts and gnuplot, then run one gnuplot script per figure and format,
 * several at once (one per processor), each image under a temporary name
 * renamed when its gnuplot succeeded. */
#include "plots/plot.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_paths.h"
#include "common/obc_file.h"
#include "common/obc_parse.h"
#include "plots/plot_eval.h"
#include "plots/plot_gnuplot.h"
#include "plots/plot_inputs.h"
#include "plots/plot_replay.h"
#include "plots/plot_report.h"
#include "plots/plot_sweep.h"

static const PlotFigure FIGURES[] = {
    {"recall_k", "recall_k.gp", "recall.csv", 0,
     "recall@k against the budget k, one curve per score, at the main window; left the plain "
     "top-k, right with the last R positions always kept: how much of the oracle's top-k set "
     "does each score keep?"},
    {"recall_window", "recall_window.gp", "recall.csv", 0,
     "recall@k against the window W (log2 axis) at the main budget, with and without the recent "
     "window: which window makes each score agree best with the oracle?"},
    {"recall_oracles", "recall_oracles.gp", "recall.csv", 0,
     "recall@k against the budget k at the main window, one panel per oracle reference "
     "(oracle@1, oracle@T, the --oracle one): does a score find the tokens of the first answer "
     "token only, or of the whole answer?"},
    {"needle_k", "needle_k.gp", "needle.csv", 0,
     "share of the needle span's tokens kept against the budget k, per score, with and without "
     "the recent window (traces with a needle span): does the selection keep the needle?"},
    {"bias_share", "bias_share.gp", "bias.csv", 0,
     "share of the selected positions per bucket of relative position p/s, per score and for the "
     "oracle, the last bucket in a panel of its own: does a score pile its selection on early "
     "tokens (structural bias)?"},
    {"bias_score", "bias_score.gp", "bias.csv", 0,
     "mean normalised score per relative-position bucket (log axis), per score and for the "
     "oracle: where along the prompt does score accumulate?"},
    {"bias_windows", "bias_windows.gp", "bias.csv", 0,
     "the same selection shares for every window W (dark = short, light = long), one panel each "
     "for attn, attn_vl1, obc_vk and remove, with the oracle dashed: does the bias grow with W?"},
    {"taylor", "taylor.gp", "taylor.csv", 0,
     "log-log scatter of exact_v/exact_k/exact_vk against obc_v/obc_k/obc_vk and of the true "
     "eviction error against the window's removal error, with y = x: does each Taylor score "
     "track the error it approximates?"},
    {"recall_layers", "recall_layers.gp", "recall_layers.csv", 0,
     "heat map of recall@k per layer (rows) and score (columns) at the main window and budget: "
     "which layers does each score get right?"},
    {"sweep_needle", "sweep_needle.gp", "summary.csv", 1,
     "sweep folders: heat map over context length and needle depth of whether the full-cache "
     "model found the needle"},
    {"sweep_recall", "sweep_recall.gp", "summary.csv", 1,
     "sweep folders: one heat map per score of recall@k over context length and needle depth"},
    {"replay_needle", "replay_needle.gp", "replay_sweep.csv", 2,
     "replay sweep folders: per policy and budget, whether the answer over the evicted cache "
     "still has the needle's value (a table), and the share of the value and of the needle "
     "span kept against the budget, policies that coincide named together"},
    {"replay_kl", "replay_kl.gp", "replay_sweep.csv", 2,
     "replay sweep folders: teacher-forced KL(full || evicted) of the next-token distributions "
     "and the offline attention-output error against the budget, per score"},
    {"replay_kl_steps", "replay_kl_steps.gp", "kl_steps.csv", 2,
     "replay sweep folders: teacher-forced KL(full || evicted) of each decode step, one panel "
     "per budget, one curve per score: which answer token breaks?"},
    {"dynamic_ppl", "dynamic_ppl.gp", "dynamic.csv", 3,
     "dynamic-eviction folders: perplexity of a long text in windows of positions under each "
     "running score at each cache budget, against the full cache"},
    {"eval_accuracy", "eval_accuracy.gp", "accuracy.csv", 4,
     "eval folders: task accuracy against the budget with Wilson 95% intervals, one panel per "
     "task (and all tasks pooled), one line per policy, the full cache dashed: how close does "
     "each policy stay to the full cache?"},
    {"eval_heatmap", "eval_heatmap.gp", "accuracy.csv", 4,
     "eval folders: accuracy per task (rows) and budget (columns), one small heat map per "
     "policy, values in the cells: which tasks break first as the budget shrinks?"},
    {"eval_paired", "eval_paired.gp", "paired.csv", 4,
     "eval folders: forest plot of each pairing's accuracy difference (paired minus baseline) "
     "with its paired bootstrap 95% interval and exact McNemar p: does + OBCache help?"},
    {"eval_recall", "eval_recall.gp", "recall.csv", 4,
     "eval folders: accuracy by quartile of recall against the oracle, Wilson 95% intervals, "
     "one line per budget group with its AUC: does keeping the oracle's tokens predict a "
     "correct answer?"},
};
#define N_FIGURES (sizeof FIGURES / sizeof FIGURES[0])

const PlotFigure *plot_figures(size_t *count) {
  *count = N_FIGURES;
  return FIGURES;
}

static const char *const SCORE_ORDER[] = {"attn",     "attn2",    "attn_vl1", "attn_maxpool",
                                          "obc_v",    "obc_k",    "obc_vk",   "exact_v",
                                          "exact_k",  "exact_vk", "remove",   "oracle@1",
                                          "oracle@T", "oracle1",  "oracleT",  "decode_attn"};

int plot_score_rank(const char *name) {
  for (size_t i = 0; i < sizeof SCORE_ORDER / sizeof SCORE_ORDER[0]; i++)
    if (!strcmp(SCORE_ORDER[i], name)) return (int)i;
  return (int)(sizeof SCORE_ORDER / sizeof SCORE_ORDER[0]);
}

const char *plot_scripts_dir(const PlotOptions *options) {
  if (options->scripts_dir && options->scripts_dir[0]) return options->scripts_dir;
  const char *env = getenv("OBC_PLOTS_DIR");
  if (env && env[0]) return env;
  static char dir[4096];
  if (!dir[0]) snprintf(dir, sizeof dir, "%s/plots", obc_data_dir());
  return dir;
}

/* The selected figures (selected[i] for FIGURES[i]) from --only; a figure
 * whose data is missing is an error when named, skipped otherwise. */
static int select_figures(const PlotOptions *options, const int *kinds, int *selected,
                          PlotResult *result) {
  int named[N_FIGURES] = {0};
  if (options->only) {
    char buf[1024], *items[OBC_LIST_MAX];
    size_t n = 0;
    int rc = obc_split_list("--only", options->only, buf, sizeof buf, items, OBC_LIST_MAX, &n);
    if (rc) return rc;
    for (size_t k = 0; k < n; k++) {
      const char *tok = items[k];
      size_t i = 0;
      while (i < N_FIGURES && strcmp(FIGURES[i].name, tok)) i++;
      if (i == N_FIGURES) {
        char names[512] = "";
        size_t used = 0;
        for (size_t j = 0; j < N_FIGURES; j++)
          used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", j ? ", " : "",
                                   FIGURES[j].name);
        return obc_fail(OBC_EINVAL, "--only: no figure '%s' (figures: %s)", tok, names);
      }
      named[i] = 1;
    }
  }
  size_t n_selected = 0;
  for (size_t i = 0; i < N_FIGURES; i++) {
    const PlotFigure *f = &FIGURES[i];
    selected[i] = 0;
    if (options->only && !named[i]) continue;
    int applicable = kinds[f->sweep]; /* this kind of folder has such figures */
    int usable = applicable && (f->sweep == 1 || plot_file_has_rows(options->dir, f->data));
    if (!usable) {
      if (named[i])
        return obc_fail(OBC_ENOTFOUND, "%s/%s: not found or no data rows (figure %s needs it%s)",
                        options->dir, f->data, f->name,
                        f->sweep == 1   ? "; it is drawn for sweep folders"
                        : f->sweep == 2 ? "; it is drawn for obcache replay --sweep folders"
                        : f->sweep == 3 ? "; it is drawn for obcache dynamic folders"
                        : f->sweep == 4 ? "; it is drawn for obcache eval folders"
                                        : "");
      if (!applicable) continue; /* a figure of the other kind of folder: not a skip */
      if (result->n_skipped < PLOT_MAX_SKIPPED)
        snprintf(result->skipped[result->n_skipped++], sizeof result->skipped[0],
                 "%s (%s/%s is missing or has no rows)", f->name, options->dir, f->data);
      continue;
    }
    selected[i] = 1;
    n_selected++;
  }
  if (n_selected == 0)
    return obc_fail(OBC_ENOTFOUND, "%s: no figure has its data here", options->dir);
  return OBC_OK;
}

/* The words of wanted that also occur in present (both space-separated). */
static void names_present(const char *wanted, const char *present, char *out, size_t size) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", wanted);
  size_t used = 0;
  out[0] = '\0';
  char *save = NULL;
  for (char *name = strtok_r(buf, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
    size_t length = strlen(name);
    int found = 0;
    for (const char *p = strstr(present, name); p && !found; p = strstr(p + 1, name))
      found = (p == present || p[-1] == ' ') && (p[length] == ' ' || p[length] == '\0');
    if (found && used < size)
      used += (size_t)snprintf(out + used, size - used, "%s%s", used ? " " : "", name);
  }
}

/* The gnuplot variables of one figure. */
static void figure_args(const PlotFigure *f, const char *dir, const char *data_dir,
                        const PlotInputs *in, const PlotSweep *sweep, const char *model,
                        PlotArgs *args) {
  char data[4096];
  const char *data_name = f->data;
  if (!strcmp(f->name, "sweep_needle")) data_name = "sweep_needle.csv";
  if (!strcmp(f->name, "sweep_recall")) data_name = "sweep_recall.csv";
  snprintf(data, sizeof data, "%s/%s", f->sweep ? data_dir : dir, data_name);
  plot_args_string(args, "data", data);
  plot_args_string(args, "model", model);
  if (f->sweep) {
    char text[2048];
    plot_sweep_axis_text(sweep->lengths, sweep->n_lengths, text, sizeof text);
    plot_args_string(args, "lengths", text);
    plot_sweep_axis_text(sweep->depths, sweep->n_depths, text, sizeof text);
    plot_args_string(args, "depths", text);
    plot_args_size(args, "k", sweep->k);
    char scores[1024] = "";
    size_t used = 0;
    for (size_t s = 0; s < sweep->n_scores; s++)
      used += (size_t)snprintf(scores + used, sizeof scores - used, "%s%s", s ? " " : "",
                               sweep->scores[s]);
    plot_args_string(args, "scores", scores);
    return;
  }
  plot_args_string(args, "oracle", in->report.oracle);
  /* "" for an old report, whose recall.csv has no reference column. */
  plot_args_string(args, "references", in->report.references);
  if (in->report.references[0]) plot_args_string(args, "reference", in->report.oracle);
  if (!strcmp(f->name, "taylor")) {
    static const char *const rho_names[4] = {"rho_v", "rho_k", "rho_vk", "rho_remove"};
    plot_args_size(args, "window", in->report.main_window);
    for (size_t p = 0; p < 4; p++)
      if (in->has_rho[p]) plot_args_double(args, rho_names[p], in->rho[p]);
    return;
  }
  plot_args_size(args, "window", in->window);
  plot_args_size(args, "k", in->k);
  if (!strcmp(f->name, "bias_windows")) {
    char panels[256];
    names_present("attn attn_vl1 obc_vk remove", in->bias_names, panels, sizeof panels);
    plot_args_string(args, "scores", panels);
    plot_args_string(args, "windows", in->windows);
    return;
  }
  if (!strncmp(f->name, "bias_", 5)) {
    plot_args_string(args, "scores", in->bias_names);
    return;
  }
  plot_args_string(args, "scores", in->scores);
  if (strcmp(f->name, "recall_layers")) plot_args_size(args, "recent", in->recent);
  if (!strcmp(f->name, "recall_k") || !strcmp(f->name, "needle_k"))
    plot_args_string(args, "ks", in->ks);
}

void plot_result_add(PlotResult *result, const char *path) {
  if (result->n_written < PLOT_MAX_WRITTEN)
    snprintf(result->written[result->n_written++], sizeof result->written[0], "%s", path);
}

/* One image to draw: figure and format, the gnuplot variables, and, while
 * its gnuplot runs, the pending image and log and the child's id. */
typedef struct {
  const PlotFigure *figure;
  const char *format;
  char script[4096];
  PlotArgs args;
  ObcPendingFile image, log;
  pid_t child;
  int done; /* the image was renamed into place */
} PlotJob;

/* Starts gnuplot on one job: it writes the image's temporary file. */
static int job_start(const PlotGnuplot *gnuplot, const char *out_dir, PlotJob *job) {
  char final_path[4096], log_path[4096];
  if ((size_t)snprintf(final_path, sizeof final_path, "%s/%s.%s", out_dir, job->figure->name,
                       job->format) >= sizeof final_path)
    return obc_fail(OBC_EINVAL, "%s: output path too long", out_dir);
  snprintf(log_path, sizeof log_path, "%s/.%s.%s.gnuplot-log", out_dir, job->figure->name,
           job->format);
  /* gnuplot's log is a pending file that is never committed: Ctrl-C removes
   * it together with the half-drawn image. */
  int rc = obc_pending_init(&job->image, final_path);
  if (!rc) rc = obc_pending_init(&job->log, log_path);
  if (rc) return rc;
  plot_args_string(&job->args, "fmt", job->format);
  plot_args_string(&job->args, "outfile", job->image.temp_path);
  /* OBC_PLOT_RANGES=DIR: each panel's axis ranges, as gnuplot drew them, go
   * to DIR/FIGURE.FORMAT.ranges (style.gp; tests/test_figure_ranges.sh). */
  const char *ranges_dir = getenv("OBC_PLOT_RANGES");
  if (ranges_dir && ranges_dir[0]) {
    char ranges[4096];
    snprintf(ranges, sizeof ranges, "%s/%s.%s.ranges", ranges_dir, job->figure->name, job->format);
    plot_args_string(&job->args, "ranges_out", ranges);
  }
  rc = plot_args_check(&job->args);
  if (rc) return rc;
  obc_pending_register(&job->image);
  obc_pending_register(&job->log);
  rc = plot_gnuplot_start(gnuplot, job->script, job->args.text, job->log.temp_path, &job->child);
  if (rc) {
    obc_pending_abort(&job->log);
    obc_pending_unregister(&job->log);
    obc_pending_unregister(&job->image);
  }
  return rc;
}

/* The end of a job whose gnuplot ended with status: the image is renamed
 * into place only when gnuplot succeeded and wrote something. The message
 * of a failure goes to message (the caller reports the first one). */
static int job_finish(PlotJob *job, int status, char *message, size_t size) {
  int rc = plot_gnuplot_outcome(job->script, status, job->log.temp_path, message, size);
  obc_pending_abort(&job->log);
  obc_pending_unregister(&job->log);
  struct stat st;
  if (!rc && (stat(job->image.temp_path, &st) != 0 || st.st_size == 0)) {
    snprintf(message, size, "%s: gnuplot exited normally but wrote no image for %s", job->script,
             job->image.final_path);
    rc = OBC_EEXTERNAL;
  }
  if (rc) {
    obc_pending_abort(&job->image);
    obc_pending_unregister(&job->image);
    return rc;
  }
  rc = obc_pending_commit(&job->image);
  obc_pending_unregister(&job->image);
  if (rc) {
    snprintf(message, size, "%s", obc_error_message());
    return rc;
  }
  job->done = 1;
  return OBC_OK;
}

/* Runs the jobs, at most max_running gnuplot processes at a time. Each image
 * is whole under its final name or absent. After the first failure no new
 * job starts, those running finish, and the first failure is reported. The
 * images written are listed in job order, whatever order they ended in. */
static int run_jobs(const PlotGnuplot *gnuplot, const char *out_dir, PlotJob *jobs, size_t n,
                    size_t max_running, PlotResult *result) {
  size_t next = 0, running = 0;
  int rc = OBC_OK;
  char first_message[2048] = "";
  while (running > 0 || (!rc && next < n)) {
    while (!rc && next < n && running < max_running) {
      rc = job_start(gnuplot, out_dir, &jobs[next]);
      if (rc) snprintf(first_message, sizeof first_message, "%s", obc_error_message());
      next++;
      if (!rc) running++;
    }
    if (running == 0) break;
    pid_t child;
    int status;
    int wait_rc = plot_gnuplot_wait(&child, &status);
    if (wait_rc) { /* no child left to wait for: nothing more can finish */
      if (!rc) snprintf(first_message, sizeof first_message, "%s", obc_error_message());
      rc = rc ? rc : wait_rc;
      for (size_t j = 0; j < next; j++)
        if (jobs[j].child > 0 && !jobs[j].done) {
          obc_pending_abort(&jobs[j].log);
          obc_pending_abort(&jobs[j].image);
          obc_pending_unregister(&jobs[j].log);
          obc_pending_unregister(&jobs[j].image);
        }
      break;
    }
    size_t j = 0;
    while (j < next && jobs[j].child != child) j++;
    if (j == next) continue; /* not one of ours */
    jobs[j].child = 0;
    running--;
    char message[2048];
    int job_rc = job_finish(&jobs[j], status, message, sizeof message);
    if (job_rc && !rc) {
      rc = job_rc;
      snprintf(first_message, sizeof first_message, "%s", message);
    }
  }
  for (size_t j = 0; j < n; j++)
    if (jobs[j].done) plot_result_add(result, jobs[j].image.final_path);
  if (rc) return obc_fail(rc, "%s", first_message);
  return OBC_OK;
}

/* Every script the selected figures run (and style.gp) must be readable. */
static int check_scripts(const char *scripts_dir, const int *selected) {
  const char *helpers[] = {"style.gp", "sweep_axes.gp"};
  for (size_t i = 0; i < 2 + N_FIGURES; i++) {
    const char *name = i < 2 ? helpers[i] : FIGURES[i - 2].script;
    if (i >= 2 && !selected[i - 2]) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", scripts_dir, name);
    if (access(path, R_OK) != 0)
      return obc_fail(OBC_ENOTFOUND,
                      "%s: cannot read the figure script: %s (set OBC_PLOTS_DIR to "
                      "the plots/ folder of the obcache source tree)",
                      path, strerror(errno));
  }
  return OBC_OK;
}

/* The model of a sweep: each finished cell of `obcache sweep` has its
 * analysis in cells/<id>/analysis/report.json; the lowest id says it. Leaves
 * model empty when there is none. */
static void sweep_model_name(const char *dir, char *model, size_t size) {
  model[0] = '\0';
  char cells[4096], report[4096];
  snprintf(cells, sizeof cells, "%s/cells", dir);
  DIR *folder = opendir(cells);
  if (!folder) return;
  long first = -1;
  struct dirent *entry;
  while ((entry = readdir(folder))) {
    char *end = NULL;
    long id = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end || id < 0 || (first >= 0 && id >= first)) continue;
    snprintf(report, sizeof report, "%s/%ld/analysis/report.json", cells, id);
    if (access(report, R_OK) == 0) first = id;
  }
  closedir(folder);
  if (first < 0) return;
  snprintf(report, sizeof report, "%s/%ld/analysis/report.json", cells, first);
  plot_report_model_name(report, model, size);
}

/* How many gnuplot processes run at once: --jobs, else one per online
 * processor, at most OBC_MAX_CHILDREN. */
static size_t plot_max_running(const PlotOptions *options) {
  size_t n = options->jobs;
  if (n == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online > 0 ? (size_t)online : 1;
  }
  return n < OBC_MAX_CHILDREN ? n : OBC_MAX_CHILDREN;
}

int plot_render(const PlotOptions *options, PlotResult *result) {
  memset(result, 0, sizeof *result);
  if (!options->dir || !(options->formats & (PLOT_PNG | PLOT_SVG)))
    return obc_fail(OBC_EINVAL, "plot: no folder or no output format");
  struct stat st;
  if (stat(options->dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return obc_fail(OBC_ENOTFOUND,
                    "%s: not a folder (expected an analysis folder written by "
                    "`obcache analyze`, or a sweep folder)",
                    options->dir);
  int sweep = plot_file_exists(options->dir, "summary.csv");
  int analysis = plot_file_exists(options->dir, "report.json");
  int replay = plot_file_exists(options->dir, "replay_sweep.csv"); /* obcache replay --sweep */
  int dynamic = plot_file_exists(options->dir, "dynamic.csv");     /* obcache dynamic */
  int eval = plot_file_exists(options->dir, "accuracy.csv");       /* obcache eval */
  if (!analysis && !sweep && !replay && !dynamic && !eval)
    return obc_fail(OBC_ENOTFOUND,
                    "%s/report.json: not found (expected an analysis folder "
                    "written by `obcache analyze -o DIR`, a sweep folder with summary.csv, a "
                    "replay folder with replay_sweep.csv or dynamic.csv, or an eval folder with "
                    "accuracy.csv)",
                    options->dir);
  PlotInputs in;
  memset(&in, 0, sizeof in);
  PlotSweep sweep_data;
  memset(&sweep_data, 0, sizeof sweep_data);
  PlotEval *eval_data = eval ? calloc(1, sizeof *eval_data) : NULL;
  char model[256] = "";
  int rc = eval && !eval_data ? obc_fail(OBC_ENOMEM, "plot: out of memory") : OBC_OK;
  if (!rc && eval) rc = plot_eval_read(options->dir, eval_data);
  if (!rc && analysis) {
    rc = plot_inputs_read(options->dir, options->window, options->k, &in);
    if (rc && sweep) {
      /* A sweep folder's own report.json is not an analysis: it only names
       * the model. */
      char path[4096];
      snprintf(path, sizeof path, "%s/report.json", options->dir);
      obc_error_clear();
      plot_report_model_name(path, model, sizeof model);
      analysis = 0;
      rc = OBC_OK;
    } else {
      snprintf(model, sizeof model, "%s", in.report.model[0] ? in.report.model : "unknown model");
    }
  }
  if (!rc && sweep) {
    rc = plot_sweep_read(options->dir, options->k, &sweep_data);
    if (!model[0]) sweep_model_name(options->dir, model, sizeof model);
  }
  int selected[N_FIGURES] = {0};
  int kinds[5] = {analysis, sweep, replay, dynamic, eval}; /* indexed by PlotFigure.sweep */
  if (!rc) rc = select_figures(options, kinds, selected, result);
  const char *scripts_dir = plot_scripts_dir(options);
  if (!rc) rc = check_scripts(scripts_dir, selected);
  PlotGnuplot gnuplot;
  if (!rc) rc = plot_gnuplot_find(&gnuplot);

  char out_dir[4096];
  if (options->out_dir)
    snprintf(out_dir, sizeof out_dir, "%s", options->out_dir);
  else
    snprintf(out_dir, sizeof out_dir, "%s/plots", options->dir);
  if (!rc) rc = obc_make_dirs(out_dir);
  int sweep_selected = 0, paired_selected = 0;
  for (size_t i = 0; i < N_FIGURES; i++) {
    if (FIGURES[i].sweep == 1 && selected[i]) sweep_selected = 1;
    if (!strcmp(FIGURES[i].name, "eval_paired") && selected[i]) paired_selected = 1;
  }
  if (!rc && sweep_selected) rc = plot_sweep_write(&sweep_data, out_dir, result);
  if (!rc && paired_selected) rc = plot_eval_write_paired(eval_data, out_dir, result);

  char plots_dir[4096];
  snprintf(plots_dir, sizeof plots_dir, "%s/", scripts_dir);
  PlotJob *jobs = rc ? NULL : calloc(2 * N_FIGURES, sizeof *jobs);
  if (!rc && !jobs) rc = obc_fail(OBC_ENOMEM, "plot: out of memory");
  size_t n_jobs = 0;
  for (size_t i = 0; i < N_FIGURES && !rc; i++) {
    if (!selected[i]) continue;
    PlotArgs args;
    plot_args_init(&args);
    plot_args_string(&args, "plots_dir", plots_dir);
    if (FIGURES[i].sweep == 4)
      plot_eval_args(eval_data, FIGURES[i].name, options->dir, out_dir, &args);
    else if (FIGURES[i].sweep >= 2)
      rc = plot_replay_args(options->dir, FIGURES[i].data, &args);
    else
      figure_args(&FIGURES[i], options->dir, out_dir, &in, &sweep_data, model, &args);
    static const struct {
      unsigned flag;
      const char *name;
    } formats[2] = {{PLOT_PNG, "png"}, {PLOT_SVG, "svg"}};
    for (size_t f = 0; f < 2 && !rc; f++) {
      if (!(options->formats & formats[f].flag)) continue;
      PlotJob *job = &jobs[n_jobs++];
      job->figure = &FIGURES[i];
      job->format = formats[f].name;
      snprintf(job->script, sizeof job->script, "%s/%s", scripts_dir, FIGURES[i].script);
      job->args = args;
    }
  }
  if (!rc) rc = run_jobs(&gnuplot, out_dir, jobs, n_jobs, plot_max_running(options), result);
  if (!rc && eval) rc = plot_eval_write_index(eval_data, options->dir, out_dir, result);
  free(jobs);
  plot_sweep_free(&sweep_data);
  if (eval_data) plot_eval_free(eval_data);
  free(eval_data);
  return rc;
}
