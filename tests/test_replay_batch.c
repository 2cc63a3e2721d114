/* Check suite of batched model replay (replay_model_run_batch) on a real
 * trace: a 256-token NIAH prompt captured with the default model (OBC_MODEL)
 * and 4 decode steps, replayed under a few policies one set at a time
 * (replay_model_run) and batched (all sets in one pass, and two sets per
 * pass). Free-running tokens, answers and needle metrics must be identical,
 * except that a token may differ where the one-at-a-time path's top-2 logit
 * margin at that step is within the rounding tolerance (from there on the two
 * runs condition on different text); teacher-forced KL per step within the
 * tolerance derived below. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "prompts/niah.h"
#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "replay/model_replay.h"
#include "evict/policy.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tests/test_env.h"
#include "traces/trace.h"

static Model *model;

enum { N_SETS = 8 };

/* Relative tolerance of two fp32 evaluations of the same logits that differ
 * only in summation order (batched GEMMs and split attention against one
 * token per forward call). Along the forward pass the reductions are, per
 * layer, the Q/K/V and MLP projections (dim terms each), the output
 * projection (n_heads * head_dim), the down projection (ffn_dim) and
 * attention over at most n_keys keys, then the LM head (dim): N terms in
 * all. The worst case of a sum of n terms, n * 2^-24 * sum|terms|, gives
 * 2 * 2^-24 * N * max|logit| for the real model at 256 keys about 1% of
 * max|logit|, loose enough to pass a replay that ignored the marks of the
 * teacher-forced sequences (its KL error, 0.85, is within 2 * 0.78). Rounding
 * errors of independent operations are zero-mean and add like a random walk:
 * each path's logit error has a standard deviation of about
 * 2^-24 * sqrt(N) * max|logit|, their difference sqrt(2) times that, and we
 * allow 6 standard deviations (docs/SCIENCE.md, "Batched replay"). */
static double logits_tolerance(const ModelConfig *c, size_t n_keys) {
  double per_layer = (double)(c->dim + c->n_heads * c->head_dim + c->ffn_dim + n_keys);
  double n = (double)c->n_layers * per_layer + (double)c->dim;
  return 6.0 * sqrt(2.0) * ldexp(1.0, -24) * sqrt(n);
}

static int same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* Compares a batched replay with the one-at-a-time one (ref); returns the
 * number of free-running steps compared before a justified divergence. */
static size_t compare(const char *name, const ReplayAnswer *ref, const ReplayAnswer *got,
                      double tol_rel, double *worst_kl) {
  ck_assert_uint_eq(got->n_steps, ref->n_steps);
  /* Each logit differs by at most delta between the paths, so the top token
   * can change only where the top-2 margin is within 2 delta; KL(p || q) =
   * sum p (log p - log q) moves by at most max |d log q| <= 2 delta (the
   * logit and its log-sum-exp each move by at most delta). */
  double delta = tol_rel * fmax(ref->logit_scale, got->logit_scale);
  /* A re-run's first answer token flips only within its own margin; from
   * there on the two runs decode different text. */
  ck_assert_uint_eq(got->rerun_tokens, ref->rerun_tokens);
  if (got->first_token != ref->first_token) {
    printf("%s: the re-run's first token differs (%d vs %d), top-2 margin %.3g <= %.3g\n", name,
           ref->first_token, got->first_token, ref->first_margin, 2 * delta);
    ck_assert_msg(ref->first_margin <= 2 * delta,
                  "%s: the re-run's first token is %d batched and %d one at a time with a top-2 "
                  "margin of %.3g (beyond the rounding tolerance %.3g)",
                  name, got->first_token, ref->first_token, ref->first_margin, 2 * delta);
    return 0;
  }
  if (!isnan(ref->kl_prefill))
    ck_assert_msg(fabs(got->kl_prefill - ref->kl_prefill) <= 2 * delta,
                  "%s: kl_prefill %.6g batched, %.6g one at a time (tol %.3g)", name,
                  got->kl_prefill, ref->kl_prefill, 2 * delta);
  else
    ck_assert(isnan(got->kl_prefill));
  size_t same = 0;
  while (same < ref->n_steps && ref->tokens[same] == got->tokens[same]) same++;
  if (same < ref->n_steps) {
    printf("%s: free-running token of step %zu differs (%d vs %d), top-2 margin %.3g <= %.3g\n",
           name, same + 1, ref->tokens[same], got->tokens[same], ref->margin[same], 2 * delta);
    ck_assert_msg(ref->margin[same] <= 2 * delta,
                  "%s: step %zu predicts %d batched and %d one at a time with a top-2 margin of "
                  "%.3g (beyond the rounding tolerance %.3g)",
                  name, same + 1, got->tokens[same], ref->tokens[same], ref->margin[same],
                  2 * delta);
  } else {
    ck_assert_str_eq(got->answer, ref->answer);
    ck_assert_int_eq(got->needle_found, ref->needle_found);
    ck_assert_uint_eq(got->needle_chars, ref->needle_chars);
    ck_assert_uint_eq(got->needle_prefix, ref->needle_prefix);
    ck_assert(same_double(got->needle_tokens, ref->needle_tokens));
    ck_assert_double_eq(got->agreement, ref->agreement);
    ck_assert_uint_eq(got->first_divergence, ref->first_divergence);
  }
  for (size_t t = 0; t < ref->n_steps; t++) {
    double d = fabs(got->kl_forced[t] - ref->kl_forced[t]);
    *worst_kl = fmax(*worst_kl, d);
    ck_assert_msg(d <= 2 * delta,
                  "%s: teacher-forced KL of step %zu: %.6g batched, %.6g (tol %.3g)", name, t + 1,
                  got->kl_forced[t], ref->kl_forced[t], 2 * delta);
  }
  return same;
}

