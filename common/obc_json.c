/* Pretty-printed JSON reports written through a pending file; see obc_json.h. */
#include "common/obc_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_file.h"

int obc_json_write(const char *dir, const char *name, cJSON *root) {
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return OBC_ENOMEM;
  ObcPendingFile file;
  FILE *fp = NULL;
  int rc = obc_text_open_in(&file, dir, name, &fp);
  if (!rc) {
    fprintf(fp, "%s\n", text);
    rc = obc_text_close(&file, fp, 1);
  }
  free(text);
  return rc;
}

int obc_output_json(ObcOutputSet *set, const char *name, cJSON *root) {
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return obc_fail(OBC_ENOMEM, "%s/%s: out of memory", set->dir, name);
  FILE *fp = NULL;
  int rc = obc_output_open(set, name, &fp);
  if (!rc) {
    fprintf(fp, "%s\n", text);
    rc = obc_output_close(set, fp);
  }
  free(text);
  return rc;
}

static int compare_keys(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The repeated key among the n members of an object: sorted, a repeat is
 * next to its twin (n log n, for the 50k-key vocabularies of
 * tokenizer.json); pairwise when the list cannot be allocated. */
static const char *repeated_key(const cJSON *object, size_t n) {
  const char **keys = n > 8 ? malloc(n * sizeof *keys) : NULL;
  if (!keys) {
    for (const cJSON *a = object->child; a; a = a->next)
      for (const cJSON *b = a->next; b; b = b->next)
        if (a->string && b->string && !strcmp(a->string, b->string)) return a->string;
    return NULL;
  }
  size_t k = 0;
  for (const cJSON *a = object->child; a; a = a->next)
    if (a->string) keys[k++] = a->string;
  qsort(keys, k, sizeof *keys, compare_keys);
  const char *found = NULL;
  for (size_t i = 1; i < k && !found; i++)
    if (!strcmp(keys[i - 1], keys[i])) found = keys[i];
  free(keys);
  return found;
}

const char *obc_json_duplicate_key(const cJSON *item) {
  if (!item || !(cJSON_IsObject(item) || cJSON_IsArray(item))) return NULL;
  size_t n = 0;
  for (const cJSON *child = item->child; child; child = child->next) {
    const char *found = obc_json_duplicate_key(child);
    if (found) return found;
    n++;
  }
  return cJSON_IsObject(item) ? repeated_key(item, n) : NULL;
}
