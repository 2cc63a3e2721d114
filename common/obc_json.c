/* Pretty-printed JSON reports written through a pending file; see obc_json.h. */
#include "common/obc_json.h"

#include <stdio.h>
#include <stdlib.h>

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
