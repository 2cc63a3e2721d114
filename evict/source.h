/* The table of score sources (docs/SCIENCE.md, "Score sources"): one row
 * for every name `--score` takes in every command (evict, replay, sweep,
 * eval, analyze's lists): each analyser quantity scored over a window of
 * prompt rows, random, recency, the two decode-step references (oracle,
 * decode_attn) and every published method with its pairings. A row says
 * what the source reads, how it scores the candidates and how it turns
 * the one budget count (evict_budget_count) into kept sets. Adding a
 * score is one row here plus its kernel (CONTRIBUTING.md).
 *
 * A published method's name means that method in every command; the
 * generic windowed quantities have names of their own (attn_vl1,
 * attn_maxpool), and recency is sinks (--sinks) + the most recent. */
#ifndef OBC_EVICT_SOURCE_H
#define OBC_EVICT_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "traces/trace.h"

struct EvictPolicy;
struct EvictKeepSet;

typedef enum {
  EVICT_SCORE_QUANTITY = 0, /* an analyser quantity over a window (scores/scores.h) */
  EVICT_SCORE_RANDOM,       /* uniform scores from the seed */
  EVICT_SCORE_RECENCY,      /* recency: sinks + the most recent positions */
  EVICT_SCORE_ORACLE,       /* oracle@a-b, the true eviction error (a reference) */
  EVICT_SCORE_DECODE_ATTN,  /* attention mass from the decode queries of steps a-b */
  EVICT_SCORE_PRESET,       /* a published method as a whole (evict/preset.h) */
  EVICT_SCORE_FILE          /* NAME=file:PATH[:DATASET], read from a file (evict/score_file.h) */
} EvictScoreKind;

/* How kept counts are spread over a layer's KV heads. PYRAMID (pyramidkv
 * only): every KV head of a layer keeps the layer's budget of
 * evict_preset_pyramid_budget. */
typedef enum { EVICT_ALLOC_UNIFORM = 0, EVICT_ALLOC_ADAKV, EVICT_ALLOC_PYRAMID } EvictAllocation;

/* What a published method's score is computed from. */
typedef enum {
  EVICT_METHOD_ATTENTION,   /* softmax attention of the window's query rows */
  EVICT_METHOD_COLUMN_SUMS, /* sums over every prompt row, recorded at capture (H2O) */
  EVICT_METHOD_KEY_NORM,    /* -||k_p||_2 */
  EVICT_METHOD_KEY_DIFF,    /* -cos(k_p, mean of the unit keys) */
  EVICT_METHOD_POSITION,    /* sinks, then the most recent */
  EVICT_METHOD_EXPECTED     /* expected attention of future queries (query statistics) */
} EvictMethodSource;

typedef enum { EVICT_POOL_NONE = 0, EVICT_POOL_AVG, EVICT_POOL_MAX } EvictPool;

/* How the query heads' scores become one score per KV head. */
typedef enum {
  EVICT_HEADS_GROUP_MEAN = 0, /* mean over the KV head's query group (kvpress) */
  EVICT_HEADS_LAYER_MEAN,     /* mean over the layer's query heads, shared by its KV heads */
  EVICT_HEADS_GROUP_SUM       /* sum over the KV head's query group (the OBCache paper's) */
} EvictHeads;

/* A published method's fixed choices (evict/preset.h). */
typedef struct {
  EvictMethodSource source;
  size_t window; /* query rows ending at the last candidate */
  EvictPool pool;
  size_t kernel; /* pooling width (odd) */
  EvictHeads heads;
  bool row_mean;    /* COLUMN_SUMS: each sum / the rows that saw p (kvpress) */
  bool recent_half; /* of the k kept, the last k / 2 candidates outright (H2O) */
  bool value_l1;    /* the pooled score times ||v_p||_1 (VATP), before the window's max+1 */
  size_t sinks;     /* first positions kept (POSITION, EXPECTED) */
  EvictAllocation allocation;
  bool critical; /* CriticalKV's two stages around the score (the model's W_o) */
} EvictMethod;

