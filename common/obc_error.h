/* Error codes and the last-error message.
 *
 * Library functions return an int: 0 on success, a negative OBC_E* code on
 * failure, after leaving a one-line message (file, what was expected, what was
 * found, a hint) with obc_fail(). Only main() prints it and exits. The message
 * is thread-local, so worker threads can fail independently. */
#ifndef OBC_ERROR_H
#define OBC_ERROR_H

#include <stddef.h>

/* X(name, value, description) */
#define OBC_ERROR_CODES(X)                             \
  X(OBC_OK, 0, "success")                              \
  X(OBC_EIO, -1, "input/output error")                 \
  X(OBC_EFORMAT, -2, "malformed or inconsistent file") \
  X(OBC_EINVAL, -3, "invalid argument")                \
  X(OBC_ENOMEM, -4, "out of memory")                   \
  X(OBC_EUNSUPPORTED, -5, "unsupported feature")       \
  X(OBC_ENOTFOUND, -6, "not found")                    \
  X(OBC_EVALUE, -7, "non-finite value in data")        \
  X(OBC_EINTERRUPTED, -8, "interrupted")               \
  X(OBC_EEXTERNAL, -9, "external program failed")

enum {
#define OBC_X(name, value, text) name = value,
  OBC_ERROR_CODES(OBC_X)
#undef OBC_X
};

/* Records a printf-style message for the current thread and returns code. */
int obc_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to the current message (adds context while unwinding). */
int obc_fail_context(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The current thread's last message ("" when none). */
const char *obc_error_message(void);
/* The fixed description of a code. */
const char *obc_error_name(int code);
void obc_error_clear(void);

/* Allocation helpers that fail with a message naming what was allocated. */
void *obc_malloc(size_t bytes, const char *what);
void *obc_calloc(size_t count, size_t size, const char *what);

#endif
