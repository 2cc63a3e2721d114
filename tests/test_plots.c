/* Check suite for plots/: the pieces of `obcache plot` that do not need
 * gnuplot. The CSV reader splits the analysis files and names the line of a
 * ragged row; the report reader takes the parameters and their defaults; the
 * sweep table counts each needle once per cell; gnuplot assignments survive
 * quotes; a PATH without gnuplot gives the install hint. The images
 * themselves are tested by tests/test_plots.sh. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_startup.h"
#include "plots/plot.h"
#include "plots/plot_csv.h"
#include "plots/plot_eval.h"
#include "plots/plot_gnuplot.h"
#include "plots/plot_report.h"
#include "plots/plot_sweep.h"
#include "tests/test_env.h"

static char scratch[4096];

/* A fresh folder per test under $OBC_TMP. */
static void make_scratch(const char *name) {
  char suite[256];
  snprintf(suite, sizeof suite, "plots.%s", name);
  test_scratch_path(suite, scratch, sizeof scratch, 1);
}

/* Writes text to scratch/name and returns the path in path. */
static void write_file(const char *name, const char *text, char *path, size_t size) {
  snprintf(path, size, "%s/%s", scratch, name);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  fputs(text, fp);
  fclose(fp);
}

START_TEST(csv_reader_splits_header_and_rows) {
  make_scratch("csv");
  char path[4200];
  write_file("recall.csv",
             "score,window,recent,k,recall_mean\n"
             "attn,16,0,40,0.5\n"
             "obc_vk,16,0,40,7.5e-01\r\n",
             path, sizeof path);
  PlotTable table;
  ck_assert_int_eq(plot_table_read(path, &table), 0);
  ck_assert_uint_eq(table.n_rows, 2);
  ck_assert_uint_eq(table.n_columns, 5);
  size_t column;
  ck_assert_int_eq(plot_table_column(&table, "recall_mean", &column), 0);
  ck_assert_uint_eq(column, 4);
  ck_assert_str_eq(plot_table_cell(&table, 1, 0), "obc_vk");
  double v;
  ck_assert_int_eq(plot_table_number(&table, 1, column, &v), 0);
  ck_assert(fabs(v - 0.75) < 1e-15);
  ck_assert_int_eq(plot_table_require(&table, "score,k"), 0);
  ck_assert_int_eq(plot_table_require(&table, "score,layer"), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "no column 'layer'"));
  ck_assert_int_eq(plot_table_number(&table, 0, 0, &v), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "line 2, column 'score'"));
  plot_table_free(&table);
}
END_TEST

START_TEST(csv_reader_names_the_line_of_a_ragged_row) {
  make_scratch("ragged");
  char path[4200];
  write_file("bad.csv", "a,b,c\n1,2,3\n4,5\n", path, sizeof path);
  PlotTable table;
  ck_assert_int_eq(plot_table_read(path, &table), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "bad.csv: line 3 has 2 fields (expected 3"));
  write_file("empty.csv", "", path, sizeof path);
  ck_assert_int_eq(plot_table_read(path, &table), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "empty.csv: empty file"));
}
END_TEST

/* The reader sees the bytes before the first NUL: a file that starts with
 * one has no header line at all, and must say so instead of counting rows. */
START_TEST(csv_reader_rejects_a_file_that_starts_with_nul) {
  make_scratch("nul");
  char path[4200];
  snprintf(path, sizeof path, "%s/nul.csv", scratch);
  FILE *fp = fopen(path, "wb");
  ck_assert_ptr_nonnull(fp);
  static const char bytes[] = {'\0', 'a', ',', 'b', '\n', '1', ',', '2', '\n'};
  fwrite(bytes, 1, sizeof bytes, fp);
  fclose(fp);
  PlotTable table;
  ck_assert_int_eq(plot_table_read(path, &table), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "nul.csv: empty file"));
}
END_TEST

/* An eval folder's accuracy.csv in scrambled order: budgets come out by
 * share (5% < 10% < 50%, not as text), panels by length then file order
 * with "all" last, each with its full-cache accuracy; paired rows are
 * checked against their counts. */
