/* The analysis-CSV reader of the plot command (see plot_csv.h): reads the
 * whole file, splits it in place into a rectangular table of strings and
 * checks that every row has as many fields as the header. */
#include "plots/plot_csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_text.h"

/* Reads a whole file into a NUL-terminated buffer. */
static int read_text(const char *path, char **out, size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  size_t capacity = 1 << 16, used = 0;
  char *text = malloc(capacity);
  while (text) {
    used += fread(text + used, 1, capacity - used - 1, fp);
    if (used < capacity - 1) break;
    char *grown = realloc(text, capacity * 2);
    if (!grown) {
      free(text);
      text = NULL;
      break;
    }
    text = grown;
    capacity *= 2;
  }
  int failed = ferror(fp);
  fclose(fp);
  if (!text) return obc_fail(OBC_ENOMEM, "%s: out of memory reading the file", path);
  if (failed) {
    free(text);
    return obc_fail(OBC_EIO, "%s: read error", path);
  }
  text[used] = '\0';
  *out = text;
  *size = used;
  return OBC_OK;
}

/* Number of fields of the line starting at line (up to '\n' or the end). */
static size_t count_fields(const char *line) {
  size_t n = 1;
  for (; *line && *line != '\n'; line++)
    if (*line == ',') n++;
  return n;
}

int plot_table_read(const char *path, PlotTable *table) {
  memset(table, 0, sizeof *table);
  snprintf(table->path, sizeof table->path, "%s", path);
  size_t size = 0;
  int rc = read_text(path, &table->text, &size);
  if (rc) return rc;
  char *text = table->text;
  /* The text ends at its first NUL: a file starting with one has no header. */
  if (size == 0 || text[0] == '\0' || text[0] == '\n' || text[0] == '\r') {
    plot_table_free(table);
    return obc_fail(OBC_EFORMAT, "%s: empty file or empty header line (expected a CSV header)",
                    path);
  }
  size_t n_lines = 1; /* an upper bound: newlines + 1 */
  for (size_t i = 0; i < size; i++)
    if (text[i] == '\n') n_lines++;
  table->n_columns = count_fields(text);
  table->cells = calloc((n_lines + 1) * table->n_columns, sizeof *table->cells);
  if (!table->cells) {
    plot_table_free(table);
    return obc_fail(OBC_ENOMEM, "%s: out of memory for %zu lines", path, n_lines);
  }
  size_t row = 0;
  char *line = text;
  while (*line) {
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    size_t length = strlen(line);
    if (length && line[length - 1] == '\r') line[--length] = '\0';
    if (length > 0) {
      size_t fields = count_fields(line);
      if (fields != table->n_columns) {
        size_t line_number = row + 1, expected = table->n_columns;
        plot_table_free(table);
        return obc_fail(OBC_EFORMAT, "%s: line %zu has %zu fields (expected %zu, as the header)",
                        path, line_number, fields, expected);
      }
      char **cells = table->cells + row * table->n_columns;
      size_t c = 0;
      cells[c++] = line;
      for (char *p = line; *p; p++)
        if (*p == ',') {
          *p = '\0';
          cells[c++] = p + 1;
        }
      row++;
    }
    if (!end) break;
    line = end + 1;
  }
  table->n_rows = row - 1;
  return OBC_OK;
}

void plot_table_free(PlotTable *table) {
  free(table->cells);
  free(table->text);
  table->cells = NULL;
  table->text = NULL;
  table->n_rows = table->n_columns = 0;
}

int plot_table_column(const PlotTable *table, const char *name, size_t *column) {
  for (size_t c = 0; c < table->n_columns; c++)
    if (!strcmp(table->cells[c], name)) {
      *column = c;
      return OBC_OK;
    }
  return obc_fail(OBC_EFORMAT,
                  "%s: no column '%s' in the header (is it a file of `obcache analyze`?)",
                  table->path, name);
}

int plot_table_require(const PlotTable *table, const char *columns) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", columns);
  char *save = NULL;
  for (char *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    size_t unused;
    int rc = plot_table_column(table, name, &unused);
    if (rc)
      return obc_fail(OBC_EFORMAT, "%s: no column '%s' (expected the columns %s)", table->path,
                      name, columns);
  }
  return OBC_OK;
}

const char *plot_table_cell(const PlotTable *table, size_t row, size_t column) {
  return table->cells[(row + 1) * table->n_columns + column];
}

int plot_table_number(const PlotTable *table, size_t row, size_t column, double *out) {
  const char *text = plot_table_cell(table, row, column);
  char *end = NULL;
  double v = strtod(text, &end); /* underflow to a denormal or 0 is fine */
  if (end == text || *end) {
    char name[OBC_ESCAPED_SIZE(32)], found[OBC_ESCAPED_SIZE(32)];
    return obc_fail(OBC_EFORMAT, "%s: line %zu, column '%s': expected a number, found '%s'",
                    table->path, row + 2,
                    obc_text_escape(name, sizeof name, table->cells[column], false),
                    obc_text_escape(found, sizeof found, text, false));
  }
  *out = v;
  return OBC_OK;
}
