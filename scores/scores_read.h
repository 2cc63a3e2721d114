/* Reading per-token scores back from an HDF5 file, so that a score computed
 * elsewhere (a --scores-out file of analyze or evict, or one written by any
 * tool) ranks tokens as a built-in score does. The file holds datasets of
 * float32 or float64, shape (n_layers, n_kv_heads, positions), and a
 * trace_hash attribute that must equal the content hash of the trace the
 * scores are applied to. */
#ifndef OBC_SCORES_READ_H
#define OBC_SCORES_READ_H

#include <stdbool.h>
#include <stddef.h>

/* A score named on the command line as NAME=file:PATH[:DATASET]. */
#define SCORES_FILE_PREFIX "file:"
#define SCORES_FILE_NAME_MAX 31 /* characters of NAME */
typedef struct {
  char name[SCORES_FILE_NAME_MAX + 1]; /* [A-Za-z0-9_.-]+ */
  char path[1024];
  char dataset[128]; /* "" when left out */
} ScoresFileSpec;

/* Whether name[0..len) is a NAME: 1..SCORES_FILE_NAME_MAX characters of
 * A-Z a-z 0-9 _ . - */
bool scores_file_name_valid(const char *name, size_t len);
/* Whether text is spelled NAME=file:... */
bool scores_file_spelled(const char *text);
/* Parses NAME=file:PATH[:DATASET] (DATASET: the text after the last ':'
 * when it holds no '/'; a PATH holding ':' needs one); OBC_EINVAL naming
 * option and text when NAME is empty, too long or holds other characters,
 * or PATH is empty or too long. */
int scores_file_spec_parse(const char *option, const char *text, ScoresFileSpec *out);

typedef struct {
  const char *path;       /* the HDF5 file */
  const char *dataset;    /* the dataset; NULL or "" when the file holds exactly one */
  const char *trace_hash; /* the trace's content hash */
  size_t n_layers, n_kv_heads;
  size_t n_positions; /* the first n_positions of each head are read */
} ScoresReadRequest;

/* Reads positions [0, n_positions) of every (layer, KV head) into out
 * (n_layers, n_kv_heads, n_positions). OBC_EIO / OBC_EFORMAT / OBC_EINVAL
 * with a message naming the file and what is wrong: missing or not HDF5,
 * no or another trace_hash, no such dataset (listing those it has), several
 * datasets and none named, a type other than float32/float64, a shape
 * other than (n_layers, n_kv_heads, >= n_positions), a NaN or infinity. */
int scores_read(const ScoresReadRequest *request, double *out);

#endif