START_TEST(eval_reader_orders_budgets_by_share_and_panels_all_last) {
  make_scratch("eval");
  char path[4200];
  write_file("accuracy.csv",
             "task,length,policy,budget,protocol,n,correct,accuracy,ci_low,ci_high,score,recall,"
             "fraction\n"
             "all,8192,tova,50%,aware,4,2,0.5,0.15,0.85,0.5,0.6,0.49\n"
             "vt,8192,tova,10%,agnostic,2,1,0.5,0.09,0.91,0.5,,0.1\n"
             "vt,4096,full,,,2,2,1,0.34,1,1,,\n"
             "all,4096,tova,5%,agnostic,2,0,0,0,0.66,0,0.2,0.05\n"
             "vt,4096,oracle@T,50%,,2,2,1,0.34,1,1,,0.5\n",
             path, sizeof path);
  PlotEval *eval = calloc(1, sizeof *eval);
  ck_assert_int_eq(plot_eval_read(scratch, eval), OBC_OK);
  ck_assert_uint_eq(eval->n_budgets, 3);
  ck_assert_str_eq(eval->budgets[0], "5%");
  ck_assert_str_eq(eval->budgets[1], "10%");
  ck_assert_str_eq(eval->budgets[2], "50%");
  ck_assert_uint_eq(eval->n_panels, 4);
  const char *tasks[] = {"vt", "all", "vt", "all"}, *lengths[] = {"4096", "4096", "8192", "8192"};
  for (size_t p = 0; p < 4; p++) {
    ck_assert_str_eq(eval->panel_task[p], tasks[p]);
    ck_assert_str_eq(eval->panel_length[p], lengths[p]);
  }
  ck_assert_double_eq(eval->full[0], 1.0);
  ck_assert(isnan(eval->full[1]) && isnan(eval->full[2]));
  ck_assert_uint_eq(eval->n_series, 3); /* tova aware, tova agnostic, oracle@T (no protocol) */
  ck_assert_uint_eq(eval->n_protocols, 2);
  ck_assert(!eval->has_paired && !eval->has_recall);
  plot_eval_free(eval);
  write_file("paired.csv",
             "task,length,baseline,paired,budget,protocol,n,baseline_correct,paired_correct,"
             "baseline_only,paired_only,difference,ci_low,ci_high,mcnemar_p\n"
             "vt,4096,tova,tova+obc_vk,10%,agnostic,10,4,6,1,2,0.2,-0.1,0.5,1\n",
             path, sizeof path);
  ck_assert_int_eq(plot_eval_read(scratch, eval), OBC_EFORMAT);
  ck_assert_ptr_nonnull(
      strstr(obc_error_message(), "paired.csv: line 2: difference 0.2 and the counts"));
  free(eval);
}
END_TEST

START_TEST(plot_eval_needs_accuracy_csv_and_writes_nothing_without) {
  make_scratch("eval_missing");
  char out[4200];
  snprintf(out, sizeof out, "%s/out", scratch);
  PlotOptions options = {.formats = PLOT_PNG, .out_dir = out};
  PlotResult *result = calloc(1, sizeof *result);
  ck_assert_int_eq(plot_eval(scratch, &options, result), OBC_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "accuracy.csv: not found"));
  ck_assert_uint_eq(result->n_written, 0);
  ck_assert_int_ne(access(out, F_OK), 0);
  free(result);
}
END_TEST

