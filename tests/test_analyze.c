/* Check suite for analyze/: selection keeps the recent window and breaks ties
 * by lower position, the oracle recalls itself, Spearman uses average ranks,
 * bias shares sum to one, and `obcache analyze` on a small synthetic trace
 * writes every file, the same bytes for 1 and 2 threads, and nothing at all
 * when it fails. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/bias.h"
#include "common/obc_startup.h"
#include "scores/select.h"
#include "scores/stats.h"
#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "traces/synth.h"
#include "tests/test_env.h"

static char scratch[4096];

static void make_scratch(void) { test_scratch_path("analyze", scratch, sizeof scratch, 1); }

/* Removes the scratch folder of a test that passed (a failed one keeps it
 * for inspection: ck_assert leaves the test before this runs). */
static void remove_scratch(void) {
  char command[4200];
  snprintf(command, sizeof command, "rm -rf '%s'", scratch);
  ck_assert_int_eq(system(command), 0);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Deterministic pseudo-random integers (xorshift) for the fixtures. */
static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;
static unsigned long long rng_next(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

START_TEST(selection_breaks_ties_by_lower_position) {
  const double scores[] = {1, 3, 3, 2, 3, 0};
  size_t selected[6];
  select_budget(scores, 6, 2, 0, selected);
  ck_assert_uint_eq(selected[0], 1);
  ck_assert_uint_eq(selected[1], 2);
  select_budget(scores, 6, 4, 0, selected);
  ck_assert_uint_eq(selected[0], 1);
  ck_assert_uint_eq(selected[1], 2);
  ck_assert_uint_eq(selected[2], 4);
  ck_assert_uint_eq(selected[3], 3);
}
END_TEST

START_TEST(selection_keeps_the_recent_window_and_scores_the_rest) {
  const double scores[] = {1, 3, 3, 2, 3, 0};
  size_t selected[6];
  /* k = 3, r = 2: the best of positions 0..3 (position 1), then 4 and 5. */
  select_budget(scores, 6, 3, 2, selected);
  ck_assert_uint_eq(selected[0], 1);
  ck_assert_uint_eq(selected[1], 4);
  ck_assert_uint_eq(selected[2], 5);
  /* The same from a ranking computed once for the largest budget. */
  size_t ranked[4];
  select_rank_top(scores, 4, 4, ranked);
  select_budget_from_ranking(ranked, 6, 3, 2, selected);
  ck_assert_uint_eq(selected[0], 1);
  ck_assert_uint_eq(selected[1], 4);
  ck_assert_uint_eq(selected[2], 5);
}
END_TEST

START_TEST(heap_ranking_matches_a_stable_sort_with_many_ties) {
  enum { N = 300 };
  double scores[N];
  size_t order[N], ranked[N];
  for (int trial = 0; trial < 5; trial++) {
    for (size_t p = 0; p < N; p++) scores[p] = (double)(rng_next() % 7);
    scores[rng_next() % N] = NAN; /* NaN ranks last */
    for (size_t p = 0; p < N; p++) order[p] = p;
    for (size_t i = 1; i < N; i++) /* insertion sort, best first */
      for (size_t j = i; j > 0; j--) {
        double sa = isnan(scores[order[j]]) ? -INFINITY : scores[order[j]];
        double sb = isnan(scores[order[j - 1]]) ? -INFINITY : scores[order[j - 1]];
        if (!(sa > sb || (sa == sb && order[j] < order[j - 1]))) break;
        size_t tmp = order[j];
        order[j] = order[j - 1];
        order[j - 1] = tmp;
      }
    for (size_t k = 0; k <= N; k += 37) {
      select_rank_top(scores, N, k, ranked);
      for (size_t j = 0; j < k; j++) ck_assert_uint_eq(ranked[j], order[j]);
    }
  }
}
END_TEST

START_TEST(ranking_read_off_the_sort_matches_the_heap_ranking) {
  enum { N = 400 };
  double scores[N];
  size_t heap[N], sorted_ranking[N];
  StatsRankPair pairs[2 * N];
  for (int trial = 0; trial < 5; trial++) {
    for (size_t p = 0; p < N; p++) scores[p] = (double)(rng_next() % 9) - 4.0;
    scores[rng_next() % N] = NAN;
    scores[rng_next() % N] = -0.0;
    const StatsRankPair *sorted = stats_sort_values(scores, N, pairs);
    for (size_t r = 0; r < N; r += 50)
      for (size_t count = 0; count <= N - r; count += 41) {
        select_rank_top(scores, N - r, count, heap);
        select_rank_top_sorted(sorted, N, N - r, count, sorted_ranking);
        for (size_t j = 0; j < count; j++) ck_assert_uint_eq(sorted_ranking[j], heap[j]);
      }
  }
}
END_TEST

/* qsort comparator of the reference order: value ascending (NaN lowest,
 * -0 == +0), then index. */
static const double *sort_reference_values;
static int sort_reference_compare(const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  double x = sort_reference_values[i], y = sort_reference_values[j];
  x = isnan(x) ? -INFINITY : x;
  y = isnan(y) ? -INFINITY : y;
  if (x < y) return -1;
  if (x > y) return 1;
  return i < j ? -1 : i > j;
}

/* The sort orders by the top key bits first and finishes runs of equal top
 * bits by the rest (scores/stats.c): values that agree to ~1e-9 relative,
 * in runs shorter and longer than the insertion-sort cutoff, exact ties,
 * NaN and signed zeros, against qsort's order. */
START_TEST(sort_orders_near_ties_like_a_comparison_sort) {
  enum { N = 2000 };
  static double values[N];
  static size_t order[N];
  static StatsRankPair pairs[2 * N];
  for (int trial = 0; trial < 6; trial++) {
    size_t run = trial < 3 ? 20 : 400; /* values per cluster */
    for (size_t p = 0; p < N; p++) {
      double base = 1.0 + (double)(p / run);
      values[p] = base * (1.0 + 1e-9 * (double)(rng_next() % 1000));
      if (rng_next() % 50 == 0) values[p] = base; /* exact ties */
    }
    values[rng_next() % N] = NAN;
    values[rng_next() % N] = -0.0;
    values[rng_next() % N] = 0.0;
    for (size_t p = 0; p < N; p++) order[p] = p;
    sort_reference_values = values;
    qsort(order, N, sizeof *order, sort_reference_compare);
    const StatsRankPair *sorted = stats_sort_values(values, N, pairs);
    for (size_t p = 0; p < N; p++) ck_assert_uint_eq(sorted[p].index, order[p]);
  }
}
END_TEST

START_TEST(recall_of_the_oracle_against_itself_is_one) {
  enum { N = 200, K = 40 };
  double oracle[N];
  for (size_t p = 0; p < N; p++) oracle[p] = (double)(rng_next() % 50);
  size_t ranked[K], rank_of[N], selected[K];
  select_rank_top(oracle, N, K, ranked);
  select_rank_index(ranked, K, N, rank_of);
  for (size_t k = 1; k <= K; k++) {
    select_budget(oracle, N, k, 0, selected);
    ck_assert_double_eq(select_recall(selected, k, rank_of), 1.0);
  }
  /* The reversed score shares nothing with the top-k of a strict order. */
  double up[N], down[N];
  for (size_t p = 0; p < N; p++) up[p] = (double)p, down[p] = -(double)p;
  select_rank_top(up, N, K, ranked);
  select_rank_index(ranked, K, N, rank_of);
  select_budget(down, N, K, 0, selected);
  ck_assert_double_eq(select_recall(selected, K, rank_of), 0.0);
  /* With a recent window of 10 the reversed score keeps the last 10 = half of
   * top-20 of `up`. */
  select_budget(down, N, 20, 10, selected);
  ck_assert_double_eq(select_recall(selected, 20, rank_of), 0.5);
}
END_TEST

START_TEST(span_retention_counts_kept_span_tokens) {
  const size_t selected[] = {3, 10, 11, 50};
  ck_assert_double_eq(select_span_retention(selected, 4, 10, 14), 0.5);
  ck_assert_double_eq(select_span_retention(selected, 4, 20, 20), 0.0);
}
END_TEST

START_TEST(spearman_is_one_for_monotone_and_minus_one_for_reversed) {
  const double x[] = {1, 2, 3, 4, 5};
  const double y[] = {0.1, 10, 11, 200, 3000};
  const double z[] = {9, 7, 5, 3, 1};
  double rho;
  ck_assert_int_eq(stats_spearman(x, y, 5, &rho), 0);
  ck_assert_double_eq_tol(rho, 1.0, 1e-15);
  ck_assert_int_eq(stats_spearman(x, z, 5, &rho), 0);
  ck_assert_double_eq_tol(rho, -1.0, 1e-15);
  const double constant[] = {2, 2, 2, 2, 2};
  ck_assert_int_eq(stats_spearman(x, constant, 5, &rho), 0);
  ck_assert(isnan(rho));
}
END_TEST

START_TEST(spearman_gives_tied_values_their_average_rank) {
  const double x[] = {1, 2, 2, 3};
  const double y[] = {1, 2, 3, 4};
  double ranks[4];
  StatsRankPair pairs[8];
  stats_average_ranks(x, 4, pairs, ranks);
  ck_assert_double_eq(ranks[0], 1.0);
  ck_assert_double_eq(ranks[1], 2.5);
  ck_assert_double_eq(ranks[2], 2.5);
  ck_assert_double_eq(ranks[3], 4.0);
  /* Ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): covariance 4.5, variances
   * 4.5 and 5, so rho = 4.5 / sqrt(22.5). */
  double rho;
  ck_assert_int_eq(stats_spearman(x, y, 4, &rho), 0);
  ck_assert_double_eq_tol(rho, 4.5 / sqrt(22.5), 1e-15);
}
END_TEST

START_TEST(average_ranks_match_counting_with_negatives_zeros_and_ties) {
  enum { N = 500 };
  double values[N], ranks[N];
  StatsRankPair pairs[2 * N];
  for (size_t i = 0; i < N; i++) values[i] = (double)((int)(rng_next() % 21) - 10) * 0.25;
  values[3] = -0.0; /* equal to +0 */
  values[4] = NAN;  /* below every number */
  stats_average_ranks(values, N, pairs, ranks);
  for (size_t i = 0; i < N; i++) {
    double vi = isnan(values[i]) ? -INFINITY : values[i];
    size_t below = 0, equal = 0;
    for (size_t j = 0; j < N; j++) {
      double vj = isnan(values[j]) ? -INFINITY : values[j];
      below += vj < vi;
      equal += vj == vi;
    }
    /* Ranks below+1 .. below+equal, averaged. */
    ck_assert_double_eq(ranks[i], (double)below + 0.5 * (double)(equal + 1));
  }
}
END_TEST

START_TEST(bias_shares_sum_to_one_and_buckets_split_evenly) {
  enum { N = 103, B = 20, K = 37 };
  size_t selected[K];
  double scores[N], share[B], norm[B];
  for (size_t p = 0; p < N; p++) scores[p] = (double)(rng_next() % 1000) + 1.0;
  select_budget(scores, N, K, 5, selected);
  bias_selection_shares(selected, K, N, B, share);
  double total = 0.0;
  for (size_t b = 0; b < B; b++) total += share[b];
  ck_assert_double_eq_tol(total, 1.0, 1e-12);
  /* Bucket b holds b/B <= p/n < (b+1)/B. */
  for (size_t p = 0; p < N; p++) {
    size_t b = bias_bucket_of(p, N, B);
    ck_assert(b * N <= p * B && p * B < (b + 1) * N);
  }
  /* A constant score has normalised score 1 in every bucket. */
  for (size_t p = 0; p < N; p++) scores[p] = 3.0;
  bias_mean_norm_scores(scores, N, B, norm);
  for (size_t b = 0; b < B; b++) ck_assert_double_eq_tol(norm[b], 1.0, 1e-12);
}
END_TEST

/* ---- The command on a synthetic trace ---------------------------------- */

static char trace_path[4200];

static void make_trace(void) {
  make_scratch();
  snprintf(trace_path, sizeof trace_path, "%s/tiny.h5", scratch);
  SynthOptions options;
  synth_options_default(&options);
  options.n_prompt = 96;
  options.n_prompt_rows = 16;
  options.n_decode = 3;
  options.seed = 7;
  int rc = synth_generate(&options, trace_path);
  ck_assert_msg(rc == 0, "synth: %s", obc_error_message());
}

static int run_analyze(const char *out_dir, const char *threads, const char *extra) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = "analyze";
  argv[argc++] = trace_path;
  argv[argc++] = "-o";
  argv[argc++] = (char *)out_dir;
  argv[argc++] = "--window";
  argv[argc++] = "8,1,4,16";
  argv[argc++] = "--topk";
  argv[argc++] = "10,5,20";
  argv[argc++] = "--recent";
  argv[argc++] = "4";
  argv[argc++] = "--threads";
  argv[argc++] = (char *)threads;
  argv[argc++] = "--quiet";
  char extra_copy[1024];
  if (extra) {
    snprintf(extra_copy, sizeof extra_copy, "%s", extra);
    for (char *tok = strtok(extra_copy, " "); tok && argc < 31; tok = strtok(NULL, " "))
      argv[argc++] = tok;
  }
  argv[argc] = NULL;
  return cmd_analyze(argc, argv);
}

static const char *const output_files[] = {"report.json",      "recall.csv",   "recall_layers.csv",
                                           "recall_heads.csv", "spearman.csv", "needle.csv",
                                           "bias.csv",         "taylor.csv"};

static int files_equal(const char *a, const char *b) {
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  int equal = fa && fb;
  while (equal) {
    int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) equal = 0;
    if (ca == EOF || cb == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return equal;
}

START_TEST(analyze_writes_every_file_and_one_or_two_threads_agree) {
  make_trace();
  char dir1[4300], dir2[4300], scores1[4400], path1[4500], path2[4500];
  snprintf(dir1, sizeof dir1, "%s/out1", scratch);
  snprintf(dir2, sizeof dir2, "%s/out2", scratch);
  snprintf(scores1, sizeof scores1, "--scores-out %s/scores1.h5", scratch);
  int rc = run_analyze(dir1, "1", scores1);
  ck_assert_msg(rc == 0, "analyze: %s", obc_error_message());
  rc = run_analyze(dir2, "2", NULL);
  ck_assert_msg(rc == 0, "analyze: %s", obc_error_message());
  for (size_t i = 0; i < sizeof output_files / sizeof *output_files; i++) {
    snprintf(path1, sizeof path1, "%s/%s", dir1, output_files[i]);
    snprintf(path2, sizeof path2, "%s/%s", dir2, output_files[i]);
    ck_assert_msg(exists(path1), "%s missing", path1);
    /* report.json records the time, thread count and command line. */
    if (strcmp(output_files[i], "report.json"))
      ck_assert_msg(files_equal(path1, path2), "%s differs between 1 and 2 threads",
                    output_files[i]);
  }
  snprintf(path1, sizeof path1, "%s/scores1.h5", scratch);
  ck_assert(exists(path1));
  remove_scratch();
}
END_TEST

/* Counts the entries of a folder other than . and .. (-1 when absent). */
static int count_entries(const char *dir) {
  char command[4400];
  snprintf(command, sizeof command, "ls -A '%s' 2>/dev/null | wc -l", dir);
  FILE *p = popen(command, "r");
  int n = -1;
  if (p) {
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
  }
  return n;
}

START_TEST(failing_runs_leave_no_output_files) {
  make_trace();
  char dir[4300], extra[4400];
  snprintf(dir, sizeof dir, "%s/bad", scratch);
  int before = count_entries(scratch);
  /* Window beyond the captured rows: fails while validating. */
  char *argv1[] = {"analyze", trace_path, "-o", dir, "--window", "17", "--quiet", NULL};
  ck_assert_int_ne(cmd_analyze(7, argv1), 0);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "--window"));
  /* Scores file into a missing folder. */
  snprintf(extra, sizeof extra, "--scores-out %s/missing/s.h5", scratch);
  ck_assert_int_ne(run_analyze(dir, "1", extra), 0);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "missing/s.h5"));
  /* Budget larger than the prompt. */
  char *argv2[] = {"analyze", trace_path, "-o", dir, "--topk", "97", "--quiet", NULL};
  ck_assert_int_ne(cmd_analyze(7, argv2), 0);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "--topk"));
  ck_assert(!exists(dir));
  ck_assert_int_eq(count_entries(scratch), before);
  remove_scratch();
}
END_TEST

