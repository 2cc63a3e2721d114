/* safetensors reader (formats/safetensors.h): maps each shard, parses its JSON
 * header with cJSON and checks every tensor's dtype, shape and byte range
 * against the data section before handing out pointers into the mapping.
 * Sharded folders are read through model.safetensors.index.json, and every
 * tensor the index promises must be in the shard it names. */
#include "formats/safetensors.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_json.h"
#include "common/obc_text.h"
#include "formats/float16.h"
#include "formats/json_file.h"

enum { ST_MAX_HEADER = 100 << 20 }; /* headers are KBs; refuse absurd lengths */

typedef struct {
  char path[4096];
  const uint8_t *map; /* (size) bytes */
  size_t size;
} Shard;

struct SafetensorsModel {
  Shard **shards; /* (n_shards) */
  size_t n_shards;
  SafetensorsTensor *tensors; /* (n_tensors) */
  size_t n_tensors, capacity;
};

static size_t dtype_size(const char *name, SafetensorsDtype *dtype) {
  static const struct {
    const char *name;
    SafetensorsDtype dtype;
    size_t size;
  } table[] = {
      {"F32", OBC_ST_F32, 4},
      {"F16", OBC_ST_F16, 2},
      {"BF16", OBC_ST_BF16, 2},
      {"F64", OBC_ST_UNSUPPORTED, 8},
      {"I64", OBC_ST_UNSUPPORTED, 8},
      {"I32", OBC_ST_UNSUPPORTED, 4},
      {"I16", OBC_ST_UNSUPPORTED, 2},
      {"I8", OBC_ST_UNSUPPORTED, 1},
      {"U8", OBC_ST_UNSUPPORTED, 1},
      {"BOOL", OBC_ST_UNSUPPORTED, 1},
      {"U16", OBC_ST_UNSUPPORTED, 2},
      {"U32", OBC_ST_UNSUPPORTED, 4},
      {"U64", OBC_ST_UNSUPPORTED, 8},
      {"F8_E4M3", OBC_ST_UNSUPPORTED, 1},
      {"F8_E5M2", OBC_ST_UNSUPPORTED, 1},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(table[i].name, name)) {
      *dtype = table[i].dtype;
      return table[i].size;
    }
  *dtype = OBC_ST_UNSUPPORTED;
  return 0;
}

static int map_shard(const char *path, Shard **out) {
  *out = NULL;
  Shard *shard = obc_calloc(1, sizeof *shard, "a safetensors shard");
  if (!shard) return OBC_ENOMEM;
  snprintf(shard->path, sizeof shard->path, "%s", path);
  const void *map;
  int rc = obc_file_map(path, &map, &shard->size);
  if (rc) {
    free(shard);
    return rc;
  }
  shard->map = map;
  *out = shard;
  return OBC_OK;
}

static void unmap_shard(Shard *shard) {
  if (!shard) return;
  obc_file_unmap(shard->map, shard->size);
  free(shard);
}

/* A JSON number that is a non-negative integer below 2^53. */
static bool json_size(const cJSON *item, uint64_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v)) return false;
  *out = (uint64_t)v;
  return true;
}

static int parse_entry(SafetensorsModel *model, const Shard *shard, const cJSON *entry,
                       size_t data_start) {
  const char *path = shard->path;
  if (strlen(entry->string) >= sizeof model->tensors[0].name)
    return obc_fail(OBC_EFORMAT, "%s: tensor name of %zu bytes is too long", path,
                    strlen(entry->string));
  if (model->n_tensors == model->capacity) {
    size_t capacity = model->capacity ? 2 * model->capacity : 64;
    SafetensorsTensor *grown = realloc(model->tensors, capacity * sizeof *grown);
    if (!grown) return obc_fail(OBC_ENOMEM, "%s: out of memory for the tensor table", path);
    model->tensors = grown;
    model->capacity = capacity;
  }
  SafetensorsTensor *t = &model->tensors[model->n_tensors];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", entry->string);
  t->path = shard->path;
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
  const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
  if (!cJSON_IsObject(entry) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) ||
      !cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
    return obc_fail(OBC_EFORMAT,
                    "%s: header entry %s lacks dtype, shape or data_offsets [begin, end]", path,
                    t->name);
  snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtype->valuestring);
  size_t element_size = dtype_size(dtype->valuestring, &t->dtype);
  int n_dims = cJSON_GetArraySize(shape);
  if (n_dims > 4)
    return obc_fail(OBC_EFORMAT, "%s: tensor %s has %d dimensions (at most 4 supported)", path,
                    t->name, n_dims);
  t->n_dims = (size_t)n_dims;
  uint64_t n_elements = 1;
  for (int d = 0; d < n_dims; d++) {
    if (!json_size(cJSON_GetArrayItem(shape, d), &t->shape[d]) ||
        (t->shape[d] && n_elements > (uint64_t)SIZE_MAX / 8 / t->shape[d]))
      return obc_fail(OBC_EFORMAT, "%s: tensor %s has an invalid extent in dimension %d", path,
                      t->name, d);
    n_elements *= t->shape[d];
  }
  uint64_t begin, end;
  if (!json_size(cJSON_GetArrayItem(offsets, 0), &begin) ||
      !json_size(cJSON_GetArrayItem(offsets, 1), &end) || end < begin)
    return obc_fail(OBC_EFORMAT, "%s: tensor %s has invalid data_offsets", path, t->name);
  size_t data_size = shard->size - data_start;
  if (end > data_size)
    return obc_fail(
        OBC_EFORMAT,
        "%s: truncated at offset %zu while reading tensor %s (its data ends at offset %" PRIu64 ")",
        path, shard->size, t->name, (uint64_t)data_start + end);
  if (element_size && end - begin != n_elements * element_size)
    return obc_fail(OBC_EFORMAT,
                    "%s: tensor %s has %" PRIu64 " data bytes (expected %" PRIu64 " for %" PRIu64
                    " %s elements)",
                    path, t->name, end - begin, n_elements * element_size, n_elements,
                    t->dtype_name);
  t->n_elements = (size_t)n_elements;
  t->n_bytes = (size_t)(end - begin);
  t->data = shard->map + data_start + begin;
  model->n_tensors++;
  return OBC_OK;
}

