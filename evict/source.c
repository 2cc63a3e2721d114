/* The table of score sources (evict/source.h). */
#include "evict/source.h"

#include <stdio.h>
#include <string.h>

#include "evict/generic.h"
#include "evict/preset.h"
#include "evict/score_file.h"
#include "scores/scores.h"

/* An analyser quantity over the window of prompt rows ending at the last
 * candidate (--window), kept with --sinks, --recent and --alloc. */
#define QUANTITY(name_, q, text)                                                    \
  {                                                                                 \
    .name = (name_), .kind = EVICT_SCORE_QUANTITY, .reads = EVICT_READS_WINDOW,     \
    .describe = (text), .quantity = (q), .planes = 1, .count = evict_generic_count, \
    .scores = evict_quantity_scores, .keep = evict_generic_keep                     \
  }

/* A published method: its fixed choices, its scores, its keep. */
#define METHOD(name_, reads_, text, ...)                                                \
  {                                                                                     \
    .name = (name_), .kind = EVICT_SCORE_PRESET, .reads = (reads_), .describe = (text), \
    .planes = 1, .method = {__VA_ARGS__}, .count = evict_preset_count,                  \
    .scores = evict_preset_scores, .keep = evict_preset_keep                            \
  }
#define PAIRED(name_, reads_, text, ...)                                                \
  {                                                                                     \
    .name = (name_), .kind = EVICT_SCORE_PRESET, .reads = (reads_), .describe = (text), \
    .pairs = true, .planes = 1, .method = {__VA_ARGS__}, .count = evict_preset_count,   \
    .scores = evict_preset_scores, .keep = evict_preset_keep                            \
  }
/* CriticalKV's two stages: the base score and the projected value norms. */
#define CRITICAL(name_, pairs_, text, ...)                                                         \
  {                                                                                                \
    .name = (name_), .kind = EVICT_SCORE_PRESET, .reads = EVICT_READS_WINDOW | EVICT_READS_MODEL,  \
    .describe = (text), .pairs = (pairs_), .planes = 2, .method = {.critical = true, __VA_ARGS__}, \
    .count = evict_preset_count, .scores = evict_preset_scores, .keep = evict_preset_keep,         \
    .final_scores = evict_preset_final_scores                                                      \
  }

/* kvpress's SnapKV: 64 rows, mean, average pooling of width 5, group mean. */
#define SNAPKV                                                                         \
  .source = EVICT_METHOD_ATTENTION, .window = 64, .pool = EVICT_POOL_AVG, .kernel = 5, \
  .heads = EVICT_HEADS_GROUP_MEAN

