/* Option, number and list parsing for the subcommands; see obc_cli.h. */
#include "common/obc_cli.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/obc_error.h"

int obc_parse_int(const char *option, const char *text, long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || !end || end == text || *end)
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
  if (errno || !end || end == text || *end || !isfinite(v))
    return obc_fail(OBC_EINVAL, "%s: expected a number, got '%s'", option, text);
  *out = v;
  return OBC_OK;
}

int obc_parse_size_list(const char *option, const char *text, size_t *values, size_t *count,
                        size_t max) {
  char buf[1024];
  if (strlen(text) >= sizeof buf) return obc_fail(OBC_EINVAL, "%s: list too long", option);
  snprintf(buf, sizeof buf, "%s", text);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*count >= max) return obc_fail(OBC_EINVAL, "%s: at most %zu values", option, max);
    int rc = obc_parse_size(option, tok, &values[*count]);
    if (rc) return rc;
    (*count)++;
  }
  return OBC_OK;
}

void obc_set_threads(size_t threads) {
  if (threads > 0) omp_set_num_threads((int)threads);
}

double obc_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
