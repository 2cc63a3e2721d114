/* Typed metadata look-ups of the GGUF reader (formats/gguf.h): integers of any
 * width widen to the requested type, arrays are indexed directly (fixed-size
 * elements) or through the offset index built while parsing (strings and
 * nested arrays). Bounds were checked when the file was opened. */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "common/obc_error.h"
#include "formats/gguf.h"
#include "formats/gguf_internal.h"

/* ---- metadata look-ups ---- */

static const GgufKv *find_kv(const GgufFile *file, const char *key) {
  for (size_t i = 0; i < file->n_kvs; i++)
    if (!strcmp(file->kvs[i].key, key)) return &file->kvs[i];
  return NULL;
}

static int lookup(const GgufFile *file, const char *key, const GgufKv **out) {
  assert(file && key);
  *out = find_kv(file, key);
  if (!*out) return obc_fail(OBC_ENOTFOUND, "%s: metadata key %s not found", file->path, key);
  return OBC_OK;
}

static int wrong_type(const GgufFile *file, const char *key, uint32_t type, const char *wanted) {
  return obc_fail(OBC_EFORMAT, "%s: metadata key %s has type %" PRIu32 " (expected %s)", file->path,
                  key, type, wanted);
}

static bool is_integer_type(uint32_t type) {
  return type <= GGUF_TYPE_INT32 || type == GGUF_TYPE_UINT64 || type == GGUF_TYPE_INT64;
}

/* Reads a scalar integer of any width; returns false for other types. */
static bool scalar_integer(uint32_t type, const uint8_t *p, int64_t *i, uint64_t *u,
                           bool *is_unsigned) {
  *is_unsigned = false;
  switch (type) {
    case GGUF_TYPE_UINT8:
      *u = p[0];
      *is_unsigned = true;
      break;
    case GGUF_TYPE_INT8: {
      int8_t v;
      memcpy(&v, p, 1);
      *i = v;
      break;
    }
    case GGUF_TYPE_UINT16: {
      uint16_t v;
      memcpy(&v, p, 2);
      *u = v;
      *is_unsigned = true;
      break;
    }
    case GGUF_TYPE_INT16: {
      int16_t v;
      memcpy(&v, p, 2);
      *i = v;
      break;
    }
    case GGUF_TYPE_UINT32: {
      uint32_t v;
      memcpy(&v, p, 4);
      *u = v;
      *is_unsigned = true;
      break;
    }
    case GGUF_TYPE_INT32: {
      int32_t v;
      memcpy(&v, p, 4);
      *i = v;
      break;
    }
    case GGUF_TYPE_UINT64:
      memcpy(u, p, 8);
      *is_unsigned = true;
      break;
    case GGUF_TYPE_INT64: memcpy(i, p, 8); break;
    default: return false;
  }
  if (*is_unsigned)
    *i = (int64_t)*u;
  else
    *u = (uint64_t)*i;
  return true;
}

static bool scalar_float(uint32_t type, const uint8_t *p, double *out) {
  if (type == GGUF_TYPE_FLOAT32) {
    float v;
    memcpy(&v, p, 4);
    *out = v;
    return true;
  }
  if (type == GGUF_TYPE_FLOAT64) {
    memcpy(out, p, 8);
    return true;
  }
  int64_t i;
  uint64_t u;
  bool is_unsigned;
  if (!scalar_integer(type, p, &i, &u, &is_unsigned)) return false;
  *out = is_unsigned ? (double)u : (double)i;
  return true;
}

int gguf_get_u64(const GgufFile *file, const char *key, uint64_t *out) {
  const GgufKv *kv;
  int rc = lookup(file, key, &kv);
  if (rc) return rc;
  int64_t i;
  uint64_t u;
  bool is_unsigned;
  if (!scalar_integer(kv->type, kv->value, &i, &u, &is_unsigned))
    return wrong_type(file, key, kv->type, "an integer");
  if (!is_unsigned && i < 0)
    return obc_fail(OBC_EFORMAT, "%s: metadata key %s is negative (%" PRId64 ")", file->path, key,
                    i);
  *out = u;
  return OBC_OK;
}

int gguf_get_f64(const GgufFile *file, const char *key, double *out) {
  const GgufKv *kv;
  int rc = lookup(file, key, &kv);
  if (rc) return rc;
  if (!scalar_float(kv->type, kv->value, out)) return wrong_type(file, key, kv->type, "a number");
  return 0;
}

