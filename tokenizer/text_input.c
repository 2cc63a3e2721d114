/* File, token-list and text-encoding helpers (tokenizer/text_input.h). */
#include "tokenizer/text_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

ObcOption text_max_bytes_option(size_t *max_bytes) {
  return (ObcOption)OBC_OPT_SIZE("--max-text-bytes", "N", max_bytes,
                                 "refuse a text file of more than N bytes (a cap against a wrong "
                                 "path such as /dev/zero)");
}

static int too_long(const char *path, size_t max_bytes) {
  return obc_fail(OBC_EINVAL,
                  "%s: more than %zu bytes, the cap on a text file (raise it with "
                  "--max-text-bytes N)",
                  path, max_bytes);
}

int text_read_file(const char *path, size_t max_bytes, char **text, size_t *length) {
  *text = NULL;
  *length = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return obc_fail(OBC_EIO, "%s: cannot open (%s)", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = obc_malloc(cap, "text file");
  if (!buf) {
    fclose(f);
    return OBC_ENOMEM;
  }
  size_t got;
  int rc = OBC_OK;
  while (!rc && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len > max_bytes) {
      rc = too_long(path, max_bytes);
    } else if (cap - len - 1 == 0) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger)
        rc = obc_fail(OBC_ENOMEM, "%s: out of memory reading the file", path);
      else
        buf = bigger, cap *= 2;
    }
  }
  if (!rc && ferror(f)) rc = obc_fail(OBC_EIO, "%s: read error", path);
  fclose(f);
  const char *nul = rc ? NULL : memchr(buf, '\0', len);
  if (nul)
    rc = obc_fail(OBC_EINVAL, "%s: NUL byte at offset %zu (not a UTF-8 text file; UTF-16?)", path,
                  (size_t)(nul - buf));
  if (rc) {
    free(buf);
    return rc;
  }
  buf[len] = '\0';
  *text = buf;
  *length = len;
  return OBC_OK;
}

int text_parse_ids(const char *option, const char *text, int32_t **ids, size_t *n) {
  *ids = NULL;
  *n = 0;
  size_t cap = 1;
  for (const char *p = text; *p; p++) cap += *p == ',';
  int32_t *out = obc_malloc(cap * sizeof(int32_t), "token ids");
  if (!out) return OBC_ENOMEM;
  size_t count = 0;
  const char *p = text;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
      free(out);
      return obc_fail(OBC_EINVAL, "%s: expected comma-separated token ids, got '%s'", option, text);
    }
    out[count++] = (int32_t)v;
    p = *end ? end + 1 : end;
  }
  if (count == 0) {
    free(out);
    return obc_fail(OBC_EINVAL, "%s: no token ids given", option);
  }
  *ids = out;
  *n = count;
  return OBC_OK;
}

int text_encode(const Tokenizer *tok, const char *text, size_t length, int32_t **ids, size_t *n) {
  int32_t *body = NULL;
  size_t n_body = 0;
  int rc = tokenizer_encode(tok, text, length, &body, &n_body);
  if (rc) return rc;
  int bos = tokenizer_adds_bos(tok) && tokenizer_bos_id(tok) >= 0;
  *ids = obc_malloc((n_body + 1) * sizeof(int32_t), "token ids");
  if (!*ids) {
    free(body);
    return OBC_ENOMEM;
  }
  if (bos) (*ids)[0] = tokenizer_bos_id(tok);
  if (n_body) memcpy(*ids + bos, body, n_body * sizeof(int32_t));
  *n = n_body + (size_t)bos;
  free(body);
  return OBC_OK;
}
