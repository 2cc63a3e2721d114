/* Test helper for tests/test_ruler_niah_reference.py and the fixtures of
 * tests/data/ruler/: builds one sample of a RULER task with the model's
 * tokenizer and prints ruler_prompt_json's object (ids included) on stdout.
 *   ruler_dump --model GGUF --task T --length L --seed S [--no-chat-template]
 *   ruler_dump --list   (the task names, one a line) */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/ruler_task.h"
#include "common/obc_error.h"
#include "formats/gguf.h"

static int usage(void) {
  fprintf(stderr,
          "usage: ruler_dump --model GGUF --task T --length L --seed S "
          "[--no-chat-template]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *model = NULL, *name = NULL;
  unsigned long long length = 0, seed = 0;
  RulerOptions options;
  ruler_options_default(&options);
  if (argc == 2 && !strcmp(argv[1], "--list")) {
    for (size_t i = 0; i < ruler_task_count(); i++) printf("%s\n", ruler_task_at(i)->name);
    return 0;
  }
  for (int i = 1; i < argc; i++) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--no-chat-template"))
      options.no_chat_template = true;
    else if (!strcmp(argv[i], "--answer-space"))
      options.answer_space = true;
    else if (!value)
      return usage();
    else if (!strcmp(argv[i], "--model"))
      model = argv[++i];
    else if (!strcmp(argv[i], "--task"))
      name = argv[++i];
    else if (!strcmp(argv[i], "--length"))
      length = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--seed"))
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--run-seed")) {
      options.run_seed = strtoull(argv[++i], NULL, 10);
      options.has_run_seed = true;
    } else
      return usage();
  }
  if (!model || !name || !length) return usage();
  const RulerTask *task = ruler_task_find(name);
  if (!task) {
    fprintf(stderr, "ruler_dump: no task %s\n", name);
    return 1;
  }
  GgufFile *file = NULL;
  Tokenizer *tokenizer = NULL;
  RulerSources sources;
  RulerSample sample;
  cJSON *json = NULL;
  memset(&sources, 0, sizeof sources);
  memset(&sample, 0, sizeof sample);
  int rc = gguf_open(model, &file);
  if (!rc) rc = tokenizer_from_gguf(file, model, &tokenizer);
  if (!rc) rc = ruler_sources_open(&options, &sources);
  if (!rc) rc = ruler_sample_build(tokenizer, &sources, &options, task, length, seed, &sample);
  if (!rc) rc = ruler_prompt_json(task, length, seed, &sample, &json);
  char *text = rc ? NULL : cJSON_Print(json);
  if (!rc && !text) rc = obc_fail(OBC_ENOMEM, "out of memory printing the JSON");
  if (!rc) printf("%s\n", text);
  free(text);
  cJSON_Delete(json);
  ruler_sample_free(&sample);
  ruler_sources_close(&sources);
  tokenizer_free(tokenizer);
  if (file) gguf_close(file);
  if (rc) fprintf(stderr, "ruler_dump: %s\n", obc_error_message());
  return rc ? 1 : 0;
}
