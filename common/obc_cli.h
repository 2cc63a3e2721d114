/* Small helpers shared by the subcommands' argument parsing: options given
 * as "--opt value" or "--opt=value", and numbers and comma-separated lists
 * that fail with a message naming the option. */
#ifndef OBC_CLI_H
#define OBC_CLI_H

#include <stddef.h>
#include <stdint.h>

/* Whether arg is option name, alone ("--opt") or with a value ("--opt=..."). */
int obc_option_matches(const char *arg, const char *name);
/* The value of option argv[*i], which obc_option_matches name: the text after
 * '=', else the next argument (advancing *i); NULL when there is none. */
const char *obc_option_value(int argc, char **argv, int *i, const char *name);

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
