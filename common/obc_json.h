/* Writing a cJSON document as a report file: pretty-printed, followed by a
 * newline, under a temporary name renamed when complete (common/obc_file.h),
 * so every JSON report of the tool is written the same way. */
#ifndef OBC_JSON_H
#define OBC_JSON_H

#include <cjson/cJSON.h>

#include "common/obc_file.h"

/* Prints root to DIR/NAME and frees root (also on failure). Returns 0,
 * OBC_ENOMEM when cJSON cannot print it, or an obc_text_open_in/close error. */
int obc_json_write(const char *dir, const char *name, cJSON *root);

/* The same as the next file of an output set (common/obc_file.h): pending
 * until obc_output_commit. Frees root. */
int obc_output_json(ObcOutputSet *set, const char *name, cJSON *root);

/* The first key that one object inside item (item itself, and every object
 * nested in its objects and arrays) holds twice; NULL when none. JSON
 * leaves a duplicate's meaning open and cJSON answers lookups with the
 * first, so a file read with one would mean what a reader of its last value
 * does not see: every JSON file the tool reads is refused with one
 * (formats/json_file.h). */
const char *obc_json_duplicate_key(const cJSON *item);

#endif
