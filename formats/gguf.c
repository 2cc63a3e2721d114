/* GGUF reader: maps the file, walks header, metadata and tensor table with a
 * bounds-checked cursor, and hands out the tensor table (formats/gguf.h); the
 * typed metadata look-ups are in formats/gguf_metadata.c.
 *
 * Nothing is copied except the keys and an offset index for arrays of strings
 * or arrays, so a 49K-entry vocabulary costs one pass; every read checks the
 * remaining length first and a truncated or corrupt file fails with
 * "<path>: truncated at offset N while reading <what>"; a tensor whose data
 * lies past the end with "<path>: truncated or damaged: tensor T needs bytes
 * [A, B) of the file, but the file ends at C". */
#include "formats/gguf.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "formats/gguf_internal.h"

enum { GGUF_MAX_ARRAY_DEPTH = 4, GGUF_DEFAULT_ALIGNMENT = 32 };

/* ---- bounds-checked cursor ---- */

typedef struct {
  const GgufFile *file;
  size_t pos;
} Cursor;

static int cursor_truncated(const Cursor *c, const char *what) {
  return obc_fail(OBC_EFORMAT,
                  "%s: truncated at offset %zu while reading %s (%zu bytes left; file damaged or "
                  "incompletely downloaded?)",
                  c->file->path, c->pos, what, c->file->size - c->pos);
}

static int cursor_need(const Cursor *c, uint64_t bytes, const char *what) {
  return bytes > c->file->size - c->pos ? cursor_truncated(c, what) : 0;
}

/* Skips count elements of element_size bytes. */
static int cursor_skip_elements(Cursor *c, uint64_t count, int element_size, const char *what) {
  if (count > (c->file->size - c->pos) / (uint64_t)element_size) return cursor_truncated(c, what);
  c->pos += (size_t)(count * (uint64_t)element_size);
  return 0;
}

static int cursor_bytes(Cursor *c, size_t n, const char *what, const uint8_t **out) {
  int rc = cursor_need(c, n, what);
  if (rc) return rc;
  *out = c->file->map + c->pos;
  c->pos += n;
  return 0;
}

static int cursor_u32(Cursor *c, const char *what, uint32_t *out) {
  const uint8_t *p;
  int rc = cursor_bytes(c, 4, what, &p);
  if (!rc) memcpy(out, p, 4);
  return rc;
}

static int cursor_u64(Cursor *c, const char *what, uint64_t *out) {
  const uint8_t *p;
  int rc = cursor_bytes(c, 8, what, &p);
  if (!rc) memcpy(out, p, 8);
  return rc;
}

static int cursor_string(Cursor *c, const char *what, GgufString *out) {
  uint64_t length;
  int rc = cursor_u64(c, what, &length);
  if (rc) return rc;
  rc = cursor_need(c, length, what);
  if (rc) return rc;
  out->data = (const char *)c->file->map + c->pos;
  out->length = length;
  c->pos += (size_t)length;
  return 0;
}

int gguf_value_type_size(uint32_t type) {
  switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64: return 8;
    case GGUF_TYPE_STRING:
    case GGUF_TYPE_ARRAY: return 0;
    default: return -1;
  }
}

/* Skips one value of the given type (recursing into nested arrays). */
static int cursor_skip_value(Cursor *c, uint32_t type, int depth, const char *key) {
  int size = gguf_value_type_size(type);
  if (size < 0)
    return obc_fail(OBC_EFORMAT,
                    "%s: metadata key %s has unknown value type %" PRIu32 " at offset %zu",
                    c->file->path, key, type, c->pos);
  if (size > 0) return cursor_skip_elements(c, 1, size, key);
  if (type == GGUF_TYPE_STRING) {
    GgufString s;
    return cursor_string(c, key, &s);
  }
  if (depth >= GGUF_MAX_ARRAY_DEPTH)
    return obc_fail(OBC_EFORMAT, "%s: metadata key %s nests arrays deeper than %d at offset %zu",
                    c->file->path, key, GGUF_MAX_ARRAY_DEPTH, c->pos);
  uint32_t element_type;
  uint64_t count;
  int rc = cursor_u32(c, key, &element_type);
  if (!rc) rc = cursor_u64(c, key, &count);
  if (rc) return rc;
  int element_size = gguf_value_type_size(element_type);
  if (element_size < 0)
    return obc_fail(OBC_EFORMAT, "%s: metadata key %s is an array of unknown type %" PRIu32,
                    c->file->path, key, element_type);
  if (element_size > 0) return cursor_skip_elements(c, count, element_size, key);
  for (uint64_t i = 0; i < count; i++) {
    rc = cursor_skip_value(c, element_type, depth + 1, key);
    if (rc) return rc;
  }
  return OBC_OK;
}

