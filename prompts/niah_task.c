/* Makes the task text of a NIAH prompt: RULER's needles with keys and values
 * drawn from the seed (distinct keys, or one shared key for multi-value;
 * distinct values), its instruction, question and answer prefix in the
 * "number" or "uuid" wording, or a custom needle split around its answer. */
#include "prompts/niah_task.h"

#include <stdio.h>
#include <string.h>

#include "prompts/niah_random.h"
#include "common/obc_error.h"

static int ruler_needles(const NiahOptions *o, NiahTask *task) {
  NiahRandom random;
  niah_random_seed(&random, o->seed);
  const char *kind = o->value_kind == NIAH_VALUE_UUID ? "uuid" : "number";
  for (size_t j = 0; j < task->n_needles; j++) {
    NiahNeedle needle = {0}, *n = &needle; /* stored once complete */
    bool fresh;
    do { /* distinct keys (multi-key) and distinct values */
      if (j == 0 || !o->multi_value)
        niah_random_key(&random, n->key, sizeof n->key);
      else
        snprintf(n->key, sizeof n->key, "%s", task->needles[0].key);
      if (o->value_kind == NIAH_VALUE_UUID)
        niah_random_uuid(&random, n->value, sizeof n->value);
      else
        niah_random_number(&random, n->value, sizeof n->value);
      fresh = true;
      for (size_t i = 0; i < j; i++)
        if (!strcmp(task->needles[i].value, n->value) ||
            (!o->multi_value && !strcmp(task->needles[i].key, n->key)))
          fresh = false;
    } while (!fresh);
    snprintf(n->before, sizeof n->before, "One of the special magic %ss for %s is:", kind, n->key);
    snprintf(n->after, sizeof n->after, ".");
    n->value_spaced = true;
    task->needles[j] = needle;
  }
  const char *key = task->needles[0].key;
  snprintf(task->instruction, sizeof task->instruction,
           "Some special magic %ss are hidden within the following text. Make sure to memorize "
           "it. I will quiz you about the %ss afterwards.\n",
           kind, kind);
  if (o->multi_value) {
    snprintf(task->question, sizeof task->question,
             "What are all the special magic %ss for %s mentioned in the provided text?", kind,
             key);
    snprintf(task->answer_prefix, sizeof task->answer_prefix,
             "The special magic %ss for %s mentioned in the provided text are", kind, key);
  } else {
    snprintf(task->question, sizeof task->question,
             "What is the special magic %s for %s mentioned in the provided text?", kind, key);
    snprintf(task->answer_prefix, sizeof task->answer_prefix,
             "The special magic %s for %s mentioned in the provided text is", kind, key);
  }
  return OBC_OK;
}

static int custom_needle(const NiahOptions *o, NiahTask *task) {
  if (!o->needle_text || !o->question_text || !o->answer_text)
    return obc_fail(OBC_EINVAL,
                    "niah: a custom needle needs --needle, --question and --answer "
                    "together");
  if (task->n_needles != 1)
    return obc_fail(OBC_EINVAL, "niah: a custom needle is inserted once (found --needles %zu)",
                    task->n_needles);
  const char *text = o->needle_text, *answer = o->answer_text;
  const char *at = answer[0] ? strstr(text, answer) : NULL;
  if (!at)
    return obc_fail(OBC_EINVAL, "niah: --answer \"%s\" does not occur in --needle \"%s\"", answer,
                    text);
  size_t before = (size_t)(at - text), value = strlen(answer);
  NiahNeedle *n = &task->needles[0];
  if (before >= sizeof n->before || value >= sizeof n->value ||
      strlen(at + value) >= sizeof n->after || strlen(o->question_text) >= sizeof task->question)
    return obc_fail(OBC_EINVAL, "niah: --needle or --question is too long (at most 1000 bytes)");
  n->value_spaced = before > 0 && text[before - 1] == ' ';
  snprintf(n->before, sizeof n->before, "%.*s", (int)(before - (n->value_spaced ? 1 : 0)), text);
  snprintf(n->value, sizeof n->value, "%s", answer);
  snprintf(n->after, sizeof n->after, "%s", at + value);
  snprintf(n->key, sizeof n->key, "custom");
  snprintf(task->question, sizeof task->question, "%s", o->question_text);
  task->instruction[0] = '\0';
  snprintf(task->answer_prefix, sizeof task->answer_prefix, "%s",
           o->answer_prefix ? o->answer_prefix : "");
  return OBC_OK;
}

int niah_task_make(const NiahOptions *options, NiahTask *task) {
  memset(task, 0, sizeof *task);
  task->n_needles = options->n_needles;
  bool custom = options->needle_text || options->question_text || options->answer_text;
  return custom ? custom_needle(options, task) : ruler_needles(options, task);
}