START_TEST(report_reader_takes_parameters_and_defaults_main_k_to_40) {
  make_scratch("report");
  char path[4200];
  write_file("report.json",
             "{\"schema\": \"obcache-analysis/1\", \"trace\": {\"model\": \"SmolLM2 'tiny'\"},\n"
             " \"parameters\": {\"windows\": [1, 2, 4, 8], \"main_window\": 4,\n"
             "   \"topk\": [5, 10, 40, 80], \"recent\": [0, 8], \"oracle\": \"oracleT\"}}\n",
             path, sizeof path);
  PlotReport report;
  ck_assert_int_eq(plot_report_read(scratch, &report), 0);
  ck_assert_str_eq(report.model, "SmolLM2 'tiny'");
  ck_assert_str_eq(report.oracle, "oracle@T"); /* "oracleT" reads as "oracle@T" */
  ck_assert_uint_eq(report.main_window, 4);
  ck_assert_uint_eq(report.main_k, 40);
  ck_assert_uint_eq(report.recent, 8);
  ck_assert_uint_eq(report.n_windows, 4);
  ck_assert_uint_eq(report.n_topk, 4);

  /* Without 40 among the budgets, the largest one; an explicit main_k wins. */
  write_file("report.json",
             "{\"schema\": \"obcache-analysis/1\", \"parameters\": {\"windows\": [16],\n"
             " \"main_window\": 16, \"topk\": [10, 20]}}\n",
             path, sizeof path);
  ck_assert_int_eq(plot_report_read(scratch, &report), 0);
  ck_assert_uint_eq(report.main_k, 20);
  ck_assert_uint_eq(report.recent, 0);
  ck_assert_str_eq(report.oracle, "oracle@1");
  ck_assert_str_eq(report.model, "");
}
END_TEST

START_TEST(report_reader_rejects_other_files_with_one_line) {
  make_scratch("badreport");
  char path[4200];
  write_file("report.json", "{\"schema\": \"obcache-trace/1\"}\n", path, sizeof path);
  PlotReport report;
  ck_assert_int_eq(plot_report_read(scratch, &report), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "report.json: schema is obcache-trace/1"));
  write_file("report.json",
             "{\"schema\": \"obcache-analysis/1\", \"parameters\": {\"windows\": [1, 2],\n"
             " \"main_window\": 3, \"topk\": [40]}}\n",
             path, sizeof path);
  ck_assert_int_eq(plot_report_read(scratch, &report), OBC_EFORMAT);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "main_window 3 is not among"));
  unlink(path);
  ck_assert_int_eq(plot_report_read(scratch, &report), OBC_EIO);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "report.json: cannot open"));
  ck_assert_ptr_null(strchr(obc_error_message(), '\n'));
}
END_TEST

START_TEST(sweep_table_counts_each_needle_once_per_cell) {
  make_scratch("sweep");
  char path[4200];
  /* Cell (1024, 50): needle 0 found, needle 1 missed, each repeated on three
   * score rows; cell (512, 0): one needle found. Scores out of figure order. */
  write_file("summary.csv",
             "length,depth,needle,found,answer_ok,score,k,recall\n"
             "1024,50,0,1,1,remove,40,0.9\n"
             "1024,50,0,1,1,attn,40,0.4\n"
             "1024,50,0,1,1,obc_vk,40,0.8\n"
             "1024,50,1,0,0,remove,40,0.7\n"
             "1024,50,1,0,0,attn,40,0.2\n"
             "1024,50,1,0,0,obc_vk,40,0.6\n"
             "512,0,0,1,0,remove,40,1\n"
             "512,0,0,1,0,attn,40,0.5\n"
             "512,0,0,1,0,obc_vk,40,0.75\n"
             "512,0,0,1,0,attn,20,0.1\n",
             path, sizeof path);
  PlotSweep sweep;
  ck_assert_int_eq(plot_sweep_read(scratch, 0, &sweep), 0);
  ck_assert_uint_eq(sweep.k, 40);
  ck_assert_uint_eq(sweep.n_lengths, 2);
  ck_assert_uint_eq(sweep.n_depths, 2);
  ck_assert(sweep.lengths[0] == 512 && sweep.lengths[1] == 1024);
  ck_assert_uint_eq(sweep.n_scores, 3);
  ck_assert_str_eq(sweep.scores[0], "attn");
  ck_assert_str_eq(sweep.scores[1], "obc_vk");
  ck_assert_str_eq(sweep.scores[2], "remove");
  size_t cell = 1 * sweep.n_depths + 1; /* (1024, 50) */
  ck_assert_uint_eq(sweep.needles[cell], 2);
  ck_assert(fabs(sweep.found[cell] - 0.5) < 1e-12);
  ck_assert(fabs(sweep.recall[cell * sweep.n_scores + 0] - 0.3) < 1e-12);
  ck_assert(fabs(sweep.recall[cell * sweep.n_scores + 2] - 0.8) < 1e-12);
  size_t other = 0 * sweep.n_depths + 0; /* (512, 0) */
  ck_assert_uint_eq(sweep.needles[other], 1);
  ck_assert(fabs(sweep.answer_ok[other]) < 1e-12);
  ck_assert(fabs(sweep.recall[other * sweep.n_scores + 0] - 0.5) < 1e-12); /* k=20 row ignored */
  ck_assert(isnan(sweep.found[0 * sweep.n_depths + 1]));                   /* (512, 50): no cell */
  char axis[128];
  plot_sweep_axis_text(sweep.depths, sweep.n_depths, axis, sizeof axis);
  ck_assert_str_eq(axis, "0 50");
  plot_sweep_free(&sweep);
}
END_TEST

