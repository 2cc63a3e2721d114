/* Small helpers shared by the subcommands' argument parsing (the option
 * tables of common/obc_options.h use them): numbers and comma-separated lists
 * that fail with a message naming the option. */
#ifndef OBC_CLI_H
#define OBC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* Sets the OpenMP thread count (0 = leave the default). */
void obc_set_threads(size_t threads);
/* Wall-clock seconds since an arbitrary origin. */
double obc_now_seconds(void);
/* Room obc_text_escape needs for a text of n bytes: 4 bytes a byte, and NUL. */
#define OBC_ESCAPED_SIZE(n) (4 * (n) + 1)
/* Copies text into out (size bytes, NUL-terminated; cut, ending in "...",
 * when it does not fit) with every byte a terminal acts on escaped: \n, \r,
 * \t, and \xNN for the other control bytes (0x00-0x1f, 0x7f: ESC
 * sequences, backspaces); a `"` as \" when quote is set. Returns out. Every
 * place that prints a string read from a file prints it through this, so
 * the output stays one line per field and shows what the file holds. */
const char *obc_text_escape(char *out, size_t size, const char *text, bool quote);

#endif
