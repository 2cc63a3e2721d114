/* Number and list parsing for the option tables; see obc_parse.h. */
#include "common/obc_parse.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

/* The digits from text: how many. */
static size_t digits(const char *text) { return strspn(text, "0123456789"); }

bool obc_parse_is_decimal(const char *text) {
  const char *c = text + (*text == '-');
  size_t whole = digits(c);
  c += whole;
  size_t part = 0;
  if (*c == '.') part = digits(++c), c += part;
  if (!whole && !part) return false;
  if (*c == 'e' || *c == 'E') {
    c += 1 + (c[1] == '-' || c[1] == '+');
    size_t exponent = digits(c);
    if (!exponent) return false;
    c += exponent;
  }
  return !*c;
}

int obc_parse_int(const char *option, const char *text, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !end || end == text || *end || strpbrk(text, ".eE") || !obc_parse_is_decimal(text))
    return obc_fail(OBC_EINVAL, "%s: expected an integer, got '%s'", option, text);
  *out = v;
  return OBC_OK;
}

int obc_parse_size(const char *option, const char *text, size_t *out) {
  long v = 0;
  int rc = obc_parse_int(option, text, &v);
  if (rc) return rc;
  if (v < 0)
    return obc_fail(OBC_EINVAL, "%s: expected a non-negative integer, got '%s'", option, text);
  *out = (size_t)v;
  return OBC_OK;
}

int obc_parse_double(const char *option, const char *text, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || !end || end == text || *end || !isfinite(v) || !obc_parse_is_decimal(text))
    return obc_fail(OBC_EINVAL, "%s: expected a number, got '%s'", option, text);
  *out = v;
  return OBC_OK;
}

int obc_split_list(const char *option, const char *text, char *buf, size_t size, char **items,
                   size_t max, size_t *count) {
  *count = 0;
  if (strlen(text) >= size) return obc_fail(OBC_EINVAL, "%s: list too long", option);
  if (!text[0]) return obc_fail(OBC_EINVAL, "%s: empty list", option);
  snprintf(buf, size, "%s", text);
  for (char *item = buf; item;) {
    char *comma = strchr(item, ',');
    if (comma) *comma = '\0';
    if (!item[0])
      return obc_fail(OBC_EINVAL, "%s: empty item in '%s' (expected a comma-separated list)",
                      option, text);
    if (*count >= max) return obc_fail(OBC_EINVAL, "%s: at most %zu values", option, max);
    items[(*count)++] = item;
    item = comma ? comma + 1 : NULL;
  }
  return OBC_OK;
}

int obc_parse_size_list(const char *option, const char *text, size_t *values, size_t *count,
                        size_t max) {
  char buf[1024], *items[OBC_LIST_MAX];
  size_t n = 0;
  int rc = obc_split_list(option, text, buf, sizeof buf, items, OBC_LIST_MAX, &n);
  if (rc) return rc;
  if (*count + n > max) return obc_fail(OBC_EINVAL, "%s: at most %zu values", option, max);
  for (size_t i = 0; i < n; i++) {
    if ((rc = obc_parse_size(option, items[i], &values[*count]))) return rc;
    (*count)++;
  }
  return OBC_OK;
}
