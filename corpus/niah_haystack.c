/* Loads a haystack and cuts it into sentences. A sentence ends at '.', '!' or
 * '?' (plus closing quotes or brackets) followed by a space; prose without
 * such an end is one long sentence. The Bible comes from `bible -f`, whose
 * lines start with a verse reference ("Ge1:1") that is dropped. */
#include "corpus/niah_haystack.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/obc_error.h"

/* RULER's noise haystack. */
const char niah_haystack_noise_text[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/* The five books of Moses: about 160k words, more than any context we serve. */
static const char kjv_command[] = "bible -f Ge1:1-De34:12 2>/dev/null";

static int is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_sentence_end(char c) { return c == '.' || c == '!' || c == '?'; }

static int is_closing(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

/* "Ge1:1", "Exo12:3", "1Ki2:4": a verse reference of `bible -f`. */
static int is_verse_reference(const char *word, size_t length) {
  size_t i = 0;
  if (i < length && word[i] >= '1' && word[i] <= '3') i++;
  size_t letters = i;
  while (i < length && isalpha((unsigned char)word[i])) i++;
  if (i == letters) return 0;
  size_t digits = i;
  while (i < length && isdigit((unsigned char)word[i])) i++;
  if (i == digits || i >= length || word[i] != ':') return 0;
  i++;
  digits = i;
  while (i < length && isdigit((unsigned char)word[i])) i++;
  return i > digits && i == length;
}

/* Rewrites text in place as words joined by single spaces. */
static size_t collapse_words(char *text, int (*drop_word)(const char *, size_t)) {
  size_t out = 0, i = 0;
  while (text[i]) {
    while (text[i] && is_space(text[i])) i++;
    size_t begin = i;
    while (text[i] && !is_space(text[i])) i++;
    size_t length = i - begin;
    if (!length || (drop_word && drop_word(text + begin, length))) continue;
    if (out) text[out++] = ' ';
    memmove(text + out, text + begin, length);
    out += length;
  }
  text[out] = '\0';
  return out;
}

int niah_haystack_from_text(char *text, const char *source, int (*drop_word)(const char *, size_t),
                            NiahHaystack *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->source, sizeof out->source, "%s", source);
  size_t length = collapse_words(text, drop_word);
  if (!length) return obc_fail(OBC_EFORMAT, "%s: no text to build a haystack from", source);
  /* Cut at "<end><closing>* " by turning that space into a NUL. */
  size_t n = 1;
  for (size_t i = 0; i < length; i++) {
    if (!is_sentence_end(text[i])) continue;
    size_t j = i + 1;
    while (j < length && is_closing(text[j])) j++;
    if (j < length && text[j] == ' ') {
      text[j] = '\0';
      n++;
      i = j;
    }
  }
  out->sentences = obc_calloc(n, sizeof *out->sentences, "haystack sentences");
  out->lengths = obc_calloc(n, sizeof *out->lengths, "haystack sentence lengths");
  if (!out->sentences || !out->lengths) {
    free(out->sentences);
    free(out->lengths);
    return OBC_ENOMEM;
  }
  const char *p = text;
  for (size_t i = 0; i < n; i++) {
    out->sentences[i] = p;
    out->lengths[i] = strlen(p);
    p += out->lengths[i] + 1;
  }
  out->n_sentences = n;
  out->text = text;
  return OBC_OK;
}

static int read_stream(FILE *fp, const char *source, char **text) {
  size_t size = 0, capacity = 1 << 16;
  char *buf = obc_malloc(capacity, "haystack text");
  if (!buf) return OBC_ENOMEM;
  for (;;) {
    if (capacity - size < 4096) {
      char *grown = realloc(buf, capacity * 2);
      if (!grown) {
        free(buf);
        return obc_fail(OBC_ENOMEM, "%s: out of memory reading the haystack", source);
      }
      buf = grown;
      capacity *= 2;
    }
    size_t got = fread(buf + size, 1, capacity - size - 1, fp);
    size += got;
    if (got == 0) break;
  }
  if (ferror(fp)) {
    free(buf);
    return obc_fail(OBC_EIO, "%s: read error (%s)", source, strerror(errno));
  }
  buf[size] = '\0';
  if (memchr(buf, '\0', size)) {
    free(buf);
    return obc_fail(OBC_EFORMAT, "%s: contains NUL bytes (expected plain UTF-8 text)", source);
  }
  *text = buf;
  return OBC_OK;
}

static int open_kjv(NiahHaystack *out) {
  FILE *fp = popen(kjv_command, "r");
  if (!fp)
    return obc_fail(OBC_EEXTERNAL,
                    "kjv haystack: cannot run `bible` (%s; install bible-kjv, "
                    "see scripts/setup.sh)",
                    strerror(errno));
  char *text = NULL;
  int rc = read_stream(fp, "kjv haystack (bible -f)", &text);
  int status = pclose(fp);
  if (!rc && status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127)
    rc = obc_fail(OBC_EEXTERNAL,
                  "kjv haystack: the `bible` program is not on PATH (install "
                  "bible-kjv, see scripts/setup.sh, or use --haystack noise|FILE)");
  if (!rc &&
      (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || strlen(text) < 1000))
    rc = obc_fail(OBC_EEXTERNAL,
                  "kjv haystack: `bible -f` failed or printed nothing (exit status "
                  "%d; install bible-kjv, see scripts/setup.sh, or use --haystack FILE)",
                  status == -1 ? -1 : WEXITSTATUS(status));
  if (rc) {
    free(text);
    return rc;
  }
  rc = niah_haystack_from_text(text, "kjv", is_verse_reference, out);
  if (rc) free(text);
  return rc;
}

static int open_file(const char *path, NiahHaystack *out) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return obc_fail(OBC_EIO, "%s: cannot open haystack file (%s)", path, strerror(errno));
  char *text = NULL;
  int rc = read_stream(fp, path, &text);
  fclose(fp);
  if (rc) return rc;
  rc = niah_haystack_from_text(text, path, NULL, out);
  if (rc) free(text);
  return rc;
}

int niah_haystack_open(const char *spec, NiahHaystack *out) {
  assert(spec && out);
  memset(out, 0, sizeof *out);
  if (!strcmp(spec, "kjv")) return open_kjv(out);
  if (!strcmp(spec, "noise")) {
    char *text = obc_malloc(sizeof niah_haystack_noise_text, "noise haystack");
    if (!text) return OBC_ENOMEM;
    memcpy(text, niah_haystack_noise_text, sizeof niah_haystack_noise_text);
    int rc = niah_haystack_from_text(text, "noise", NULL, out);
    if (rc) free(text);
    return rc;
  }
  return open_file(spec, out);
}

void niah_haystack_close(NiahHaystack *haystack) {
  if (!haystack) return;
  free(haystack->text);
  free(haystack->sentences);
  free(haystack->lengths);
  memset(haystack, 0, sizeof *haystack);
}

const char *niah_haystack_sentence(const NiahHaystack *haystack, size_t i, size_t *length) {
  assert(haystack->n_sentences > 0);
  size_t k = i % haystack->n_sentences;
  *length = haystack->lengths[k];
  return haystack->sentences[k];
}