START_TEST(gnuplot_assignments_double_single_quotes) {
  PlotArgs args;
  plot_args_init(&args);
  plot_args_string(&args, "model", "it's");
  plot_args_size(&args, "k", 40);
  ck_assert_int_eq(plot_args_check(&args), 0);
  ck_assert_str_eq(args.text, "model='it''s'; k=40; ");
  char long_text[20000];
  memset(long_text, 'x', sizeof long_text - 1);
  long_text[sizeof long_text - 1] = '\0';
  plot_args_string(&args, "title", long_text);
  ck_assert_int_eq(plot_args_check(&args), OBC_EINVAL);
}
END_TEST

START_TEST(scores_rank_in_figure_order_then_oracles) {
  ck_assert_int_lt(plot_score_rank("attn"), plot_score_rank("obc_vk"));
  ck_assert_int_lt(plot_score_rank("obc_vk"), plot_score_rank("exact_v"));
  ck_assert_int_lt(plot_score_rank("remove"), plot_score_rank("oracle1"));
  ck_assert_int_lt(plot_score_rank("oracleT"), plot_score_rank("something_new"));
}
END_TEST

START_TEST(missing_gnuplot_gives_the_install_hint) {
  make_scratch("nognuplot");
  const char *saved = getenv("PATH");
  char *path = strdup(saved ? saved : "");
  setenv("PATH", scratch, 1);
  PlotGnuplot gnuplot;
  int rc = plot_gnuplot_find(&gnuplot);
  setenv("PATH", path, 1);
  free(path);
  ck_assert_int_eq(rc, OBC_ENOTFOUND);
  ck_assert_str_eq(obc_error_message(),
                   "gnuplot not found on PATH; install gnuplot-nox (apt-get install gnuplot-nox)");
}
END_TEST

START_TEST(folder_without_report_fails_before_writing) {
  make_scratch("noreport");
  char out[4200];
  snprintf(out, sizeof out, "%s/plots", scratch);
  PlotOptions options = {.dir = scratch, .out_dir = out, .formats = PLOT_PNG};
  PlotResult *result = calloc(1, sizeof *result);
  ck_assert_int_eq(plot_render(&options, result), OBC_ENOTFOUND);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "report.json: not found"));
  ck_assert_uint_eq(result->n_written, 0);
  ck_assert_int_ne(access(out, F_OK), 0);
  free(result);
}
END_TEST

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  Suite *suite = suite_create("plots");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, csv_reader_splits_header_and_rows);
  tcase_add_test(tc, csv_reader_names_the_line_of_a_ragged_row);
  tcase_add_test(tc, csv_reader_rejects_a_file_that_starts_with_nul);
  tcase_add_test(tc, eval_reader_orders_budgets_by_share_and_panels_all_last);
  tcase_add_test(tc, plot_eval_needs_accuracy_csv_and_writes_nothing_without);
  tcase_add_test(tc, report_reader_takes_parameters_and_defaults_main_k_to_40);
  tcase_add_test(tc, report_reader_rejects_other_files_with_one_line);
  tcase_add_test(tc, sweep_table_counts_each_needle_once_per_cell);
  tcase_add_test(tc, gnuplot_assignments_double_single_quotes);
  tcase_add_test(tc, scores_rank_in_figure_order_then_oracles);
  tcase_add_test(tc, missing_gnuplot_gives_the_install_hint);
  tcase_add_test(tc, folder_without_report_fails_before_writing);
  suite_add_tcase(suite, tc);
  test_scratch_begin("plots");
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
