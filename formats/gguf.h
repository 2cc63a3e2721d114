/* GGUF reader (versions 2 and 3), memory-mapped.
 *
 * File layout: magic "GGUF", uint32 version, uint64 tensor count, uint64
 * metadata count; then the metadata key/value pairs (string key, uint32 type,
 * value; arrays are uint32 element type + uint64 count + elements); then the
 * tensor infos (name, uint32 n_dims, uint64 dims[n_dims] fastest-varying
 * first, uint32 ggml type, uint64 offset); then padding to
 * general.alignment (default 32) and the tensor data, each tensor at its
 * offset from the start of the data section. All little-endian. */
#ifndef OBC_GGUF_H
#define OBC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  GGUF_TYPE_UINT8 = 0,
  GGUF_TYPE_INT8 = 1,
  GGUF_TYPE_UINT16 = 2,
  GGUF_TYPE_INT16 = 3,
  GGUF_TYPE_UINT32 = 4,
  GGUF_TYPE_INT32 = 5,
  GGUF_TYPE_FLOAT32 = 6,
  GGUF_TYPE_BOOL = 7,
  GGUF_TYPE_STRING = 8,
  GGUF_TYPE_ARRAY = 9,
  GGUF_TYPE_UINT64 = 10,
  GGUF_TYPE_INT64 = 11,
  GGUF_TYPE_FLOAT64 = 12
} GgufValueType;

/* ggml tensor types this reader dequantises. */
typedef enum {
  GGML_TYPE_F32 = 0,
  GGML_TYPE_F16 = 1,
  GGML_TYPE_Q4_0 = 2,
  GGML_TYPE_Q4_1 = 3,
  GGML_TYPE_Q5_0 = 6,
  GGML_TYPE_Q5_1 = 7,
  GGML_TYPE_Q8_0 = 8,
  GGML_TYPE_Q4_K = 12,
  GGML_TYPE_Q5_K = 13,
  GGML_TYPE_Q6_K = 14,
  GGML_TYPE_BF16 = 30
} GgufType;

typedef struct {
  const char *data; /* points into the mapping; not NUL-terminated */
  uint64_t length;
} GgufString;

typedef struct GgufFile GgufFile;

typedef struct {
  char name[256];
  uint32_t n_dims;
  uint64_t dims[4]; /* dims[0] is the fastest-varying (row length) */
  uint32_t type;    /* GgufType */
  uint64_t offset;  /* from the start of the data section */
  size_t n_elements;
  size_t n_bytes;   /* 0 for a type this reader does not know (size unknown) */
  const void *data; /* into the mapping; NULL for such a type */
} GgufTensor;

int gguf_open(const char *path, GgufFile **out);
void gguf_close(GgufFile *file);
uint32_t gguf_version(const GgufFile *file);
const char *gguf_path(const GgufFile *file);   /* as given to gguf_open */
size_t gguf_alignment(const GgufFile *file);   /* general.alignment, default 32 */
size_t gguf_data_offset(const GgufFile *file); /* start of the tensor data section */

/* Metadata lookups: OBC_ENOTFOUND when the key is absent, OBC_EFORMAT when it
 * has another type. Integers of any width convert to the requested one. */
int gguf_get_u64(const GgufFile *file, const char *key, uint64_t *out);
int gguf_get_f64(const GgufFile *file, const char *key, double *out);
int gguf_get_bool(const GgufFile *file, const char *key, bool *out);
int gguf_get_string(const GgufFile *file, const char *key, GgufString *out);
/* Arrays: element type and count; element i through the typed getters. */
int gguf_get_array(const GgufFile *file, const char *key, uint32_t *element_type, uint64_t *count);
int gguf_get_array_string(const GgufFile *file, const char *key, uint64_t i, GgufString *out);
int gguf_get_array_f64(const GgufFile *file, const char *key, uint64_t i, double *out);
int gguf_get_array_i64(const GgufFile *file, const char *key, uint64_t i, int64_t *out);
/* Element i of an array of arrays: its element type and count. */
int gguf_get_array_nested(const GgufFile *file, const char *key, uint64_t i, uint32_t *element_type,
                          uint64_t *count);
size_t gguf_metadata_count(const GgufFile *file);
const char *gguf_metadata_key(const GgufFile *file, size_t i);
uint32_t gguf_metadata_type(const GgufFile *file, size_t i);

size_t gguf_tensor_count(const GgufFile *file);
const GgufTensor *gguf_tensor(const GgufFile *file, size_t i);
const GgufTensor *gguf_find_tensor(const GgufFile *file, const char *name);
const char *gguf_type_name(uint32_t type); /* "unsupported" for other types */
/* Elements and bytes per block of a supported type; 0 for other types. */
size_t gguf_type_block_size(uint32_t type);
size_t gguf_type_block_bytes(uint32_t type);

/* Dequantises n elements of a tensor of the given type to fp32 (formats/dequant.c;
 * OpenMP over blocks for large n). n must be a multiple of the type's block
 * size. Unknown type: OBC_EUNSUPPORTED. Runs the AVX2 + F16C decoders where
 * quant_dot_rows runs its AVX2 or AVX-512 kernel (formats/quant_dot.h: CPUID,
 * and OBC_SIMD=portable forces the portable C), with the same bits either way. */
int dequant_gguf(uint32_t type, const void *data, float *out, size_t n);
/* dequant_gguf with its kernel forced, for the tests and benchmarks that
 * compare them: the portable C twin, and AVX2 (call it only where
 * quant_dot_avx2_supported() is 1). */
int dequant_gguf_portable(uint32_t type, const void *data, float *out, size_t n);
int dequant_gguf_avx2(uint32_t type, const void *data, float *out, size_t n);
/* Dequantises a whole tensor (out: n_elements floats); an unsupported type is
 * "<path>: tensor <name> has unsupported type <n>". */
int gguf_tensor_to_f32(const GgufFile *file, const GgufTensor *tensor, float *out);
/* OBC_EFORMAT "<path>: tensor <name> has shape [a, b], expected [c, d]" unless
 * the tensor's shape is exactly dims (fastest first; n_dims entries). */
int gguf_tensor_check_shape(const GgufFile *file, const GgufTensor *tensor, uint32_t n_dims,
                            const uint64_t *dims);

#endif
