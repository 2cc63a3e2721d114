/* Thread-local last-error message behind obc_fail(); see obc_error.h. */
#include "common/obc_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char error_message[1024];

int obc_fail(int code, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(error_message, sizeof error_message, fmt, args);
  va_end(args);
  return code;
}

int obc_fail_context(int code, const char *fmt, ...) {
  char prefix[512];
  char previous[sizeof error_message];
  va_list args;
  va_start(args, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, args);
  va_end(args);
  memcpy(previous, error_message, sizeof previous);
  if (previous[0])
    snprintf(error_message, sizeof error_message, "%s: %s", prefix, previous);
  else
    snprintf(error_message, sizeof error_message, "%s", prefix);
  return code;
}

const char *obc_error_message(void) { return error_message; }

void obc_error_clear(void) { error_message[0] = '\0'; }

const char *obc_error_name(int code) {
  switch (code) {
#define OBC_X(name, value, text) \
  case value: return text;
    OBC_ERROR_CODES(OBC_X)
#undef OBC_X
  }
  return "unknown error";
}

void *obc_malloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) obc_fail(OBC_ENOMEM, "out of memory allocating %zu bytes for %s", bytes, what);
  return p;
}

void *obc_calloc(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p)
    obc_fail(OBC_ENOMEM, "out of memory allocating %zu x %zu bytes for %s", count, size, what);
  return p;
}
