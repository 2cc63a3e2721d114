/* Text for the terminal and for the files that record a run: escaped
 * strings read from files, word-wrapped help, the command line. */
#ifndef OBC_TEXT_H
#define OBC_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Room obc_text_escape needs for a text of n bytes: 4 bytes a byte, and NUL. */
#define OBC_ESCAPED_SIZE(n) (4 * (n) + 1)
/* Copies text into out (size bytes, NUL-terminated; cut, ending in "...",
 * when it does not fit) with every byte a terminal acts on escaped: \n, \r,
 * \t, and \xNN for the other control bytes (0x00-0x1f, 0x7f: ESC
 * sequences, backspaces); a `"` as \" when quote is set. Returns out. Every
 * place that prints a string read from a file prints it through this, so
 * the output stays one line per field and shows what the file holds. */
const char *obc_text_escape(char *out, size_t size, const char *text, bool quote);

/* Prints text word-wrapped to width columns from `column`, where the cursor
 * stands; each line it starts is indented by indent spaces. Words are split
 * at spaces (runs of them print as one); a word longer than a line stands on
 * a line of its own. Ends with a newline. */
void obc_text_print_wrapped(FILE *out, const char *text, size_t column, size_t indent,
                            size_t width);

/* The command line that plans, reports and traces record: "obcache" and
 * argv[0..argc-1], each after one space, written as given (no quoting);
 * cut to fit size bytes with its NUL. */
void obc_text_command_line(int argc, char **argv, char *out, size_t size);

#endif
