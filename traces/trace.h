/* Trace files: the HDF5 schema shared by the capture step (writer) and the
 * analyser (reader). The full layout is documented in traces/SCHEMA.md.
 *
 * Positions are 0-based. The prompt occupies positions 0..n_prompt-1; the
 * model then decodes n_decode tokens, at positions n_prompt..n_positions-1
 * (n_positions = n_prompt + n_decode). Decode step t (1-based) is the query at
 * position n_prompt + t - 1: it attends to every prompt key and to the keys of
 * the generated tokens up to and including its own. K and V are stored for all
 * n_positions; Q, O and lse only for the captured rows (row_positions, strictly
 * increasing: typically the last R prompt rows then every decode row).
 *
 * Shapes, per layer L:
 *   K, V  (n_kv_heads, n_positions, head_dim)  keys after RoPE, as cached
 *   Q, O  (n_heads, n_rows, head_dim)          O = per-head attention output
 *   lse   (n_heads, n_rows)                    log-sum-exp of the scaled logits
 *   A     (n_heads, n_rows, n_positions)       optional; 0 beyond causality
 * Global:
 *   tokens        (n_positions) int32
 *   row_positions (n_rows) int64
 *   logits        (n_decode, vocab_size) optional; row t = next-token logits
 *                 computed at position n_prompt + t
 * Query head h uses KV head h / (n_heads / n_kv_heads) (llama GQA layout).
 * The logit scale is attn_scale (1/sqrt(head_dim) unless the model says). */
#ifndef OBC_TRACE_H
#define OBC_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Version 3 is version 2 plus the column sums of every prompt row's
 * attention (trace_read_column_sums); a trace without them is written as
 * version 2, so that every reader of version 2 still reads it. */
#define OBC_TRACE_SCHEMA_VERSION 3
#define OBC_TRACE_SCHEMA_VERSION_PLAIN 2
#define OBC_TRACE_MAX_SPANS 64

/* A named half-open token range [begin, end) of the prompt ("needle",
 * "needle_value", "question", "needle_2", ...). */
typedef struct {
  char name[64];
  int64_t begin;
  int64_t end;
} TraceSpan;

/* The model configuration a trace records (also what the runtime reports). */
typedef struct {
  char name[256];        /* e.g. "SmolLM2-135M-Instruct" or "synthetic" */
  char architecture[32]; /* "llama", "qwen2", "synthetic" */
  size_t n_layers;
  size_t n_heads;    /* query heads */
  size_t n_kv_heads; /* key/value heads */
  size_t head_dim;
  size_t vocab_size; /* 0 when unknown (synthetic traces without logits) */
  double rope_theta;
  char rope_scaling[32]; /* "none", "llama3", "linear" */
  double rope_factor;    /* scaling parameters; 0 when unused */
  double rope_low_freq_factor;
  double rope_high_freq_factor;
  size_t rope_original_context;
  double attn_scale; /* multiplier of q.k; 1/sqrt(head_dim) for llama */
  /* Head-dimension layout of the stored Q and K: "interleaved" (RoPE on pairs
   * (2i, 2i+1), llama-arch GGUF), "half" (pairs (i, i + d/2), Hugging Face),
   * "none" (synthetic), or "" when the trace does not say (optional on read).
   * The two RoPE layouts differ by a fixed permutation of the head dimension:
   * attention is the same, but K and Q rows are not interchangeable. */
  char rope_layout[16];
} TraceModel;

/* Everything about a trace except the per-layer tensors. */
typedef struct {
  int schema_version;
  char tool_version[32];
  char producer[1024]; /* the command line or "synth seed=..." that made it */
  char created[32];    /* ISO-8601 UTC; the only field that varies run to run */
  char dtype[8];       /* storage dtype of the float tensors: "f32" or "f16" */
  bool complete;       /* written last; readers refuse traces without it */
  /* The trace's identity: 16 lower-case hex digits of a hash of its contents,
   * written at capture (schema 2); "" for schema 1 traces. Keep files record
   * it and are refused by a trace with another one. */
  char content_hash[17];

  TraceModel model;

  size_t n_prompt;        /* s */
  size_t n_decode;        /* T */
  size_t n_positions;     /* s + T */
  size_t n_rows;          /* captured query rows */
  int64_t *row_positions; /* (n_rows) strictly increasing, each < n_positions */
  int32_t *tokens;        /* (n_positions) token ids; may be NULL for synth */

  char *prompt_text;    /* may be NULL */
  char *generated_text; /* may be NULL */
  int needle_found;     /* 1 / 0, or -1 when not applicable */

  size_t n_spans;
  TraceSpan spans[OBC_TRACE_MAX_SPANS];

  bool has_attn;   /* per-layer A present */
  bool has_logits; /* logits present */
  /* Column sums over every prompt row (schema 3, trace_read_column_sums).
   * agnostic_rows: the rows of the query-agnostic variant are prompt rows
   * [0, agnostic_rows), the positions before the question span (n_prompt
   * when the prompt has none). */
  bool has_column_sums;
  size_t agnostic_rows;
  /* Pre-RoPE query statistics over prompt rows from TRACE_QSTATS_FIRST_ROW
   * on (schema 3, optional: trace_read_query_stats). */
  bool has_query_stats;
} TraceMeta;