int gguf_get_bool(const GgufFile *file, const char *key, bool *out) {
  const GgufKv *kv;
  int rc = lookup(file, key, &kv);
  if (rc) return rc;
  if (kv->type != GGUF_TYPE_BOOL) return wrong_type(file, key, kv->type, "a bool");
  *out = kv->value[0] != 0;
  return 0;
}

static void read_string_at(const uint8_t *p, GgufString *out) {
  memcpy(&out->length, p, 8); /* bounds were checked when the file was parsed */
  out->data = (const char *)p + 8;
}

int gguf_get_string(const GgufFile *file, const char *key, GgufString *out) {
  const GgufKv *kv;
  int rc = lookup(file, key, &kv);
  if (rc) return rc;
  if (kv->type != GGUF_TYPE_STRING) return wrong_type(file, key, kv->type, "a string");
  read_string_at(kv->value, out);
  return 0;
}

int gguf_get_array(const GgufFile *file, const char *key, uint32_t *element_type, uint64_t *count) {
  const GgufKv *kv;
  int rc = lookup(file, key, &kv);
  if (rc) return rc;
  if (kv->type != GGUF_TYPE_ARRAY) return wrong_type(file, key, kv->type, "an array");
  *element_type = kv->element_type;
  *count = kv->count;
  return 0;
}

static int array_element(const GgufFile *file, const char *key, uint64_t i, const GgufKv **kv_out,
                         const uint8_t **element) {
  const GgufKv *kv;
  int rc = lookup(file, key, &kv);
  if (rc) return rc;
  if (kv->type != GGUF_TYPE_ARRAY) return wrong_type(file, key, kv->type, "an array");
  if (i >= kv->count)
    return obc_fail(OBC_EINVAL,
                    "%s: index %" PRIu64 " past the end of array %s (%" PRIu64 " elements)",
                    file->path, i, key, kv->count);
  *kv_out = kv;
  *element = kv->offsets ? kv->elements + kv->offsets[i]
                         : kv->elements + i * (uint64_t)gguf_value_type_size(kv->element_type);
  return OBC_OK;
}

int gguf_get_array_string(const GgufFile *file, const char *key, uint64_t i, GgufString *out) {
  const GgufKv *kv;
  const uint8_t *p;
  int rc = array_element(file, key, i, &kv, &p);
  if (rc) return rc;
  if (kv->element_type != GGUF_TYPE_STRING)
    return wrong_type(file, key, kv->element_type, "an array of strings");
  read_string_at(p, out);
  return 0;
}

int gguf_get_array_f64(const GgufFile *file, const char *key, uint64_t i, double *out) {
  const GgufKv *kv;
  const uint8_t *p;
  int rc = array_element(file, key, i, &kv, &p);
  if (rc) return rc;
  if (!scalar_float(kv->element_type, p, out))
    return wrong_type(file, key, kv->element_type, "an array of numbers");
  return 0;
}

int gguf_get_array_i64(const GgufFile *file, const char *key, uint64_t i, int64_t *out) {
  const GgufKv *kv;
  const uint8_t *p;
  int rc = array_element(file, key, i, &kv, &p);
  if (rc) return rc;
  uint64_t u;
  bool is_unsigned;
  if (!is_integer_type(kv->element_type) ||
      !scalar_integer(kv->element_type, p, out, &u, &is_unsigned))
    return wrong_type(file, key, kv->element_type, "an array of integers");
  if (is_unsigned && u > (uint64_t)INT64_MAX)
    return obc_fail(OBC_EFORMAT, "%s: element %" PRIu64 " of %s does not fit in int64", file->path,
                    i, key);
  return OBC_OK;
}

int gguf_get_array_nested(const GgufFile *file, const char *key, uint64_t i, uint32_t *element_type,
                          uint64_t *count) {
  const GgufKv *kv;
  const uint8_t *p;
  int rc = array_element(file, key, i, &kv, &p);
  if (rc) return rc;
  if (kv->element_type != GGUF_TYPE_ARRAY)
    return wrong_type(file, key, kv->element_type, "an array of arrays");
  memcpy(element_type, p, 4); /* bounds were checked when the file was parsed */
  memcpy(count, p + 4, 8);
  return 0;
}

size_t gguf_metadata_count(const GgufFile *file) { return file->n_kvs; }

const char *gguf_metadata_key(const GgufFile *file, size_t i) {
  assert(i < file->n_kvs);
  return file->kvs[i].key;
}

uint32_t gguf_metadata_type(const GgufFile *file, size_t i) {
  assert(i < file->n_kvs);
  return file->kvs[i].type;
}
