/* Reading a small JSON file (config.json, model.safetensors.index.json,
 * tokenizer_config.json) into a cJSON tree, with errors that name the file. */
#ifndef OBC_JSON_FILE_H
#define OBC_JSON_FILE_H

#include <cjson/cJSON.h>

/* Parses the whole file; OBC_ENOTFOUND when it does not exist, OBC_EFORMAT
 * "<path>: invalid JSON near byte N" when it does not parse or when one
 * object holds a key twice (obc_json_duplicate_key). Free the tree with
 * cJSON_Delete. */
int json_file_read(const char *path, cJSON **out);

#endif