static int parse_shard(SafetensorsModel *model, const Shard *shard) {
  const char *path = shard->path;
  if (shard->size < 8)
    return obc_fail(OBC_EFORMAT, "%s: truncated at offset %zu while reading the header length",
                    path, shard->size);
  uint64_t header_length;
  memcpy(&header_length, shard->map, 8);
  if (header_length > ST_MAX_HEADER)
    return obc_fail(OBC_EFORMAT,
                    "%s: header length %" PRIu64 " is implausible (not a safetensors file?)", path,
                    header_length);
  if (header_length > shard->size - 8)
    return obc_fail(OBC_EFORMAT,
                    "%s: truncated at offset %zu while reading the JSON header (%" PRIu64 " bytes)",
                    path, shard->size, header_length);
  const char *end = NULL;
  cJSON *header =
      cJSON_ParseWithLengthOpts((const char *)shard->map + 8, (size_t)header_length, &end, 0);
  if (!cJSON_IsObject(header)) {
    long at = end ? (long)(end - (const char *)shard->map) : 8;
    cJSON_Delete(header);
    return obc_fail(OBC_EFORMAT, "%s: the header is not a JSON object (invalid near byte %ld)",
                    path, at);
  }
  int rc = 0;
  char escaped[OBC_ESCAPED_SIZE(64)];
  const char *repeated = obc_json_duplicate_key(header);
  if (repeated)
    rc = obc_fail(OBC_EFORMAT, "%s: the header holds the key \"%s\" twice in one object", path,
                  obc_text_escape(escaped, sizeof escaped, repeated, true));
  const cJSON *entry;
  cJSON_ArrayForEach(entry, header) {
    if (rc) break;
    if (!strcmp(entry->string, "__metadata__")) continue;
    if (safetensors_find(model, entry->string)) {
      rc = obc_fail(OBC_EFORMAT, "%s: tensor %s appears twice in the checkpoint", path,
                    obc_text_escape(escaped, sizeof escaped, entry->string, false));
      break;
    }
    rc = parse_entry(model, shard, entry, 8 + (size_t)header_length);
    if (rc) break;
  }
  cJSON_Delete(header);
  return rc;
}

static int add_shard(SafetensorsModel *model, const char *path) {
  Shard **grown = realloc(model->shards, (model->n_shards + 1) * sizeof *grown);
  if (!grown) return obc_fail(OBC_ENOMEM, "%s: out of memory", path);
  model->shards = grown;
  int rc = map_shard(path, &model->shards[model->n_shards]);
  if (rc) return rc;
  model->n_shards++;
  return parse_shard(model, model->shards[model->n_shards - 1]);
}

int safetensors_open_file(const char *path, SafetensorsModel **out) {
  assert(path && out);
  *out = NULL;
  SafetensorsModel *model = obc_calloc(1, sizeof *model, "a safetensors model");
  if (!model) return OBC_ENOMEM;
  int rc = add_shard(model, path);
  if (rc) {
    safetensors_close(model);
    return rc;
  }
  *out = model;
  return OBC_OK;
}

static bool shard_listed(const SafetensorsModel *model, const char *path) {
  for (size_t i = 0; i < model->n_shards; i++)
    if (!strcmp(model->shards[i]->path, path)) return true;
  return false;
}

/* Opens every shard the index names, then checks each promised tensor is in
 * its shard. */
