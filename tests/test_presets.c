/* Check suite for evict/preset.c: preset names and their refusals, the
 * exact budget arithmetic (floor(n x B) with B read as a decimal; under
 * --budget-rule kvpress kvpress's int(n * (1 - compression_ratio)) in
 * double, which can keep one fewer), the one count of every kind of score,
 * PyramidKV's per-layer budgets worked out by hand from kvpress's
 * get_layer_budget, the three allocations of evict_preset_keep, H2O's
 * recent half and CriticalKV's two stages, alone and inside AdaKV's
 * allocation, on scores made up for the purpose. The scores themselves are checked against
 * kvpress's formulas by tests/test_presets_reference.py. */
#include <check.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "evict/policy.h"
#include "evict/preset.h"
#include "scores/scores.h"

static EvictPolicy preset_policy(const char *score, const char *budget) {
  EvictPolicy p;
  evict_policy_default(&p);
  ck_assert_int_eq(evict_policy_set_score(&p, score), OBC_OK);
  ck_assert_int_eq(evict_policy_set_budget(&p, budget), OBC_OK);
  ck_assert_int_eq(p.source->kind, EVICT_SCORE_PRESET);
  return p;
}

START_TEST(names_mean_the_method_and_the_table_names_every_score) {
  EvictPolicy p;
  evict_policy_default(&p);
  ck_assert_str_eq(p.source->name, "obc_vk");
  /* a published method's name means the method */
  ck_assert_int_eq(evict_policy_set_score(&p, "snapkv"), OBC_OK);
  ck_assert_int_eq(p.source->kind, EVICT_SCORE_PRESET);
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_ATTN);
  ck_assert_int_eq(evict_policy_set_score(&p, "streaming"), OBC_OK);
  ck_assert_int_eq(p.source->kind, EVICT_SCORE_PRESET);
  ck_assert_int_eq(evict_policy_set_score(&p, "vatp"), OBC_OK);
  ck_assert_int_eq(p.source->kind, EVICT_SCORE_PRESET);
  /* the generic quantities and recency have names of their own */
  ck_assert_int_eq(evict_policy_set_score(&p, "attn_maxpool"), OBC_OK);
  ck_assert_int_eq(p.source->kind, EVICT_SCORE_QUANTITY);
  ck_assert_int_eq(p.source->quantity, OBC_Q_ATTN_MAXPOOL);
  ck_assert_int_eq(evict_policy_set_score(&p, "attn_vl1"), OBC_OK);
  ck_assert_int_eq(p.source->quantity, OBC_Q_ATTN_VL1);
  ck_assert_int_eq(evict_policy_set_score(&p, "recency"), OBC_OK);
  ck_assert_int_eq(p.source->kind, EVICT_SCORE_RECENCY);
  /* the old prefix: the same method, recorded under its name */
  ck_assert_int_eq(evict_policy_set_score(&p, "preset:snapkv+obc_k"), OBC_OK);
  ck_assert_str_eq(p.score, "snapkv+obc_k");
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_OBC_K);
  ck_assert_int_eq(evict_policy_set_score(&p, "snapkv+obc_vk"), OBC_OK);
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_OBC_VK);
  ck_assert_int_eq(evict_policy_set_score(&p, "tova+obc_k"), OBC_OK);
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_OBC_K);
  ck_assert_str_eq(p.score, "tova+obc_k");
  ck_assert_int_eq(evict_policy_set_score(&p, "knorm+obc_v"), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "knorm has no attention score to replace"));
  ck_assert_int_eq(evict_policy_set_score(&p, "tova+attn2"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "tova@3"), OBC_EINVAL);
  ck_assert_int_eq(evict_policy_set_score(&p, "tovaa"), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "h2o, observed-attention, tova, tova-group"));
  /* the swap: the pairing's path with the attention as its term */
  ck_assert_int_eq(evict_policy_set_score(&p, "snapkv+attn"), OBC_OK);
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_SWAP);
  ck_assert_str_eq(p.score, "snapkv+attn");
  ck_assert_int_eq(evict_policy_set_score(&p, "observed-attention+obc_vk"), OBC_OK);
  ck_assert_int_eq(evict_policy_set_score(&p, "tova-group+obc_k"), OBC_OK);
  ck_assert_int_eq(evict_policy_set_score(&p, "knorm+attn"), OBC_EINVAL);
  /* every row: its name selects it, names are unique, quantity rows carry
   * the analyser's names, and each row has its functions */
  for (size_t i = 0; i < evict_source_count(); i++) {
    const EvictSource *row = evict_source_at(i);
    ck_assert_int_eq(evict_policy_set_score(&p, row->name), OBC_OK);
    ck_assert_ptr_eq(p.source, row);
    ck_assert_ptr_eq(evict_source_find(row->name, strlen(row->name)), row);
    ck_assert(row->count && row->scores && row->keep && row->planes >= 1);
    ck_assert((row->planes > 1) == (row->final_scores != NULL));
    if (row->kind == EVICT_SCORE_QUANTITY)
      ck_assert_str_eq(row->name, score_quantity_name((ScoreQuantity)row->quantity));
  }
}
END_TEST

