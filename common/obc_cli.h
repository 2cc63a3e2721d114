/* Small helpers shared by the subcommands' argument parsing (the option
 * tables of common/obc_options.h use them): numbers and comma-separated lists
 * that fail with a message naming the option. */
#ifndef OBC_CLI_H
#define OBC_CLI_H

#include <stddef.h>
#include <stdint.h>

int obc_parse_size(const char *option, const char *text, size_t *out);
int obc_parse_int(const char *option, const char *text, long *out);
int obc_parse_double(const char *option, const char *text, double *out);
/* "1,2,4" -> values (appended to *values, *count updated; max entries). */
int obc_parse_size_list(const char *option, const char *text, size_t *values, size_t *count,
                        size_t max);
/* Sets the OpenMP thread count (0 = leave the default). */
void obc_set_threads(size_t threads);
/* Wall-clock seconds since an arbitrary origin. */
double obc_now_seconds(void);

#endif
