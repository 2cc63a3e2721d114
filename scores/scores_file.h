/* The --scores-out file of analyze and evict: per-token scores as one HDF5
 * dataset per score (analyze: attn, ..., remove, oracle@1, oracle@T at the
 * main window; evict: the policy's), each float64 of shape (n_layers,
 * n_kv_heads, positions), written one (layer, KV head) hyperslab at a time,
 * under a temporary name renamed by scores_file_commit. Attributes: schema
 * "obcache-scores/1", window, trace, trace_hash (the trace's content hash,
 * "" when unknown), gqa, precision, tool_version, oracle_steps. */
#ifndef OBC_SCORES_FILE_H
#define OBC_SCORES_FILE_H

#include <stddef.h>

#define OBC_SCORES_SCHEMA "obcache-scores/1"
#define OBC_SCORES_MAX_DATASETS 16

typedef struct ScoresFile ScoresFile;

typedef struct {
  size_t n_layers, n_kv_heads, n_prompt; /* n_prompt: the positions of each head scored */
  size_t window;                         /* main window */
  const char *trace_path;
  const char *trace_hash;   /* content hash of the trace, or NULL */
  const char *gqa;          /* "sum" / "mean" / "max" */
  const char *precision;    /* "float" / "double" */
  size_t oracle_steps;      /* T of oracleT; 0 when only oracle1 is written */
  const char *const *names; /* (n_datasets) dataset names */
  size_t n_datasets;
} ScoresFileLayout;

int scores_file_create(const char *path, const ScoresFileLayout *layout, ScoresFile **out);
/* values: (n_prompt), dataset index as in layout->names. */
int scores_file_write_head(ScoresFile *file, size_t dataset, size_t layer, size_t kv_head,
                           const double *values);
/* Closes and renames into place; frees file. */
int scores_file_commit(ScoresFile *file);
/* Closes and removes the temporary file; frees file. NULL is a no-op. */
void scores_file_abort(ScoresFile *file);

#endif