/* ---- header, metadata, tensor table ---- */

static int read_kv(Cursor *c, GgufKv *kv) {
  GgufString key;
  int rc = cursor_string(c, "a metadata key", &key);
  if (rc) return rc;
  kv->key = obc_malloc(key.length + 1, "a GGUF metadata key");
  if (!kv->key) return OBC_ENOMEM;
  memcpy(kv->key, key.data, key.length);
  kv->key[key.length] = '\0';
  rc = cursor_u32(c, kv->key, &kv->type);
  if (rc) return rc;
  kv->value = c->file->map + c->pos;
  if (kv->type != GGUF_TYPE_ARRAY) return cursor_skip_value(c, kv->type, 0, kv->key);

  rc = cursor_u32(c, kv->key, &kv->element_type);
  if (!rc) rc = cursor_u64(c, kv->key, &kv->count);
  if (rc) return rc;
  kv->elements = c->file->map + c->pos;
  int element_size = gguf_value_type_size(kv->element_type);
  if (element_size < 0)
    return obc_fail(OBC_EFORMAT, "%s: metadata key %s is an array of unknown type %" PRIu32,
                    c->file->path, kv->key, kv->element_type);
  if (element_size > 0) return cursor_skip_elements(c, kv->count, element_size, kv->key);
  /* Strings take >= 8 bytes each, nested arrays >= 12: bound the index size
   * by the bytes left before allocating it. */
  if (kv->count > (c->file->size - c->pos) / 8) return cursor_truncated(c, kv->key);
  kv->offsets = obc_malloc(kv->count * sizeof *kv->offsets, "a GGUF array index");
  if (!kv->offsets) return OBC_ENOMEM;
  for (uint64_t i = 0; i < kv->count; i++) {
    kv->offsets[i] = (uint64_t)(c->file->map + c->pos - kv->elements);
    rc = cursor_skip_value(c, kv->element_type, 1, kv->key);
    if (rc) return rc;
  }
  return OBC_OK;
}

/* Bytes per block and elements per block of a ggml type; 0 when unknown. */
static void type_block(uint32_t type, size_t *block_elements, size_t *block_bytes) {
  size_t e = 0, b = 0;
  switch (type) {
    case GGML_TYPE_F32:
      e = 1;
      b = 4;
      break;
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
      e = 1;
      b = 2;
      break;
    case GGML_TYPE_Q4_0:
      e = 32;
      b = 18;
      break;
    case GGML_TYPE_Q4_1:
      e = 32;
      b = 20;
      break;
    case GGML_TYPE_Q5_0:
      e = 32;
      b = 22;
      break;
    case GGML_TYPE_Q5_1:
      e = 32;
      b = 24;
      break;
    case GGML_TYPE_Q8_0:
      e = 32;
      b = 34;
      break;
    case GGML_TYPE_Q4_K:
      e = 256;
      b = 144;
      break;
    case GGML_TYPE_Q5_K:
      e = 256;
      b = 176;
      break;
    case GGML_TYPE_Q6_K:
      e = 256;
      b = 210;
      break;
    default: break;
  }
  *block_elements = e;
  *block_bytes = b;
}

size_t gguf_type_block_size(uint32_t type) {
  size_t e, b;
  type_block(type, &e, &b);
  return e;
}

size_t gguf_type_block_bytes(uint32_t type) {
  size_t e, b;
  type_block(type, &e, &b);
  return b;
}