/* Which prompt rows a column sum adds up: those before the question (the
 * query-agnostic protocol, kvpress's default: the context is compressed
 * before the question arrives), or all of them (query-aware). */
typedef enum { TRACE_ROWS_AGNOSTIC = 0, TRACE_ROWS_ALL = 1, TRACE_ROWS_VARIANTS = 2 } TraceSumRows;
/* OBCache's terms (docs/SCIENCE.md), in the order of the obc array below. */
typedef enum {
  TRACE_OBC_V = 0,
  TRACE_OBC_K = 1,
  TRACE_OBC_VK = 2,
  TRACE_OBC_TERMS = 3
} TraceObcTerm;

/* The first prompt row the query statistics add up (kvpress's n_sink: the
 * first rows' outlier queries are left out). */
#define TRACE_QSTATS_FIRST_ROW 4

/* Whether text is a content hash: exactly 16 lower-case hex digits. */
bool trace_content_hash_valid(const char *text);
/* Frees the arrays and strings owned by meta (not meta itself). */
void trace_meta_free(TraceMeta *meta);
/* Deep copy. */
int trace_meta_copy(TraceMeta *dst, const TraceMeta *src);
/* Finds a span by name; returns NULL when absent. */
const TraceSpan *trace_meta_find_span(const TraceMeta *meta, const char *name);
/* Index of the first captured row at or after position, or n_rows. */
size_t trace_meta_row_index(const TraceMeta *meta, int64_t position);
/* Number of captured prompt rows that form a contiguous block ending at the
 * last prompt position (the largest usable perturbation window W). */
size_t trace_meta_window_rows(const TraceMeta *meta);
/* Number of captured decode rows (positions >= n_prompt), and the index of the
 * first one. */
size_t trace_meta_decode_rows(const TraceMeta *meta, size_t *first_index);

/* ---- Reading ---------------------------------------------------------------
 * trace_open reads schema versions 1 and 2; it checks the schema version, the
 * complete flag, every dataset's presence and shape, and fails with
 * "<path>: <problem>" otherwise (a damaged file: "<path>: <object>: checksum
 * mismatch (the file is damaged)" or "...: unreadable (...)"). Reads
 * convert to float whatever the storage dtype. Values are checked for NaN/Inf
 * as they are read (OBC_EVALUE naming the dataset). */
/* Before HDF5 sees the file, its raw bytes say whether it is in HDF5 1.10's
 * checksummed format (traces/trace_format.h); a schema-2 trace must be, and
 * any other file, or a schema-1 trace, is read through a converted copy made
 * in a child process (traces/trace_legacy.h), a crash or hang there failing
 * with "<path>: damaged schema-1 file (the HDF5 library failed reading it)". */
/* Error codes: OBC_EIO missing or unreadable file; OBC_EFORMAT not
 * HDF5, not a trace, incomplete (complete != 1), missing attribute or dataset,
 * inconsistent shape; OBC_EUNSUPPORTED another schema version; OBC_EVALUE a
 * NaN/Inf (message names dataset, layer, head, row and column). The read
 * functions serialise their HDF5 calls internally (an OpenMP critical
 * section, HDF5 itself is not thread-safe), so threads may read different
 * heads of one reader at once into their own buffers. meta->tokens,
 * prompt_text and generated_text are NULL when the trace has none. */
typedef struct TraceReader TraceReader;

int trace_open(const char *path, TraceReader **out);
/* trace_open refuses a trace whose extents exceed INT32_MAX or whose
 * tensors could not be in the file (a chunk never written, more bytes than
 * the file stores, a size product that would wrap): after it, products of
 * a trace's extents, times sizeof(double), do not overflow a size_t. */