/* The score inside an attention method (EvictPolicy.inner). */
typedef enum {
  EVICT_PRESET_INNER_ATTN = 0, /* the method's own: softmax attention */
  EVICT_PRESET_INNER_OBC_V,    /* sum_i A_ip^2 ||v_p||^2 */
  EVICT_PRESET_INNER_OBC_K,    /* sum_i (A_ip z_ip)^2 ||v_p - o_i||^2 */
  EVICT_PRESET_INNER_OBC_VK,   /* obc_v + obc_k + 2 sum_i A_ip^2 z_ip (||v_p||^2 - v_p.o_i) */
  EVICT_PRESET_INNER_SWAP      /* NAME+attn: the pairing's code path with A_ip as its term */
} EvictPresetInner;

/* What a source reads (EvictSource.reads). */
enum {
  EVICT_READS_WINDOW = 1u << 0, /* the captured prompt rows' Q, K, V of its window */
  EVICT_READS_KV = 1u << 1,     /* the prompt's keys and values */
  EVICT_READS_DECODE = 1u << 2, /* the captured decode rows (they see the answer) */
  EVICT_READS_SUMS = 1u << 3,   /* the column sums accumulated at capture */
  EVICT_READS_QSTATS = 1u << 4, /* the pre-RoPE query statistics */
  EVICT_READS_MODEL = 1u << 5,  /* the model's attention output projection W_o */
  EVICT_READS_SEED = 1u << 6    /* --seed */
};

typedef struct EvictSource {
  const char *name; /* as --score takes it */
  EvictScoreKind kind;
  unsigned reads;       /* EVICT_READS_* */
  const char *describe; /* how it scores and keeps, for --help */
  int quantity;         /* quantity rows: the ScoreQuantity */
  bool steps;           /* takes @1|@T|@a-b (the --oracle steps) */
  bool steps_all;       /* default steps: every one (T), else the first */
  bool pairs;           /* takes +obc_v|obc_k|obc_vk (and +attn, the swap) */
  size_t planes;        /* score planes (critical methods: 2) */
  EvictMethod method;   /* preset rows */
  /* The count each KV head keeps for n candidates (the mean under AdaKV),
   * checked against the knobs the row uses (sinks, recent window). */
  int (*count)(const struct EvictPolicy *policy, size_t n, size_t *k);
  /* Scores of candidates [0, n) of every (layer, KV head) into scores
   * (planes, n_layers, n_kv_heads, n); *window the rows used (0: none). */
  int (*scores)(TraceReader *reader, const struct EvictPolicy *policy, size_t n, double *scores,
                size_t *window);
  /* The kept sets from those scores; protect (n_prompt) or NULL. */
  int (*keep)(const struct EvictPolicy *policy, const double *scores, size_t n_layers,
              size_t n_kv_heads, size_t n_prompt, size_t n, const unsigned char *protect,
              struct EvictKeepSet *out);
  /* The scores its top k is taken from for the budget at hand, when they
   * are not the scores themselves (two-stage methods); NULL otherwise. */
  int (*final_scores)(const struct EvictPolicy *policy, const double *scores, size_t n_layers,
                      size_t n_kv_heads, size_t n, double *out);
} EvictSource;

/* The rows, in the order help texts list them. */
size_t evict_source_count(void);
const EvictSource *evict_source_at(size_t i);
/* The row named by the first len characters of name, or NULL. */
const EvictSource *evict_source_find(const char *name, size_t len);
/* The row of scores read from a file (NAME=file:PATH[:DATASET]): not
 * among the rows above, as its name is the user's. */
const EvictSource *evict_source_file(void);
/* The names of the rows of one kind, comma-separated, into out. */
void evict_source_names(EvictScoreKind kind, char *out, size_t size);

#endif