/* A free-running-only replay (got) against the full one (ref): the same
 * tokens up to got's last step, which ends the answer early only at a stop
 * token, the same answer text, and no teacher-forced numbers; one at a time
 * (tol 0) bit for bit, batched up to a rounding flip as in compare. */
static void free_running_same(const ReplayAnswer *ref, const ReplayAnswer *got, double tol_rel) {
  ck_assert_uint_le(got->n_steps, ref->n_steps);
  ck_assert(isnan(got->kl_forced_mean) && isnan(got->kl_forced[0]) && isnan(got->logits_rel_diff));
  double delta = tol_rel * fmax(ref->logit_scale, got->logit_scale);
  if (got->first_token != ref->first_token) {
    ck_assert_msg(tol_rel > 0 && ref->first_margin <= 2 * delta,
                  "free-running only: the re-run's first token is %d, the full replay's %d "
                  "(margin %.3g)",
                  got->first_token, ref->first_token, ref->first_margin);
    return;
  }
  size_t same = 0;
  while (same < got->n_steps && ref->tokens[same] == got->tokens[same]) same++;
  if (same < got->n_steps) {
    ck_assert_msg(tol_rel > 0 && ref->margin[same] <= 2 * delta,
                  "free-running only: step %zu predicts %d, the full replay %d (margin %.3g)",
                  same + 1, got->tokens[same], ref->tokens[same], ref->margin[same]);
    return;
  }
  if (got->n_steps < ref->n_steps)
    ck_assert(tokenizer_is_stop(model->tokenizer, got->tokens[got->n_steps - 1]));
  ck_assert_str_eq(got->answer, ref->answer);
  ck_assert_int_eq(got->needle_found, ref->needle_found);
}