static int read_tensor_info(Cursor *c, size_t index, GgufTensor *t) {
  char what[64];
  snprintf(what, sizeof what, "the name of tensor %zu", index);
  GgufString name;
  int rc = cursor_string(c, what, &name);
  if (rc) return rc;
  if (name.length >= sizeof t->name)
    return obc_fail(OBC_EFORMAT,
                    "%s: tensor %zu has a name of %" PRIu64 " bytes (at most %zu allowed)",
                    c->file->path, index, name.length, sizeof t->name - 1);
  memcpy(t->name, name.data, name.length);
  t->name[name.length] = '\0';
  rc = cursor_u32(c, t->name, &t->n_dims);
  if (rc) return rc;
  if (t->n_dims < 1 || t->n_dims > 4)
    return obc_fail(OBC_EFORMAT, "%s: tensor %s has %" PRIu32 " dimensions (expected 1 to 4)",
                    c->file->path, t->name, t->n_dims);
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    rc = cursor_u64(c, t->name, &t->dims[d]);
    if (rc) return rc;
    if (t->dims[d] == 0 || t->dims[d] > (uint64_t)SIZE_MAX / n_elements)
      return obc_fail(OBC_EFORMAT,
                      "%s: tensor %s has an invalid extent %" PRIu64 " in dimension %" PRIu32,
                      c->file->path, t->name, t->dims[d], d);
    n_elements *= t->dims[d];
  }
  for (uint32_t d = t->n_dims; d < 4; d++) t->dims[d] = 1;
  rc = cursor_u32(c, t->name, &t->type);
  if (!rc) rc = cursor_u64(c, t->name, &t->offset);
  if (rc) return rc;
  t->n_elements = (size_t)n_elements;
  size_t block_elements, block_bytes;
  type_block(t->type, &block_elements, &block_bytes);
  if (block_elements == 0) { /* unknown type: size unknown, fails when used */
    t->n_bytes = 0;
    return OBC_OK;
  }
  if (t->dims[0] % block_elements)
    return obc_fail(OBC_EFORMAT,
                    "%s: tensor %s has rows of %" PRIu64
                    " elements, not a multiple of %s's block of %zu",
                    c->file->path, t->name, t->dims[0], gguf_type_name(t->type), block_elements);
  size_t n_blocks = t->n_elements / block_elements;
  if (n_blocks > SIZE_MAX / block_bytes) /* the byte count would wrap (to 0: "unknown type") */
    return obc_fail(OBC_EFORMAT,
                    "%s: tensor %s has %zu elements of %s, more bytes than a size can count",
                    c->file->path, t->name, t->n_elements, gguf_type_name(t->type));
  t->n_bytes = n_blocks * block_bytes;
  return OBC_OK;
}

static int check_tensor_data(GgufFile *file) {
  size_t data_size = file->size - file->data_start;
  for (size_t i = 0; i < file->n_tensors; i++) {
    GgufTensor *t = &file->tensors[i];
    if (t->offset % file->alignment)
      return obc_fail(OBC_EFORMAT,
                      "%s: tensor %s has offset %" PRIu64 ", not a multiple of the alignment %zu",
                      file->path, t->name, t->offset, file->alignment);
    if (t->n_bytes == 0) continue; /* unsupported type: reported when used */
    if (t->offset > data_size || t->n_bytes > data_size - t->offset) {
      /* [begin, end) in file offsets; a header may claim offsets that wrap. */
      uint64_t begin = 0, end = 0;
      if (__builtin_add_overflow((uint64_t)file->data_start, t->offset, &begin) ||
          __builtin_add_overflow(begin, (uint64_t)t->n_bytes, &end))
        return obc_fail(OBC_EFORMAT,
                        "%s: truncated or damaged: tensor %s needs %zu bytes at offset %" PRIu64
                        " of the tensor data, past any file; the file ends at %zu",
                        file->path, t->name, t->n_bytes, t->offset, file->size);
      return obc_fail(OBC_EFORMAT,
                      "%s: truncated or damaged: tensor %s needs bytes [%" PRIu64 ", %" PRIu64
                      ") of the file, but the file ends at %zu (%" PRIu64 " bytes missing)",
                      file->path, t->name, begin, end, file->size, end - (uint64_t)file->size);
    }
    t->data = file->map + file->data_start + t->offset;
  }
  return OBC_OK;
}