START_TEST(budgets_keep_floor_of_n_times_the_exact_decimal) {
  static const struct {
    const char *budget;
    size_t n, kept;
  } cases[] = {
      {"0.1", 510, 51}, /* int(510 * (1 - 0.9)) = int(50.99999999999999) = 50 in floats */
      {"10%", 510, 51},    {"29%", 100, 29}, /* int(100 * 0.29) = 28 in floats */
      {"40%", 4058, 1623}, {"0.4", 4058, 1623}, {"12.5%", 8, 1},
      {"1e-1", 510, 51},   {"100%", 7, 7},      {"40", 4058, 40},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    EvictPolicy p = preset_policy("tova", cases[i].budget);
    size_t kept = 0;
    ck_assert_int_eq(evict_policy_budget_tokens(&p, cases[i].n, &kept), OBC_OK);
    ck_assert_msg(kept == cases[i].kept, "%s of %zu: %zu kept, expected %zu", cases[i].budget,
                  cases[i].n, kept, cases[i].kept);
  }
  /* --budget-rule kvpress: int(n * (1 - cr)) in double, cr = 0.9 for 10% */
  static const struct {
    const char *budget;
    size_t n, kept;
  } kvpress[] = {
      {"0.1", 510, 50}, {"10%", 510, 50},    {"29%", 100, 29}, /* 1 - 0.71 = 0.29000000000000004 */
      {"18%", 60, 10},  {"40%", 4058, 1623}, {"40", 4058, 40},
  };
  for (size_t i = 0; i < sizeof kvpress / sizeof kvpress[0]; i++) {
    EvictPolicy p = preset_policy("tova", kvpress[i].budget);
    ck_assert_int_eq(evict_policy_set_budget_rule(&p, "kvpress"), OBC_OK);
    size_t kept = 0;
    ck_assert_int_eq(evict_policy_budget_tokens(&p, kvpress[i].n, &kept), OBC_OK);
    ck_assert_msg(kept == kvpress[i].kept, "kvpress %s of %zu: %zu kept, expected %zu",
                  kvpress[i].budget, kvpress[i].n, kept, kvpress[i].kept);
  }
  EvictPolicy p = preset_policy("tova", "0.001");
  size_t kept = 0;
  ck_assert_int_eq(evict_policy_set_budget_rule(&p, "round"), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "expected floor or kvpress"));
  ck_assert_int_eq(evict_policy_budget_tokens(&p, 256, &kept), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "keeps 0 of the 256 candidates"));
  p.window = 8; /* a preset fixes its own window */
  ck_assert_int_eq(evict_policy_budget_tokens(&p, 256, &kept), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "a preset fixes its own window"));
}
END_TEST

