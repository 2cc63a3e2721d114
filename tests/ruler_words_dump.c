/* Test helper for tests/test_ruler_words_reference.py: prints one sample of
 * RULER's vt, cwe or fwe text (prompts/ruler_words.h) as a JSON object with
 * the fields of RulerText, for
 *   ruler_words_dump --task vt|cwe|fwe --length N --seed N --size N [--words FILE] */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/ruler_task.h"
#include "prompts/ruler_words.h"
#include "common/obc_error.h"

static int parse_size(const char *text, size_t *out) {
  char *end;
  unsigned long long v = strtoull(text, &end, 10);
  if (!*text || *end || text[0] == '-') return obc_fail(OBC_EINVAL, "'%s' is not a count", text);
  *out = (size_t)v;
  return OBC_OK;
}

static cJSON *text_json(const char *task, size_t length, size_t seed, size_t size,
                        const RulerText *t) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "task", task);
  cJSON_AddNumberToObject(root, "length", (double)length);
  cJSON_AddNumberToObject(root, "seed", (double)seed);
  cJSON_AddNumberToObject(root, "size", (double)size);
  cJSON_AddStringToObject(root, "before", t->before);
  cJSON_AddStringToObject(root, "context", t->context);
  cJSON_AddStringToObject(root, "after", t->after);
  cJSON_AddStringToObject(root, "answer_prefix", t->answer_prefix);
  cJSON *answers = cJSON_AddArrayToObject(root, "answers");
  for (size_t i = 0; i < t->n_answers; i++)
    cJSON_AddItemToArray(answers, cJSON_CreateString(t->answers[i]));
  cJSON *marks = cJSON_AddArrayToObject(root, "marks");
  for (size_t i = 0; i < t->n_marks; i++) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", t->marks[i].name);
    cJSON_AddNumberToObject(m, "begin", (double)t->marks[i].begin);
    cJSON_AddNumberToObject(m, "end", (double)t->marks[i].end);
    cJSON_AddItemToArray(marks, m);
  }
  return root;
}

int main(int argc, char **argv) {
  const char *task = NULL;
  size_t length = 0, seed = 0, size = 0;
  RulerOptions options;
  ruler_options_default(&options);
  int rc = OBC_OK;
  for (int i = 1; !rc && i < argc; i += 2) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!value)
      rc = obc_fail(OBC_EINVAL, "%s needs a value", argv[i]);
    else if (!strcmp(argv[i], "--task"))
      task = value;
    else if (!strcmp(argv[i], "--length"))
      rc = parse_size(value, &length);
    else if (!strcmp(argv[i], "--seed"))
      rc = parse_size(value, &seed);
    else if (!strcmp(argv[i], "--size"))
      rc = parse_size(value, &size);
    else if (!strcmp(argv[i], "--words"))
      options.words = value;
    else
      rc = obc_fail(OBC_EINVAL, "unknown option %s", argv[i]);
  }
  RulerTextFn generate = NULL;
  if (!rc && task && !strcmp(task, "vt")) generate = ruler_vt_text;
  if (!rc && task && !strcmp(task, "cwe")) generate = ruler_cwe_text;
  if (!rc && task && !strcmp(task, "fwe")) generate = ruler_fwe_text;
  if (!rc && !generate) rc = obc_fail(OBC_EINVAL, "--task must be vt, cwe or fwe");
  RulerSources sources;
  memset(&sources, 0, sizeof sources);
  RulerText text;
  memset(&text, 0, sizeof text);
  if (!rc) rc = ruler_sources_open(&options, &sources);
  if (!rc) rc = generate(&sources, length, seed, size, &text);
  if (!rc) {
    cJSON *root = text_json(task, length, seed, size, &text);
    char *printed = cJSON_Print(root);
    if (printed)
      printf("%s\n", printed);
    else
      rc = obc_fail(OBC_ENOMEM, "out of memory printing the JSON");
    free(printed);
    cJSON_Delete(root);
  }
  ruler_text_free(&text);
  ruler_sources_close(&sources);
  if (rc) fprintf(stderr, "ruler_words_dump: %s\n", obc_error_message());
  return rc ? 1 : 0;
}