static int read_alignment(GgufFile *file) {
  file->alignment = GGUF_DEFAULT_ALIGNMENT;
  uint64_t alignment;
  int rc = gguf_get_u64(file, "general.alignment", &alignment);
  if (rc == OBC_ENOTFOUND) return OBC_OK;
  if (rc) return rc;
  if (alignment == 0 || (alignment & (alignment - 1)) || alignment > 65536)
    return obc_fail(OBC_EFORMAT,
                    "%s: general.alignment is %" PRIu64 " (expected a power of two up to 65536)",
                    file->path, alignment);
  file->alignment = (size_t)alignment;
  return OBC_OK;
}

static int parse(GgufFile *file) {
  Cursor c = {file, 0};
  const uint8_t *magic;
  int rc = cursor_bytes(&c, 4, "the magic number", &magic);
  if (rc) return rc;
  if (memcmp(magic, "GGUF", 4)) {
    char shown[5];
    for (int i = 0; i < 4; i++)
      shown[i] = (magic[i] >= 32 && magic[i] < 127) ? (char)magic[i] : '?';
    shown[4] = '\0';
    return obc_fail(OBC_EFORMAT, "%s: not a GGUF file (expected magic \"GGUF\", found \"%s\")",
                    file->path, shown);
  }
  rc = cursor_u32(&c, "the version", &file->version);
  if (rc) return rc;
  if (file->version != 2 && file->version != 3)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: unsupported GGUF version %" PRIu32 " (expected 2 or 3%s)", file->path,
                    file->version,
                    file->version == 1 ? "; re-convert with a current llama.cpp" : "");
  uint64_t n_tensors, n_kvs;
  rc = cursor_u64(&c, "the tensor count", &n_tensors);
  if (!rc) rc = cursor_u64(&c, "the metadata count", &n_kvs);
  if (rc) return rc;
  /* A key/value pair takes >= 13 bytes and a tensor info >= 29: bound the
   * counts by the file size before allocating. */
  if (n_kvs > file->size / 13 || n_tensors > file->size / 29)
    return obc_fail(
        OBC_EFORMAT,
        "%s: truncated at offset %zu while reading the metadata (the header claims %" PRIu64
        " entries and %" PRIu64 " tensors, more than a %zu-byte file can hold)",
        file->path, c.pos, n_kvs, n_tensors, file->size);
  file->kvs = obc_calloc((size_t)n_kvs, sizeof *file->kvs, "GGUF metadata");
  file->tensors = obc_calloc((size_t)n_tensors, sizeof *file->tensors, "the GGUF tensor table");
  if (!file->kvs || !file->tensors) return OBC_ENOMEM;
  for (uint64_t i = 0; i < n_kvs; i++) {
    file->n_kvs = (size_t)i + 1; /* so gguf_close frees a partly read entry */
    rc = read_kv(&c, &file->kvs[i]);
    if (rc) return rc;
  }
  for (uint64_t i = 0; i < n_tensors; i++) {
    rc = read_tensor_info(&c, (size_t)i, &file->tensors[i]);
    if (rc) return rc;
    file->n_tensors = (size_t)i + 1;
  }
  rc = read_alignment(file);
  if (rc) return rc;
  size_t padded = (c.pos + file->alignment - 1) / file->alignment * file->alignment;
  if (n_tensors > 0 && padded > file->size)
    return obc_fail(OBC_EFORMAT,
                    "%s: truncated at offset %zu while reading the padding before tensor data",
                    file->path, file->size);
  file->data_start = padded > file->size ? file->size : padded;
  return check_tensor_data(file);
}