/* malloc of count x size bytes for `what` (a tensor of the trace, e.g. "K of
 * one KV head"); on failure NULL and OBC_ENOMEM "<path>: out of memory
 * allocating N bytes for <what>", or when count x size would wrap. */
void *trace_alloc(const TraceReader *reader, size_t count, size_t size, const char *what);
void trace_close(TraceReader *reader);
const TraceMeta *trace_meta(const TraceReader *reader);
const char *trace_path(const TraceReader *reader);

/* From now on, keeps each K, V, Q, O and lse slab in memory after its first
 * read, max_bytes of them in all (the first read until the limit is met),
 * so that a later read of a kept slab is a copy: for a caller that reads
 * one trace several times over (obcache eval scores every policy of a
 * sample from its trace). Kept slabs are freed by trace_close. OBC_ENOMEM
 * when their table cannot be allocated; a slab that cannot be kept is
 * read from the file each time. */
int trace_keep_slabs(TraceReader *reader, size_t max_bytes);

/* K and V of one (layer, KV head): each (n_positions, head_dim). Either
 * pointer may be NULL to skip it. */
int trace_read_kv(TraceReader *reader, size_t layer, size_t kv_head, float *K, float *V);
/* Q, O (n_rows, head_dim) and lse (n_rows) of one (layer, query head). Any
 * pointer may be NULL. */
int trace_read_rows(TraceReader *reader, size_t layer, size_t head, float *Q, float *O, float *lse);
/* A of one (layer, query head): (n_rows, n_positions). OBC_ENOTFOUND if the
 * trace was written without attention rows. */
int trace_read_attn(TraceReader *reader, size_t layer, size_t head, float *A);
/* Logits (n_decode, vocab_size). */
int trace_read_logits(TraceReader *reader, float *logits);
/* The column sums of one layer over the prompt rows `rows` selects: for
 * query head h and prompt position p, over the rows i >= p of the variant,
 *   attn[h][p]   = sum_i A_ip
 *   obc[0][h][p] = sum_i A_ip^2 ||v_p||^2                      (obc_v)
 *   obc[1][h][p] = sum_i (A_ip z_ip)^2 ||v_p - o_i||^2         (obc_k)
 *   obc[2][h][p] = sum_i A_ip^2 ||v_p + z_ip (v_p - o_i)||^2   (obc_vk)
 * and counts[p] the number of rows that saw p (agnostic_rows - p or
 * n_prompt - p, 0 below). Any pointer may be NULL. OBC_ENOTFOUND when the
 * trace has no column sums (schema 2 and older); OBC_EVALUE for a value that
 * is NaN, infinite or negative, or a count that is not the number of rows
 * that saw its position. */
int trace_read_column_sums(TraceReader *reader, size_t layer, TraceSumRows rows,
                           double *attn /* (n_heads, n_prompt) */,
                           double *obc /* (TRACE_OBC_TERMS, n_heads, n_prompt) */,
                           int64_t *counts /* (n_prompt) */);
/* The pre-RoPE query statistics of one layer over the prompt rows `rows`
 * selects, from row TRACE_QSTATS_FIRST_ROW on: for query head h
 *   sum[h][c]      = sum_i q_ic
 *   outer[h][a][b] = sum_i q_ia q_ib
 * of the query before RoPE, and *count the number of rows (agnostic_rows
 * or n_prompt, less TRACE_QSTATS_FIRST_ROW, and 0 below). inv_freq
 * (head_dim / 2) are the RoPE frequencies the capture rotated with; K
 * (stored post-RoPE) was rotated by angle position x inv_freq[j] on the
 * pairs of model.rope_layout. Any pointer may be NULL. OBC_ENOTFOUND when
 * the trace has none; OBC_EVALUE for a value that is not finite, an outer
 * sum that is not symmetric or whose covariance outer/count - mean mean^T
 * has a negative diagonal beyond rounding, a count that is not the number
 * of rows, or a frequency that is not finite and positive. */
int trace_read_query_stats(TraceReader *reader, size_t layer, TraceSumRows rows,
                           double *sum /* (n_heads, head_dim) */,
                           double *outer /* (n_heads, head_dim, head_dim) */, int64_t *count,
                           double *inv_freq /* (head_dim / 2) */);
/* The bytes dataset `name` ("/layers/000/K") takes in the file, its logical
 * size (elements x element size) and its element size; OBC_ENOTFOUND when
 * it cannot be opened. For a trace read through a converted copy (schema 1,
 * traces/trace_legacy.h) these are the copy's, which is not compressed. */