static int open_index(SafetensorsModel *model, const char *folder, const char *index_path) {
  cJSON *index;
  int rc = json_file_read(index_path, &index);
  if (rc) return rc;
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
  if (!cJSON_IsObject(map)) {
    cJSON_Delete(index);
    return obc_fail(OBC_EFORMAT, "%s: no \"weight_map\" object", index_path);
  }
  const cJSON *entry;
  char path[4096];
  cJSON_ArrayForEach(entry, map) {
    if (!cJSON_IsString(entry) || strchr(entry->valuestring, '/') ||
        !strcmp(entry->valuestring, "..")) {
      rc = obc_fail(OBC_EFORMAT, "%s: weight_map entry %s is not a shard file name in the folder",
                    index_path, entry->string);
      break;
    }
    snprintf(path, sizeof path, "%s/%s", folder, entry->valuestring);
    if (shard_listed(model, path)) continue;
    rc = add_shard(model, path);
    if (rc) break;
  }
  cJSON_ArrayForEach(entry, map) {
    if (rc) break;
    snprintf(path, sizeof path, "%s/%s", folder, entry->valuestring);
    const SafetensorsTensor *t = safetensors_find(model, entry->string);
    if (!t || strcmp(t->path, path))
      rc = obc_fail(OBC_EFORMAT, "%s: tensor %s is listed in %s but not found there", index_path,
                    entry->string, entry->valuestring);
  }
  cJSON_Delete(index);
  return rc;
}

int safetensors_open_folder(const char *folder, SafetensorsModel **out) {
  assert(folder && out);
  *out = NULL;
  SafetensorsModel *model = obc_calloc(1, sizeof *model, "a safetensors model");
  if (!model) return OBC_ENOMEM;
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", folder);
  struct stat st;
  int rc;
  if (stat(path, &st) == 0) {
    rc = open_index(model, folder, path);
  } else {
    snprintf(path, sizeof path, "%s/model.safetensors", folder);
    if (stat(path, &st) != 0)
      rc = obc_fail(OBC_ENOTFOUND,
                    "%s: no model.safetensors or model.safetensors.index.json in the folder",
                    folder);
    else
      rc = add_shard(model, path);
  }
  if (rc) {
    safetensors_close(model);
    return rc;
  }
  *out = model;
  return OBC_OK;
}

void safetensors_close(SafetensorsModel *model) {
  if (!model) return;
  for (size_t i = 0; i < model->n_shards; i++) unmap_shard(model->shards[i]);
  free(model->shards);
  free(model->tensors);
  free(model);
}

size_t safetensors_tensor_count(const SafetensorsModel *model) { return model->n_tensors; }

const SafetensorsTensor *safetensors_tensor(const SafetensorsModel *model, size_t i) {
  assert(i < model->n_tensors);
  return &model->tensors[i];
}

const SafetensorsTensor *safetensors_find(const SafetensorsModel *model, const char *name) {
  for (size_t i = 0; i < model->n_tensors; i++)
    if (!strcmp(model->tensors[i].name, name)) return &model->tensors[i];
  return NULL;
}

int safetensors_to_f32(const SafetensorsTensor *tensor, float *out) {
  const uint8_t *p = tensor->data;
  size_t n = tensor->n_elements;
  switch (tensor->dtype) {
    case OBC_ST_F32: memcpy(out, p, n * sizeof *out); return OBC_OK;
    case OBC_ST_F16:
#pragma omp parallel for schedule(static) if (n >= (1u << 20))
      for (size_t i = 0; i < n; i++) out[i] = float16_f16_to_f32(float16_read_u16(p + 2 * i));
      return OBC_OK;
    case OBC_ST_BF16:
#pragma omp parallel for schedule(static) if (n >= (1u << 20))
      for (size_t i = 0; i < n; i++) out[i] = float16_bf16_to_f32(float16_read_u16(p + 2 * i));
      return OBC_OK;
    default:
      return obc_fail(OBC_EUNSUPPORTED,
                      "%s: tensor %s has unsupported dtype %s (expected F32, F16 or BF16)",
                      tensor->path, tensor->name, tensor->dtype_name);
  }
}

int safetensors_check_shape(const SafetensorsTensor *tensor, size_t n_dims, const uint64_t *shape) {
  bool same = tensor->n_dims == n_dims;
  for (size_t d = 0; same && d < n_dims; d++) same = tensor->shape[d] == shape[d];
  if (same) return OBC_OK;
  char found[96] = "", wanted[96] = "";
  size_t used = 0;
  for (size_t d = 0; d < tensor->n_dims; d++)
    used += (size_t)snprintf(found + used, sizeof found - used, "%s%" PRIu64, d ? ", " : "",
                             tensor->shape[d]);
  used = 0;
  for (size_t d = 0; d < n_dims; d++)
    used += (size_t)snprintf(wanted + used, sizeof wanted - used, "%s%" PRIu64, d ? ", " : "",
                             shape[d]);
  return obc_fail(OBC_EFORMAT, "%s: tensor %s has shape [%s], expected [%s]", tensor->path,
                  tensor->name, found, wanted);
}
