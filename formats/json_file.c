/* json_file_read (formats/json_file.h): slurp a JSON file and parse it with
 * cJSON, reporting the byte where parsing stopped. Files are capped at 1 GiB
 * (tokenizer.json of large vocabularies is tens of MB). */
#include "formats/json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_json.h"
#include "common/obc_text.h"

int json_file_read(const char *path, cJSON **out) {
  *out = NULL;
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return obc_fail(errno == ENOENT ? OBC_ENOTFOUND : OBC_EIO, "%s: cannot open (%s)", path,
                    strerror(errno));
  long size = -1;
  if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
  if (size < 0 || size > (1L << 30) || fseek(fp, 0, SEEK_SET) != 0) {
    fclose(fp);
    return obc_fail(OBC_EIO, "%s: cannot determine the size or larger than 1 GiB", path);
  }
  char *text = obc_malloc((size_t)size + 1, path);
  if (!text) {
    fclose(fp);
    return OBC_ENOMEM;
  }
  size_t got = fread(text, 1, (size_t)size, fp);
  fclose(fp);
  if (got != (size_t)size) {
    free(text);
    return obc_fail(OBC_EIO, "%s: read %zu of %ld bytes", path, got, size);
  }
  text[size] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)size, &end, 0);
  if (!root) {
    long at = end ? (long)(end - text) : 0;
    free(text);
    return obc_fail(OBC_EFORMAT, "%s: invalid JSON near byte %ld", path, at);
  }
  free(text);
  const char *repeated = obc_json_duplicate_key(root);
  if (repeated) {
    char key[OBC_ESCAPED_SIZE(64)];
    obc_text_escape(key, sizeof key, repeated, true);
    int rc = obc_fail(OBC_EFORMAT, "%s: the key \"%s\" appears twice in one object", path, key);
    cJSON_Delete(root);
    return rc;
  }
  *out = root;
  return OBC_OK;
}
