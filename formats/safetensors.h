/* safetensors reader, memory-mapped, single file or sharded.
 *
 * File layout: uint64 little-endian header length N, then N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [begin,
 * end]}, ..., "__metadata__": {...}}, then the data section (offsets are
 * relative to its start). Shapes are row-major, slowest dimension first (the
 * reverse of GGUF's dims). A sharded checkpoint has model.safetensors.index.json
 * whose "weight_map" names the shard file of every tensor. */
#ifndef OBC_SAFETENSORS_H
#define OBC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  OBC_ST_F32 = 0,
  OBC_ST_F16,
  OBC_ST_BF16,
  OBC_ST_UNSUPPORTED /* any other dtype: listed, fails when converted */
} SafetensorsDtype;

typedef struct {
  char name[256];
  SafetensorsDtype dtype;
  char dtype_name[16]; /* as written in the header ("BF16", "I64", ...) */
  size_t n_dims;
  uint64_t shape[4]; /* slowest first */
  size_t n_elements;
  size_t n_bytes;
  const void *data; /* into the mapping of its shard */
  const char *path; /* the shard file it lives in */
} SafetensorsTensor;

typedef struct SafetensorsModel SafetensorsModel;

/* One .safetensors file. */
int safetensors_open_file(const char *path, SafetensorsModel **out);
/* A Hugging Face folder: model.safetensors.index.json (every shard it names) if
 * present, else model.safetensors. */
int safetensors_open_folder(const char *folder, SafetensorsModel **out);
void safetensors_close(SafetensorsModel *model);

size_t safetensors_tensor_count(const SafetensorsModel *model);
const SafetensorsTensor *safetensors_tensor(const SafetensorsModel *model, size_t i);
/* NULL when absent. */
const SafetensorsTensor *safetensors_find(const SafetensorsModel *model, const char *name);
/* Converts a whole tensor to fp32 (out: n_elements floats). */
int safetensors_to_f32(const SafetensorsTensor *tensor, float *out);
/* OBC_EFORMAT "<path>: tensor <name> has shape [a, b], expected [c, d]" unless
 * the shape is exactly shape[0..n_dims) (slowest first). */
int safetensors_check_shape(const SafetensorsTensor *tensor, size_t n_dims, const uint64_t *shape);

#endif
