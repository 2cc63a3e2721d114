/* Eviction methods as presets (docs/SCIENCE.md, "Methods as presets"): each
 * preset is one published method, with every choice that decides its kept
 * set fixed as the method's reference implementation (NVIDIA kvpress, or the
 * OBCache authors' code) makes it: the query rows it scores with, the
 * pooling, how the query heads of a KV head (or of the whole layer) are
 * combined, the positions it protects, and how its budget turns into kept
 * counts (per KV head, per layer or across a layer's heads).
 *
 * Each is a row of the table of score sources (evict/source.h): `--score
 * NAME` selects it wherever a score is accepted, and means the method in
 * every command. `NAME+obc_v|obc_k|obc_vk` replaces the
 * attention score inside an attention preset by OBCache's score over the
 * same query rows, with everything else unchanged (the paper's pairing):
 * the window, pooling, head aggregation, protected positions, recent
 * window, budget and allocation. `NAME+attn` (the swap, for tests) runs the
 * pairing's code path with the baseline's own attention as the term, so
 * that it keeps exactly NAME's set (tests/test_presets_swap.sh).
 *
 * h2o is the H2O paper's (arXiv 2306.14048) and the OBCache paper's: the
 * attention accumulated over every prompt row, summed over the KV head's
 * query group, and of the k kept candidates the last r = k / 2 (integer
 * division) kept outright as the recent window, the k - r heavy hitters
 * by score among the others (the keep file records r as `recent`).
 * observed-attention is kvpress's ObservedAttentionPress (each sum divided
 * by the rows that saw the position, group mean, no recent window).
 *
 * Budgets: evict_budget_count (evict/policy.h), the one count of every
 * policy: a fraction B (0.4, 40%) keeps floor(n x B) of the n candidates of
 * a KV head, B read as an exact decimal, or under --budget-rule kvpress
 * kvpress's int(n * (1 - compression_ratio)) in double, with the counts that
 * depend on it (AdaKV's safeguard, CriticalKV's first stage, PyramidKV's
 * layer budgets) as kvpress computes them; tokens keep that many.
 * Protected positions count inside the budget.
 *
 * criticalkv-snapkv (CriticalKV, arXiv 2502.03805; kvpress CriticalKVPress
 * around SnapKVPress) needs the model's attention output projection W_o
 * (policy->model, NULL = the default model; refused when its shape is not
 * the trace's) and a selection that depends on the budget: its scores carry
 * two planes (EvictSource.planes), the SnapKV score s_p and the
 * projected value norm w_p = mean over the KV head's query heads h of
 * ||W_o[:, h d:(h+1) d] v_p||_1, and evict_preset_keep makes the two
 * stages for the budget at hand: of the k kept, the k / 2
 * (evict_preset_critical_first_stage) best by s_p are kept outright (final score DBL_MAX), the others score
 * (s_p + 1e-4) x w_p, and the top k of the final scores are kept.
 *
 * criticalkv-adakv (kvpress CriticalAdaKVPress around SnapKVPress) has the
 * same two planes and runs the two stages inside AdaKV's allocation: each
 * KV head's budget b_g is its share of the layer's best G k after the
 * safeguard (k / 5 per head; evict_budget_share), the first stage keeps floor(b_g / 2)
 * by s_p (the safeguard's positions too), the second the rest of b_g by
 * (s_p + 1e-4) x w_p; its final scores are DBL_MAX on exactly the G k kept.
 * adakv-vatp is adakv-snapkv with VATP's value factor: the SnapKV score
 * (pooled, group mean) times ||v_p||_1, then the window's max+1. */
#ifndef OBC_EVICT_PRESET_H
#define OBC_EVICT_PRESET_H

#include <stdbool.h>
#include <stddef.h>

#include "evict/policy.h"

/* The functions of the methods' rows in the table (evict/source.h):
 * EvictSource.count, .scores, .keep and, for the two-stage ones,
 * .final_scores; each reads the method's choices from
 * policy->source->method. */
/* Kept candidates per KV head for n candidates (adakv: the mean; pyramid:
 * the uniform count the layers average to), checked to be 1..n. */
int evict_preset_count(const EvictPolicy *policy, size_t n, size_t *tokens);
/* CriticalKV's first stage for k kept of n candidates: kvpress's int((1 -
 * compression_ratio) * n * first_stage_ratio 0.5) in double under the
 * kvpress rule (equal to k / 2: halving the double n (1 - cr) is exact),
 * k / 2 under the floor rule and for token budgets. */
size_t evict_preset_critical_first_stage(const EvictPolicy *policy, size_t n, size_t k);
/* Kept candidates of every KV head of `layer` under PyramidKV's rule
 * (kvpress PyramidKVPress.get_layer_budget, beta 20) for n candidates, the
 * budget text of policy, the score window and n_layers. */
int evict_preset_pyramid_budget(const EvictPolicy *policy, size_t n, size_t window, size_t n_layers,
                                size_t layer, size_t *kept);

/* The preset's scores of candidates [0, n) of every (layer, KV head) into
 * scores (planes, n_layers, n_kv_heads, n), protected positions included (their
 * score is the layer's maximum + 1, as kvpress pads them); *window the rows
 * used. One-line errors naming the trace when a window needs more rows than
 * are captured or the trace lacks what the preset reads. */
int evict_preset_scores(TraceReader *reader, const EvictPolicy *policy, size_t n, double *scores,
                        size_t *window);
/* The preset's kept sets from its scores (planes, n_layers, n_kv_heads,
 * n_candidates);
 * protect (n_prompt) or NULL: positions kept first, inside the budget,
 * beside h2o's recent window (out->policy.recent: k / 2 for h2o, else 0). */
int evict_preset_keep(const EvictPolicy *policy, const double *scores, size_t n_layers,
                      size_t n_kv_heads, size_t n_prompt, size_t n_candidates,
                      const unsigned char *protect, EvictKeepSet *out);
/* The budget's final scores (n_layers, n_kv_heads, n) of a two-plane
 * method into out, the ones its top k is taken from (--scores-out); for a
 * one-plane method a copy of its scores. */
int evict_preset_final_scores(const EvictPolicy *policy, const double *scores, size_t n_layers,
                              size_t n_kv_heads, size_t n, double *out);

#endif