int trace_dataset_sizes(TraceReader *reader, const char *name, double *stored, double *logical,
                        size_t *element_size);
/* Reads every stored tensor slab and the logits exactly as stored (which, in
 * schema 2, checks every chunk's Fletcher32 checksum) and computes the
 * trace's content hash from them and meta (traces/SCHEMA.md "Content hash")
 * into out: 16 lower-case hex digits. Equal to meta->content_hash unless the
 * file was damaged or modified (schema 1 traces record none). A damaged
 * chunk fails with OBC_EFORMAT: "<path>: /layers/003/K: checksum mismatch
 * (the file is damaged)". */
int trace_compute_hash(TraceReader *reader, char out[17]);

/* ---- Writing ---------------------------------------------------------------
 * trace_create writes under a temporary name beside path; trace_commit writes
 * `complete` last and renames. trace_abort (or a signal) removes the
 * temporary file. Every layer tensor must be written before commit. */
/* Details: the writer copies meta and fills schema_version,
 * tool_version, created, dtype, has_attn and has_logits itself (from the
 * options); NULL tokens / texts are simply not stored. lse and logits are
 * always stored as f32 (store_f16 applies to K, V, Q, O, A). Both
 * trace_commit (success or not) and trace_abort free the writer; after any
 * failed trace_write_* call, call trace_abort. Use one writer from one
 * thread. */
typedef struct {
  bool store_f16;        /* store float tensors as IEEE half */
  int compression_level; /* 0 = none, 1..9 = deflate (with shuffle) */
  bool store_attn;       /* create the per-layer A datasets */
  bool store_logits;     /* create the logits dataset (needs vocab_size) */
  /* create the column sums (schema 3; meta's agnostic_rows says where the
   * agnostic rows end) */
  bool store_column_sums;
  /* create the pre-RoPE query statistics (needs store_column_sums) */
  bool store_query_stats;
} TraceWriteOptions;

/* The writer's settings as option values (custom rows of
 * common/obc_options.h): "f32" or "f16" into a bool (store_f16), a level
 * 0..9 into an int (compression_level); anything else is refused, naming
 * the option; trace_show_dtype prints the bool as the help shows it. */
int trace_parse_dtype(void *target, const char *option, const char *value);
void trace_show_dtype(const void *target, char *text, size_t size);
int trace_parse_compression(void *target, const char *option, const char *value);

typedef struct TraceWriter TraceWriter;

int trace_create(const char *path, const TraceMeta *meta, const TraceWriteOptions *options,
                 TraceWriter **out);
int trace_write_kv(TraceWriter *writer, size_t layer, size_t kv_head, const float *K,
                   const float *V);
int trace_write_rows(TraceWriter *writer, size_t layer, size_t head, const float *Q, const float *O,
                     const float *lse);
int trace_write_attn(TraceWriter *writer, size_t layer, size_t head, const float *A);
int trace_write_logits(TraceWriter *writer, const float *logits);
/* The column sums of one layer (see trace_read_column_sums), both variants:
 * attn (TRACE_ROWS_VARIANTS, n_heads, n_prompt) and obc
 * (TRACE_ROWS_VARIANTS, TRACE_OBC_TERMS, n_heads, n_prompt), stored as f32;
 * and the counts (TRACE_ROWS_VARIANTS, n_prompt) once per trace. */
int trace_write_column_sums(TraceWriter *writer, size_t layer, const double *attn,
                            const double *obc);
int trace_write_column_counts(TraceWriter *writer, const int64_t *counts);
/* The query statistics of one layer (see trace_read_query_stats), both
 * variants: sum (TRACE_ROWS_VARIANTS, n_heads, head_dim) and outer
 * (TRACE_ROWS_VARIANTS, n_heads, head_dim, head_dim), stored as f64 (the
 * covariance is their difference: f32 would cancel); and once per trace the
 * row counts (TRACE_ROWS_VARIANTS) and the RoPE frequencies (head_dim / 2). */
int trace_write_query_stats(TraceWriter *writer, size_t layer, const double *sum,
                            const double *outer);
int trace_write_query_counts(TraceWriter *writer, const int64_t *counts, const double *inv_freq);
/* Updates the generated text / needle_found before commit (capture knows them
 * only at the end). */
int trace_set_result(TraceWriter *writer, const char *generated_text, int needle_found);
int trace_commit(TraceWriter *writer);
void trace_abort(TraceWriter *writer);

#endif
