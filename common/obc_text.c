/* Escaped, wrapped and joined text; see obc_text.h. */
#include "common/obc_text.h"

#include <stdio.h>
#include <string.h>

const char *obc_text_escape(char *out, size_t size, const char *text, bool quote) {
  if (!size) return out;
  size_t used = 0, n = strlen(text), i = 0;
  for (; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    char piece[8];
    if (c == '\n')
      snprintf(piece, sizeof piece, "\\n");
    else if (c == '\r')
      snprintf(piece, sizeof piece, "\\r");
    else if (c == '\t')
      snprintf(piece, sizeof piece, "\\t");
    else if (quote && c == '"')
      snprintf(piece, sizeof piece, "\\\"");
    else if (c < 32 || c == 127)
      snprintf(piece, sizeof piece, "\\x%02x", c);
    else
      piece[0] = (char)c, piece[1] = '\0';
    size_t len = strlen(piece);
    if (used + len + (i + 1 < n ? 3 : 0) >= size) break; /* room for "..." after it */
    memcpy(out + used, piece, len);
    used += len;
  }
  if (i < n && used + 3 < size) memcpy(out + used, "...", 3), used += 3;
  out[used] = '\0';
  return out;
}

void obc_text_print_wrapped(FILE *out, const char *text, size_t column, size_t indent,
                            size_t width) {
  bool line_start = true;
  while (*text) {
    size_t word = strcspn(text, " ");
    if (!line_start && column + 1 + word > width) {
      fprintf(out, "\n%*s", (int)indent, "");
      column = indent;
      line_start = true;
    }
    if (!line_start) {
      fputc(' ', out);
      column++;
    }
    fprintf(out, "%.*s", (int)word, text);
    column += word;
    line_start = false;
    text += word;
    while (*text == ' ') text++;
  }
  fputc('\n', out);
}

void obc_text_command_line(int argc, char **argv, char *out, size_t size) {
  size_t used = (size_t)snprintf(out, size, "obcache");
  for (int i = 0; i < argc && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, " %s", argv[i]);
}