static Suite *analyze_suite(void) {
  Suite *s = suite_create("analyze");
  TCase *units = tcase_create("units");
  tcase_add_test(units, selection_breaks_ties_by_lower_position);
  tcase_add_test(units, selection_keeps_the_recent_window_and_scores_the_rest);
  tcase_add_test(units, heap_ranking_matches_a_stable_sort_with_many_ties);
  tcase_add_test(units, ranking_read_off_the_sort_matches_the_heap_ranking);
  tcase_add_test(units, sort_orders_near_ties_like_a_comparison_sort);
  tcase_add_test(units, recall_of_the_oracle_against_itself_is_one);
  tcase_add_test(units, span_retention_counts_kept_span_tokens);
  tcase_add_test(units, spearman_is_one_for_monotone_and_minus_one_for_reversed);
  tcase_add_test(units, spearman_gives_tied_values_their_average_rank);
  tcase_add_test(units, average_ranks_match_counting_with_negatives_zeros_and_ties);
  tcase_add_test(units, bias_shares_sum_to_one_and_buckets_split_evenly);
  suite_add_tcase(s, units);
  TCase *command = tcase_create("command");
  tcase_set_timeout(command, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(command, analyze_writes_every_file_and_one_or_two_threads_agree);
  tcase_add_test(command, failing_runs_leave_no_output_files);
  suite_add_tcase(s, command);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  test_scratch_begin("analyze");
  SRunner *runner = srunner_create(analyze_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