/* One count for every row of the table of score sources (generic, random,
 * recency, the oracles, every method and its pairing): 18% of 60 is
 * floor(10.8) = 10 under both rules (kvpress: int(60 * (1 - 0.82)) =
 * int(10.800000000000001) = 10); 0.01 of 60 keeps 0 and is refused, 0.01
 * of 300 keeps 3, alike for every row. */
START_TEST(every_score_keeps_the_same_count) {
  for (size_t i = 0; i < evict_source_count(); i++) {
    const EvictSource *row = evict_source_at(i);
    for (int paired = 0; paired <= (row->pairs ? 1 : 0); paired++) {
      char name[64];
      snprintf(name, sizeof name, "%s%s", row->name, paired ? "+obc_vk" : "");
      for (int rule = 0; rule < EVICT_N_BUDGET_RULES; rule++) {
        EvictPolicy p;
        evict_policy_default(&p);
        ck_assert_int_eq(evict_policy_set_score(&p, name), OBC_OK);
        p.budget_rule = (EvictBudgetRule)rule;
        size_t kept = 0;
        ck_assert_int_eq(evict_policy_set_budget(&p, "18%"), OBC_OK);
        ck_assert_int_eq(evict_policy_budget_tokens(&p, 60, &kept), OBC_OK);
        ck_assert_msg(kept == 10, "%s (%s): %zu kept of 60 at 18%%, expected 10", name,
                      evict_budget_rule_name(p.budget_rule), kept);
        ck_assert_int_eq(evict_policy_set_budget(&p, "0.01"), OBC_OK);
        ck_assert_msg(evict_policy_budget_tokens(&p, 60, &kept) == OBC_EINVAL,
                      "%s: 0.01 of 60 accepted", name);
        ck_assert_int_eq(evict_policy_budget_tokens(&p, 300, &kept), OBC_OK);
        ck_assert_msg(kept == 3, "%s: %zu kept of 300 at 0.01, expected 3", name, kept);
      }
    }
  }
}
END_TEST

/* n = 4058, B = 40%, W = 64, 30 layers: M = 1623.2, min = M / 20 = 81.16,
 * max = 2M - min = 3165.24 (< n - W), steps = (max - min) / 29 = 106.348;
 * layer 0 round(3165.24) = 3165, layer 29 round(81.16) = 81, layer 15
 * round(3165.24 - 1595.22) = 1570. At 10% min = 20.29 < W: kvpress falls
 * back to SnapKV's budget in every layer, round(4058 * (1 - 0.9)) = 406
 * under the kvpress rule, the one count floor(405.8) = 405 under the floor
 * rule. */
START_TEST(pyramid_budgets_follow_kvpress_get_layer_budget) {
  EvictPolicy p = preset_policy("pyramidkv", "40%");
  size_t kept = 0;
  static const size_t layers[] = {0, 15, 29}, expected[] = {3165, 1570, 81};
  for (size_t i = 0; i < 3; i++) {
    ck_assert_int_eq(evict_preset_pyramid_budget(&p, 4058, 64, 30, layers[i], &kept), OBC_OK);
    ck_assert_msg(kept == expected[i], "layer %zu: %zu, expected %zu", layers[i], kept,
                  expected[i]);
  }
  p = preset_policy("pyramidkv", "10%");
  ck_assert_int_eq(evict_preset_pyramid_budget(&p, 4058, 64, 30, 7, &kept), OBC_OK);
  ck_assert_uint_eq(kept, 405);
  ck_assert_int_eq(evict_policy_set_budget_rule(&p, "kvpress"), OBC_OK);
  ck_assert_int_eq(evict_preset_pyramid_budget(&p, 4058, 64, 30, 7, &kept), OBC_OK);
  ck_assert_uint_eq(kept, 406);
}
END_TEST

/* Two layers, two KV heads, 10 candidates, 2 more prompt positions. */
enum { L = 2, G = 2, N = 10, PROMPT = 12 };