int gguf_open(const char *path, GgufFile **out) {
  assert(path && out);
  *out = NULL;
  GgufFile *file = obc_calloc(1, sizeof *file, "a GGUF file handle");
  if (!file) return OBC_ENOMEM;
  snprintf(file->path, sizeof file->path, "%s", path);
  const void *map;
  int rc = obc_file_map(path, &map, &file->size);
  if (rc) {
    free(file);
    return rc;
  }
  file->map = map;
  rc = parse(file);
  if (rc) {
    gguf_close(file);
    return rc;
  }
  *out = file;
  return OBC_OK;
}

void gguf_close(GgufFile *file) {
  if (!file) return;
  for (size_t i = 0; i < file->n_kvs; i++) {
    free(file->kvs[i].key);
    free(file->kvs[i].offsets);
  }
  free(file->kvs);
  free(file->tensors);
  obc_file_unmap(file->map, file->size);
  free(file);
}

uint32_t gguf_version(const GgufFile *file) { return file->version; }
const char *gguf_path(const GgufFile *file) { return file->path; }
size_t gguf_alignment(const GgufFile *file) { return file->alignment; }
size_t gguf_data_offset(const GgufFile *file) { return file->data_start; }

/* ---- tensors ---- */

size_t gguf_tensor_count(const GgufFile *file) { return file->n_tensors; }

const GgufTensor *gguf_tensor(const GgufFile *file, size_t i) {
  assert(i < file->n_tensors);
  return &file->tensors[i];
}

const GgufTensor *gguf_find_tensor(const GgufFile *file, const char *name) {
  for (size_t i = 0; i < file->n_tensors; i++)
    if (!strcmp(file->tensors[i].name, name)) return &file->tensors[i];
  return NULL;
}

const char *gguf_type_name(uint32_t type) {
  switch (type) {
    case GGML_TYPE_F32: return "F32";
    case GGML_TYPE_F16: return "F16";
    case GGML_TYPE_BF16: return "BF16";
    case GGML_TYPE_Q4_0: return "Q4_0";
    case GGML_TYPE_Q4_1: return "Q4_1";
    case GGML_TYPE_Q5_0: return "Q5_0";
    case GGML_TYPE_Q5_1: return "Q5_1";
    case GGML_TYPE_Q8_0: return "Q8_0";
    case GGML_TYPE_Q4_K: return "Q4_K";
    case GGML_TYPE_Q5_K: return "Q5_K";
    case GGML_TYPE_Q6_K: return "Q6_K";
    default: return "unsupported";
  }
}

int gguf_tensor_to_f32(const GgufFile *file, const GgufTensor *tensor, float *out) {
  if (gguf_type_block_size(tensor->type) == 0 || !tensor->data)
    return obc_fail(OBC_EUNSUPPORTED,
                    "%s: tensor %s has unsupported type %" PRIu32
                    " (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
                    file->path, tensor->name, tensor->type);
  int rc = dequant_gguf(tensor->type, tensor->data, out, tensor->n_elements);
  if (rc) return obc_fail_context(rc, "%s: tensor %s", file->path, tensor->name);
  return OBC_OK;
}

int gguf_tensor_check_shape(const GgufFile *file, const GgufTensor *tensor, uint32_t n_dims,
                            const uint64_t *dims) {
  bool same = tensor->n_dims == n_dims;
  for (uint32_t d = 0; same && d < n_dims; d++) same = tensor->dims[d] == dims[d];
  if (same) return OBC_OK;
  char found[96] = "", wanted[96] = "";
  size_t used = 0;
  for (uint32_t d = 0; d < tensor->n_dims; d++)
    used += (size_t)snprintf(found + used, sizeof found - used, "%s%" PRIu64, d ? ", " : "",
                             tensor->dims[d]);
  used = 0;
  for (uint32_t d = 0; d < n_dims; d++)
    used +=
        (size_t)snprintf(wanted + used, sizeof wanted - used, "%s%" PRIu64, d ? ", " : "", dims[d]);
  return obc_fail(OBC_EFORMAT, "%s: tensor %s has shape [%s], expected [%s]", file->path,
                  tensor->name, found, wanted);
}