START_TEST(test_batched_replay_equals_one_at_a_time) {
  NiahOptions o;
  niah_options_default(&o);
  o.haystack = "noise";
  o.length = 256;
  o.depth = 40;
  o.seed = 3;
  NiahPrompt p;
  ck_assert_msg(niah_build(model->tokenizer, &o, &p) == 0, "%s", obc_error_message());
  CaptureOptions co;
  capture_options_default(&co);
  co.rows = 48; /* windows end at the question's begin or end, before the tail */
  co.decode = 4;
  char path[4096];
  test_scratch_path("replay_batch", path, sizeof path, 1);
  strcat(path, "/t256.h5");
  CaptureResult result;
  ck_assert_msg(capture_run(model, &p, &co, path, &result) == 0, "%s", obc_error_message());
  niah_prompt_free(&p);

  TraceReader *reader = NULL;
  ck_assert_int_eq(trace_open(path, &reader), 0);
  Replayer *replayer = NULL;
  ck_assert_msg(replay_model_open(model, reader, 0, 0, NULL, &replayer) == 0, "%s",
                obc_error_message());
  /* agnostic-captured sets batch over the whole prompt; agnostic and aware
   * ones re-run what follows their candidates, batched by where that
   * begins; the one-at-a-time replays after a batched call must find the
   * captured question rows again. */
  static const char *const policies[N_SETS][3] = {
      {"attn", "5%", "agnostic-captured"},   {"random", "20%", "agnostic"},
      {"recency", "10%", "aware"},           {"random", "20%", "agnostic-captured"},
      {"obc_vk", "8%", "agnostic-captured"}, {"recency", "10%", "agnostic"},
      {"attn_maxpool", "40%", "aware"},      {"attn", "100%", "agnostic-captured"}};
  EvictKeepSet keeps[N_SETS];
  for (size_t i = 0; i < N_SETS; i++) {
    EvictPolicy policy;
    evict_policy_default(&policy);
    ck_assert_int_eq(evict_policy_set_score(&policy, policies[i][0]), 0);
    ck_assert_int_eq(evict_policy_set_budget(&policy, policies[i][1]), 0);
    ck_assert_int_eq(evict_policy_set_protocol(&policy, policies[i][2]), 0);
    policy.recent = 4;
    policy.sinks = 2;
    ck_assert_msg(evict_policy_apply(reader, &policy, &keeps[i]) == 0, "%s", obc_error_message());
  }
  ReplayAnswer *ref = malloc(N_SETS * sizeof *ref), *all = malloc(N_SETS * sizeof *all);
  ReplayAnswer *pairs = malloc(N_SETS * sizeof *pairs);
  ck_assert(ref && all && pairs);
  for (size_t i = 0; i < N_SETS; i++)
    ck_assert_int_eq(replay_model_run(replayer, &keeps[i], &ref[i]), 0);
  ck_assert_int_eq(replay_model_run_batch(replayer, keeps, N_SETS, 0, all), 0);
  ck_assert_int_eq(replay_model_run_batch(replayer, keeps, N_SETS, 4, pairs), 0);
  /* ...and the one-at-a-time path still works after a batched run, and
   * right after an agnostic re-run (which overwrote the question rows). */
  ReplayAnswer *again = malloc(sizeof *again);
  ck_assert_int_eq(replay_model_run(replayer, &keeps[0], again), 0);
  ck_assert_int_eq(memcmp(again->tokens, ref[0].tokens, sizeof again->tokens), 0);
  ck_assert_int_eq(replay_model_run(replayer, &keeps[1], again), 0);
  ck_assert_uint_gt(again->rerun_tokens, 0);
  ck_assert_int_eq(replay_model_run(replayer, &keeps[0], again), 0);
  ck_assert_int_eq(memcmp(again->tokens, ref[0].tokens, sizeof again->tokens), 0);
  ck_assert_double_eq(again->kl_forced_mean, ref[0].kl_forced_mean);

  const TraceMeta *meta = trace_meta(reader);
  double tol = logits_tolerance(&model->config, meta->n_prompt + ref[0].n_steps), worst_kl = 0.0;
  size_t compared = 0, diverged = 0;
  for (size_t i = 0; i < N_SETS; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s %s %s", policies[i][0], policies[i][1], policies[i][2]);
    compared += compare(name, &ref[i], &all[i], tol, &worst_kl);
    compared += compare(name, &ref[i], &pairs[i], tol, &worst_kl);
    diverged += ref[i].first_divergence != 0;
  }
  printf(
      "batched replay of %d sets: %zu free-running steps equal, max teacher-forced KL "
      "difference %.3g (tolerance %.3g x max |logit|); %zu of the sets diverge from the full "
      "cache\n",
      N_SETS, compared, worst_kl, 2 * tol, diverged);
  /* Not vacuous: eviction changes some answers, and keeping all reproduces the full cache. */
  ck_assert_uint_gt(diverged, 0);
  ck_assert_uint_eq(ref[N_SETS - 1].first_divergence, 0);
  ck_assert_uint_eq(all[N_SETS - 1].first_divergence, 0);

  /* Free-running only: one sequence per set instead of two, the same
   * free-running answers up to the first stop token (bit for bit one at a
   * time: the same operations), no teacher-forced numbers. */
  ck_assert_int_eq(replay_model_free_running_only(replayer, true), 0);
  ck_assert_int_eq(replay_model_keep_logits(replayer, true), 0);
  ck_assert_int_eq(replay_model_free_running_only(replayer, true), OBC_EINVAL);
  obc_error_clear();
  ck_assert_int_eq(replay_model_keep_logits(replayer, false), 0);
  ck_assert_int_eq(replay_model_free_running_only(replayer, true), 0);
  for (size_t i = 0; i < N_SETS; i++) {
    ck_assert_int_eq(replay_model_run(replayer, &keeps[i], again), 0);
    free_running_same(&ref[i], again, 0);
  }
  ck_assert_int_eq(replay_model_run_batch(replayer, keeps, N_SETS, 0, all), 0);
  ck_assert_int_eq(replay_model_run_batch(replayer, keeps, N_SETS, 3, pairs), 0);
  for (size_t i = 0; i < N_SETS; i++) {
    free_running_same(&ref[i], &all[i], tol);
    free_running_same(&ref[i], &pairs[i], tol);
  }
  ck_assert_int_eq(replay_model_free_running_only(replayer, false), 0);

  ck_assert_int_eq(replay_model_run_batch(replayer, keeps, 0, 0, all), 0); /* nothing to do */
  keeps[1].n_prompt--;
  ck_assert_int_eq(replay_model_run_batch(replayer, keeps, N_SETS, 0, all), OBC_EINVAL);
  keeps[1].n_prompt++;
  for (size_t i = 0; i < N_SETS; i++) evict_keep_set_free(&keeps[i]);
  free(ref);
  free(all);
  free(pairs);
  free(again);
  replay_model_close(replayer);
  trace_close(reader);
}
END_TEST

static Suite *replay_batch_suite(void) {
  Suite *s = suite_create("replay_batch");
  TCase *tc = tcase_create("replay_batch");
  tcase_set_timeout(tc, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(tc, test_batched_replay_equals_one_at_a_time);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  const char *path = test_real_model();
  if (!path) return 0;
  if (model_load(path, &model) || !model->tokenizer) {
    fprintf(stderr, "test_replay_batch: cannot load %s: %s\n", path, obc_error_message());
    return 1;
  }
  test_scratch_begin("replay_batch");
  SRunner *runner = srunner_create(replay_batch_suite());
  srunner_set_fork_status(runner, CK_NOFORK); /* OpenMP threads do not survive a fork */
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  model_free(model);
  return test_scratch_end(failed);
}