static void made_up_scores(double *scores) {
  for (size_t i = 0; i < L * G; i++)
    for (size_t q = 0; q < N; q++) /* head 0 of each layer scores far higher */
      scores[i * N + q] = (i % 2 == 0 ? 100.0 : 1.0) + (double)((q * 7 + i) % N);
}

/* CriticalKV's two stages on one KV head of 10 candidates, worked by hand:
 * at 40% k = 4, the first stage keeps the floor(4 / 2) = 2 best by the base
 * score (7, 0), the second the 2 best of (s + 1e-4) w among the rest (1:
 * 10.001, 2: 4.0001), where the base alone would keep 2 and 4; at 10%
 * k = 1 and the first stage keeps none. */
START_TEST(criticalkv_selects_in_two_stages_per_budget) {
  const double base[10] = {5, 1, 4, 2, 3, 0, 0.5, 6, 1.5, 0.2};
  const double norm[10] = {1, 10, 1, 1, 1, 100, 1, 1, 1, 1};
  double scores[20], final[10];
  memcpy(scores, base, sizeof base);
  memcpy(scores + 10, norm, sizeof norm);
  EvictPolicy p = preset_policy("criticalkv-snapkv", "40%");
  ck_assert_uint_eq(p.source->planes, 2);
  ck_assert_int_eq(evict_preset_final_scores(&p, scores, 1, 1, 10, final), OBC_OK);
  ck_assert(final[7] == DBL_MAX && final[0] == DBL_MAX);
  for (size_t q = 0; q < 10; q++)
    if (q != 7 && q != 0) ck_assert(final[q] == (base[q] + 1e-4) * norm[q]);
  EvictKeepSet keep;
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 10, 10, NULL, &keep), OBC_OK);
  const unsigned char want[10] = {1, 1, 1, 0, 0, 0, 0, 1, 0, 0};
  ck_assert_mem_eq(keep.keep, want, 10);
  ck_assert_uint_eq(keep.n_kept[0], 4);
  evict_keep_set_free(&keep);
  p = preset_policy("criticalkv-snapkv", "10%");
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 10, 10, NULL, &keep), OBC_OK);
  const unsigned char want1[10] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  ck_assert_mem_eq(keep.keep, want1, 10);
  evict_keep_set_free(&keep);
  p = preset_policy("snapkv", "40%");
  ck_assert_uint_eq(p.source->planes, 1);
  ck_assert_int_eq(evict_keep_from_scores(&p, base, 1, 1, 10, 10, NULL, &keep), OBC_OK);
  const unsigned char want_snapkv[10] = {1, 0, 1, 0, 1, 0, 0, 1, 0, 0};
  ck_assert_mem_eq(keep.keep, want_snapkv, 10);
  evict_keep_set_free(&keep);
}
END_TEST

/* H2O: of k kept, the last k / 2 candidates, then the k - k / 2 best of the
 * others (the high scores of the recent window do not count twice). */
START_TEST(h2o_keeps_the_recent_half_then_the_heavy_hitters) {
  const double scores[10] = {5, 1, 4, 2, 3, 0, 0.5, 6, 1.5, 9};
  EvictKeepSet keep;
  EvictPolicy p = preset_policy("h2o", "50%"); /* k = 5: recent 2 (8, 9), heavy 3 */
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 12, 10, NULL, &keep), OBC_OK);
  const unsigned char want[12] = {1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  ck_assert_mem_eq(keep.keep, want, 12);
  ck_assert_uint_eq(keep.policy.recent, 2);
  ck_assert_uint_eq(keep.n_kept[0], 5);
  evict_keep_set_free(&keep);
  p = preset_policy("h2o", "10%"); /* k = 1: recent 0, the best */
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 10, 10, NULL, &keep), OBC_OK);
  ck_assert_uint_eq(keep.policy.recent, 0);
  ck_assert(keep.keep[9] && keep.n_kept[0] == 1);
  evict_keep_set_free(&keep);
  /* protected positions outside the recent window fill the heavy part */
  const unsigned char protect[10] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  p = preset_policy("h2o", "40%"); /* k = 4: recent 2 (8, 9), then 1 and 5 */
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 10, 10, protect, &keep), OBC_OK);
  const unsigned char want_protected[10] = {0, 1, 0, 0, 0, 1, 0, 0, 1, 1};
  ck_assert_mem_eq(keep.keep, want_protected, 10);
  evict_keep_set_free(&keep);
  p = preset_policy("h2o", "30%"); /* k = 3: recent 1, two protected outside it */
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 10, 10, protect, &keep), OBC_OK);
  evict_keep_set_free(&keep);
  p = preset_policy("h2o", "20%"); /* k = 2: recent 1 + 2 protected > 2 */
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 1, 10, 10, protect, &keep), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "beside the recent window of 1"));
}
END_TEST

