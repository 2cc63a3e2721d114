/* Internals of the GGUF reader shared by its parsing (formats/gguf.c) and
 * metadata look-up (formats/gguf_metadata.c) halves: the file handle and one
 * metadata entry, both pointing into the memory-mapped file; and the two
 * block loops of dequant_gguf (formats/dequant.c, formats/dequant_avx2.c). */
#ifndef OBC_GGUF_INTERNAL_H
#define OBC_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

/* Model files are little-endian and are read in place. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "obcache reads GGUF and safetensors in place and needs a little-endian host"
#endif

typedef struct {
  char *key;            /* NUL-terminated copy */
  uint32_t type;        /* GgufValueType */
  const uint8_t *value; /* the value's bytes in the mapping */
  /* Arrays only. */
  uint32_t element_type;
  uint64_t count;
  const uint8_t *elements; /* first element */
  uint64_t *offsets; /* (count) byte offsets from elements, for string/array elements; else NULL */
} GgufKv;

struct GgufFile {
  char path[4096];
  const uint8_t *map; /* (size) bytes */
  size_t size;
  uint32_t version;
  size_t alignment;
  size_t data_start; /* offset of the tensor data section */
  GgufKv *kvs;       /* (n_kvs) */
  size_t n_kvs;
  GgufTensor *tensors; /* (n_tensors) */
  size_t n_tensors;
};

/* Size of a fixed-size value type, 0 for string/array, -1 when unknown. */
int gguf_value_type_size(uint32_t type);

/* out[0 .. n_blocks * block size) = the n_blocks whole blocks at `blocks`, of
 * a type dequant_gguf supports: the portable loop, and the AVX2 + FMA + F16C
 * one (only where quant_dot_avx2_supported() is 1) with the same bits. */
void dequant_span_portable(uint32_t type, const uint8_t *blocks, float *out, size_t n_blocks);
void dequant_span_avx2(uint32_t type, const uint8_t *blocks, float *out, size_t n_blocks);

#endif
