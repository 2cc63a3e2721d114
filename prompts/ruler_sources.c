/* Loads what RULER's generators draw from: the essay haystack and the word
 * list, whose words are kept when they are 3 to 12 lowercase ASCII letters
 * (no capitals, possessives or accents), sorted and distinct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompts/ruler_task.h"
#include "common/obc_error.h"

#define RULER_DEFAULT_WORDS "/usr/share/dict/words"
#define RULER_WORD_MIN 3
#define RULER_WORD_MAX 12
#define RULER_WORDS_MIN_COUNT 1000 /* fewer makes cwe's draws repeat */

void ruler_options_default(RulerOptions *options) {
  memset(options, 0, sizeof *options);
  options->essay = "kjv";
}

void ruler_text_free(RulerText *text) {
  free(text->before);
  free(text->context);
  free(text->after);
  free(text->answer_prefix);
  memset(text, 0, sizeof *text);
}

static int word_order(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int plain_word(const char *w, size_t n) {
  if (n < RULER_WORD_MIN || n > RULER_WORD_MAX) return 0;
  for (size_t i = 0; i < n; i++)
    if (w[i] < 'a' || w[i] > 'z') return 0;
  return 1;
}

static int load_words(const char *path, RulerSources *s) {
  FILE *fp = fopen(path, "r");
  if (!fp)
    return obc_fail(OBC_EIO,
                    "%s: cannot read the word list (hint: apt-get install wamerican, "
                    "or --words FILE)",
                    path);
  size_t cap = 0;
  char line[256];
  int rc = OBC_OK;
  while (!rc && fgets(line, sizeof line, fp)) {
    size_t n = strcspn(line, "\r\n");
    if (line[n] == '\0' && n == sizeof line - 1) { /* an over-long line: skip its rest */
      int c;
      while ((c = fgetc(fp)) != EOF && c != '\n') {
      }
      continue;
    }
    if (!plain_word(line, n)) continue;
    if (s->n_words == cap) {
      size_t grown_cap = cap ? 2 * cap : 4096;
      char **grown = realloc(s->words, grown_cap * sizeof *grown);
      if (!grown) {
        rc = obc_fail(OBC_ENOMEM, "%s: out of memory for the word list", path);
        break;
      }
      s->words = grown;
      cap = grown_cap;
    }
    s->words[s->n_words] = obc_malloc(n + 1, "word");
    if (!s->words[s->n_words]) {
      rc = OBC_ENOMEM;
      break;
    }
    memcpy(s->words[s->n_words], line, n);
    s->words[s->n_words++][n] = '\0';
  }
  if (!rc && ferror(fp)) rc = obc_fail(OBC_EIO, "%s: read error", path);
  fclose(fp);
  if (rc) return rc;
  qsort(s->words, s->n_words, sizeof *s->words, word_order);
  size_t kept = 0;
  for (size_t i = 0; i < s->n_words; i++) {
    if (kept > 0 && !strcmp(s->words[kept - 1], s->words[i]))
      free(s->words[i]);
    else
      s->words[kept++] = s->words[i];
  }
  s->n_words = kept;
  if (s->n_words < RULER_WORDS_MIN_COUNT)
    return obc_fail(OBC_EFORMAT, "%s: %zu words of %d-%d lowercase letters, at least %d needed",
                    path, s->n_words, RULER_WORD_MIN, RULER_WORD_MAX, RULER_WORDS_MIN_COUNT);
  return OBC_OK;
}

int ruler_sources_open(const RulerOptions *options, RulerSources *out) {
  memset(out, 0, sizeof *out);
  int rc = load_words(options->words ? options->words : RULER_DEFAULT_WORDS, out);
  if (!rc) rc = niah_haystack_open(options->essay ? options->essay : "kjv", &out->essay);
  if (rc) ruler_sources_close(out);
  return rc;
}

void ruler_sources_close(RulerSources *s) {
  for (size_t i = 0; i < s->n_words; i++) free(s->words[i]);
  free(s->words);
  niah_haystack_close(&s->essay);
  memset(s, 0, sizeof *s);
}
