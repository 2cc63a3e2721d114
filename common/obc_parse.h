/* Number and comma-separated list parsing for the option tables
 * (common/obc_options.h): each fails with a message naming the option and
 * what was expected. */
#ifndef OBC_PARSE_H
#define OBC_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether text is a plain decimal number: an optional '-', digits with at
 * most one '.', an optional exponent (e or E, a sign, digits), nothing
 * else: no spaces, '+', hexadecimal (strtod reads 0x10 as 16), inf or nan.
 * Every number of an option or a file passes it before strtol/strtod. */
bool obc_parse_is_decimal(const char *text);
/* Integers: decimal digits with an optional '-' (obc_parse_size: none),
 * within long; OBC_EINVAL naming the option and the text otherwise. */
int obc_parse_size(const char *option, const char *text, size_t *out);
int obc_parse_int(const char *option, const char *text, long *out);
int obc_parse_double(const char *option, const char *text, double *out);
/* Most items of a comma-separated option value. */
#define OBC_LIST_MAX 64
/* The items of a comma-separated option value: text copied into buf (size
 * bytes), items[i] pointing into it, *count of them. Refuses, naming the
 * option, an empty list, an empty item ("1,,2", ",1", "1,") and more than
 * max items: every list-valued option parses through it. */
int obc_split_list(const char *option, const char *text, char *buf, size_t size, char **items,
                   size_t max, size_t *count);
/* "1,2,4" -> values (appended to *values, *count updated; max entries). */
int obc_parse_size_list(const char *option, const char *text, size_t *values, size_t *count,
                        size_t max);

#endif