/* CriticalAdaKV (kvpress CriticalAdaKVPress) on one layer of two KV heads
 * of 10 candidates at 50%, worked by hand: k = 5, safeguard floor(5 / 5) =
 * 1 per head (head 0: 7, head 1: 1 at DBL_MAX); the layer's best 10 of
 * those scores give head 0 its safeguard and 0, 2, 4, 3, 8, 1, 6 (b_0 = 8)
 * and head 1 its safeguard and 5 (0.25 beats head 0's 0.2; b_1 = 2). The
 * first stage keeps floor(8 / 2) = 4 of head 0 (7, 0, 2, 4) and floor(2 /
 * 2) = 1 of head 1 (its safeguard, 1); the second stage ranks (s + 1e-4) w:
 * head 0 keeps 1 (10.001), 3 (2.0001), 8 (1.5001) and 5 (1.0001, where the
 * base alone keeps 6), head 1 keeps 9 (2.005, where the base keeps 5). */
START_TEST(criticalkv_adakv_allocates_then_selects_in_two_stages) {
  const double base[2][10] = {{5, 1, 4, 2, 3, 0, 0.5, 6, 1.5, 0.2},
                              {0.1, 0.3, 0.05, 0.2, 0.15, 0.25, 0.01, 0.02, 0.03, 0.04}};
  const double norm[2][10] = {{1, 10, 1, 1, 1, 10000, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 50}};
  double scores[40], final[20];
  memcpy(scores, base, sizeof base);
  memcpy(scores + 20, norm, sizeof norm);
  EvictPolicy p = preset_policy("criticalkv-adakv", "50%");
  ck_assert_uint_eq(p.source->planes, 2);
  ck_assert_int_eq(p.source->method.allocation, EVICT_ALLOC_ADAKV);
  const unsigned char want[20] = {1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
  ck_assert_int_eq(evict_preset_final_scores(&p, scores, 1, 2, 10, final), OBC_OK);
  for (size_t i = 0; i < 20; i++) {
    double other = (base[i / 10][i % 10] + 1e-4) * norm[i / 10][i % 10];
    ck_assert_msg(final[i] == (want[i] ? DBL_MAX : other), "final[%zu] = %g", i, final[i]);
  }
  EvictKeepSet keep;
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 2, 10, 10, NULL, &keep), OBC_OK);
  ck_assert_mem_eq(keep.keep, want, 20);
  ck_assert_uint_eq(keep.n_kept[0], 8);
  ck_assert_uint_eq(keep.n_kept[1], 2);
  evict_keep_set_free(&keep);
  /* The base score alone under AdaKV keeps 6 for 5 in head 0, 5 for 9 in head 1. */
  p = preset_policy("adakv-snapkv", "50%");
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, 1, 2, 10, 10, NULL, &keep), OBC_OK);
  const unsigned char want_adakv[20] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0};
  ck_assert_mem_eq(keep.keep, want_adakv, 20);
  evict_keep_set_free(&keep);
}
END_TEST