static const EvictSource sources[] = {
    QUANTITY("attn", OBC_Q_ATTN, "sum of attention over the window's rows (H2O/TOVA's term)"),
    QUANTITY("attn2", OBC_Q_ATTN2, "sum of squared attention (the paper's pseudo-code)"),
    QUANTITY("attn_vl1", OBC_Q_ATTN_VL1, "attn x ||v||_1 (VATP's term, unpooled)"),
    QUANTITY("attn_maxpool", OBC_Q_ATTN_MAXPOOL, "attn, max-pooled over positions"),
    QUANTITY("obc_v", OBC_Q_OBC_V, "OBCache's value score"),
    QUANTITY("obc_k", OBC_Q_OBC_K, "OBCache's key score"),
    QUANTITY("obc_vk", OBC_Q_OBC_VK, "OBCache's joint score"),
    QUANTITY("exact_v", OBC_Q_EXACT_V, "exact error of pruning the value, over the window"),
    QUANTITY("exact_k", OBC_Q_EXACT_K, "exact error of pruning the key"),
    QUANTITY("exact_vk", OBC_Q_EXACT_VK, "exact error of pruning both"),
    QUANTITY("remove", OBC_Q_REMOVE, "exact error of removing the token"),
    {.name = "random",
     .kind = EVICT_SCORE_RANDOM,
     .reads = EVICT_READS_SEED,
     .describe = "uniform scores from --seed",
     .planes = 1,
     .count = evict_generic_count,
     .scores = evict_random_scores,
     .keep = evict_generic_keep},
    {.name = "recency",
     .kind = EVICT_SCORE_RECENCY,
     .describe = "--sinks, then the most recent",
     .planes = 1,
     .count = evict_recency_count,
     .scores = evict_recency_scores,
     .keep = evict_recency_keep},
    {.name = "oracle",
     .kind = EVICT_SCORE_ORACLE,
     .reads = EVICT_READS_DECODE,
     .describe = "each token's true eviction error over the --oracle steps (a reference, not "
                 "a bound; it sees the answer)",
     .steps = true,
     .planes = 1,
     .count = evict_generic_count,
     .scores = evict_oracle_scores,
     .keep = evict_generic_keep},
    {.name = "decode_attn",
     .kind = EVICT_SCORE_DECODE_ATTN,
     .reads = EVICT_READS_DECODE,
     .describe = "attention mass from the captured decode queries of the --oracle steps",
     .steps = true,
     .steps_all = true,
     .planes = 1,
     .count = evict_generic_count,
     .scores = evict_decode_attn_scores,
     .keep = evict_generic_keep},
    PAIRED("h2o", EVICT_READS_SUMS,
           "the H2O paper's: attention accumulated over every prompt row, summed over the "
           "query group; of the k kept, the last k/2 candidates, then the heavy hitters",
           .source = EVICT_METHOD_COLUMN_SUMS, .heads = EVICT_HEADS_GROUP_SUM, .recent_half = true),
    PAIRED("observed-attention", EVICT_READS_SUMS,
           "kvpress ObservedAttention: each sum / the rows that saw the position, group mean",
           .source = EVICT_METHOD_COLUMN_SUMS, .heads = EVICT_HEADS_GROUP_MEAN, .row_mean = true),
    PAIRED("tova", EVICT_READS_WINDOW,
           "last query row, mean over the layer's query heads (kvpress)",
           .source = EVICT_METHOD_ATTENTION, .window = 1, .heads = EVICT_HEADS_LAYER_MEAN),
    PAIRED("tova-group", EVICT_READS_WINDOW, "last query row, summed over the KV head's group",
           .source = EVICT_METHOD_ATTENTION, .window = 1, .heads = EVICT_HEADS_GROUP_SUM),
    PAIRED("snapkv", EVICT_READS_WINDOW, "kvpress SnapKV: 64 rows, mean, avg pool 5, group mean",
           SNAPKV),
    PAIRED("snapkv-max7", EVICT_READS_WINDOW, "the OBCache authors' SnapKV: 16 rows, max pool 7",
           .source = EVICT_METHOD_ATTENTION, .window = 16, .pool = EVICT_POOL_MAX, .kernel = 7,
           .heads = EVICT_HEADS_GROUP_MEAN),
    PAIRED("pyramidkv", EVICT_READS_WINDOW, "SnapKV's scores, per-layer pyramid budgets (beta 20)",
           SNAPKV, .allocation = EVICT_ALLOC_PYRAMID),
    PAIRED("adakv-snapkv", EVICT_READS_WINDOW,
           "SnapKV's scores, AdaKV allocation across a layer's heads", SNAPKV,
           .allocation = EVICT_ALLOC_ADAKV),
    CRITICAL("criticalkv-snapkv", false,
             "kvpress CriticalKV around SnapKV: half the budget by SnapKV, the rest by "
             "(SnapKV + 1e-4) x ||W_o v||_1 (reads --model)",
             SNAPKV),
    METHOD("vatp", EVICT_READS_WINDOW, "64-row mean attention x ||v||_1",
           .source = EVICT_METHOD_ATTENTION, .window = 64, .heads = EVICT_HEADS_GROUP_MEAN,
           .value_l1 = true),
    METHOD("streaming", 0, "StreamingLLM: 4 sinks + the most recent",
           .source = EVICT_METHOD_POSITION, .sinks = 4),
    METHOD("knorm", EVICT_READS_KV, "lowest key norm first kept", .source = EVICT_METHOD_KEY_NORM),
    METHOD("keydiff", EVICT_READS_KV, "keys least like the mean key",
           .source = EVICT_METHOD_KEY_DIFF),
    METHOD("expected_attention", EVICT_READS_QSTATS | EVICT_READS_KV,
           "kvpress ExpectedAttention: the query statistics under the next 512 positions' mean "
           "RoPE, group mean, x ||v||_2, 4 sinks",
           .source = EVICT_METHOD_EXPECTED, .sinks = TRACE_QSTATS_FIRST_ROW),
    /* The paper's value-aware baselines (its Fig. 4), on AdaKV. */
    PAIRED("adakv-vatp", EVICT_READS_WINDOW, "AdaKV with VATP's score: SnapKV's (pooled) x ||v||_1",
           SNAPKV, .value_l1 = true, .allocation = EVICT_ALLOC_ADAKV),
    CRITICAL("criticalkv-adakv", true,
             "kvpress CriticalAdaKV around SnapKV: AdaKV's head budgets, CriticalKV's two "
             "stages inside each (reads --model)",
             SNAPKV, .allocation = EVICT_ALLOC_ADAKV),
};
enum { N_SOURCES = sizeof sources / sizeof sources[0] };

/* Scores read from a file, kept as the quantities are. */
static const EvictSource file_source = {
    .name = "file",
    .kind = EVICT_SCORE_FILE,
    .describe =
        "NAME=file:PATH[:DATASET]: per-token scores (layers, KV heads, positions) read "
        "from an HDF5 file of the same trace (its trace_hash), kept as the quantities are",
    .planes = 1,
    .count = evict_generic_count,
    .scores = evict_file_scores,
    .keep = evict_generic_keep};

const EvictSource *evict_source_file(void) { return &file_source; }

size_t evict_source_count(void) { return N_SOURCES; }

const EvictSource *evict_source_at(size_t i) { return i < N_SOURCES ? &sources[i] : NULL; }

const EvictSource *evict_source_find(const char *name, size_t len) {
  for (size_t i = 0; i < N_SOURCES; i++)
    if (strlen(sources[i].name) == len && !strncmp(sources[i].name, name, len)) return &sources[i];
  return NULL;
}

void evict_source_names(EvictScoreKind kind, char *out, size_t size) {
  size_t used = 0;
  if (size) out[0] = '\0';
  for (size_t i = 0; i < N_SOURCES && used + 1 < size; i++) {
    if (sources[i].kind != kind) continue;
    int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", sources[i].name);
    if (n < 0) break;
    used += (size_t)n;
  }
}