START_TEST(value_aware_adakv_presets_parse_and_pair) {
  EvictPolicy p = preset_policy("adakv-vatp", "40%");
  ck_assert_uint_eq(p.source->planes, 1);
  ck_assert_int_eq(p.source->method.allocation, EVICT_ALLOC_ADAKV);
  ck_assert_uint_eq(p.source->method.window, 64);
  p = preset_policy("adakv-vatp+obc_k", "40%");
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_OBC_K);
  p = preset_policy("criticalkv-adakv+obc_vk", "40%");
  ck_assert_int_eq(p.inner, EVICT_PRESET_INNER_OBC_VK);
  ck_assert_uint_eq(p.source->planes, 2);
  char names[1024];
  evict_source_names(EVICT_SCORE_PRESET, names, sizeof names);
  ck_assert_ptr_nonnull(strstr(names, "adakv-vatp, criticalkv-adakv"));
  ck_assert_int_eq(evict_policy_set_score(&p, "knorm+obc_v"), OBC_EINVAL);
  ck_assert_ptr_nonnull(strstr(obc_error_message(), "adakv-snapkv, adakv-vatp, criticalkv-adakv)"));
}
END_TEST

START_TEST(allocations_keep_what_each_rule_says) {
  double scores[L * G * N];
  made_up_scores(scores);
  EvictKeepSet keep;
  /* Uniform: 4 per head, the 4 best, and the 2 positions after the candidates. */
  EvictPolicy p = preset_policy("snapkv", "40%");
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, L, G, PROMPT, N, NULL, &keep), OBC_OK);
  for (size_t i = 0; i < L * G; i++) {
    ck_assert_uint_eq(keep.n_kept[i], 4);
    ck_assert(keep.keep[i * PROMPT + 10] && keep.keep[i * PROMPT + 11]);
  }
  ck_assert_int_eq(keep.policy.allocation, EVICT_ALLOC_UNIFORM);
  evict_keep_set_free(&keep);
  /* AdaKV: k = 5 per head on average, floor(5 / 5) = 1 each, the rest of the
   * layer's 10 to the best left: head 0 takes 9, head 1 its safeguard 1. */
  p = preset_policy("adakv-snapkv", "50%");
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, L, G, PROMPT, N, NULL, &keep), OBC_OK);
  ck_assert_int_eq(keep.policy.allocation, EVICT_ALLOC_ADAKV);
  for (size_t l = 0; l < L; l++) {
    ck_assert_uint_eq(keep.n_kept[l * G + 0], 9);
    ck_assert_uint_eq(keep.n_kept[l * G + 1], 1);
  }
  evict_keep_set_free(&keep);
  /* Pyramid on 10 candidates, 40%, W = 64: falls back to round(4) = 4. */
  p = preset_policy("pyramidkv", "40%");
  ck_assert_int_eq(evict_keep_from_scores(&p, scores, L, G, PROMPT, N, NULL, &keep), OBC_OK);
  ck_assert_int_eq(keep.policy.allocation, EVICT_ALLOC_PYRAMID);
  for (size_t i = 0; i < L * G; i++) ck_assert_uint_eq(keep.n_kept[i], 4);
  evict_keep_set_free(&keep);
}
END_TEST

int main(void) {
  Suite *suite = suite_create("presets");
  TCase *tc = tcase_create("presets");
  tcase_add_test(tc, names_mean_the_method_and_the_table_names_every_score);
  tcase_add_test(tc, budgets_keep_floor_of_n_times_the_exact_decimal);
  tcase_add_test(tc, every_score_keeps_the_same_count);
  tcase_add_test(tc, pyramid_budgets_follow_kvpress_get_layer_budget);
  tcase_add_test(tc, allocations_keep_what_each_rule_says);
  tcase_add_test(tc, h2o_keeps_the_recent_half_then_the_heavy_hitters);
  tcase_add_test(tc, criticalkv_selects_in_two_stages_per_budget);
  tcase_add_test(tc, criticalkv_adakv_allocates_then_selects_in_two_stages);
  tcase_add_test(tc, value_aware_adakv_presets_parse_and_pair);
  suite_add_tcase(suite, tc);
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
