/* A small reader for the analysis CSVs (one header line, comma-separated, no
 * quoting: analysis-output contract). The plot command only needs to look at
 * them (which scores, windows and budgets are present, a few Spearman values,
 * the sweep summary to aggregate), so the whole file is read into memory and
 * split in place. */
#ifndef OBC_PLOT_CSV_H
#define OBC_PLOT_CSV_H

#include <stddef.h>

typedef struct {
  char path[4096];
  char *text;    /* the file's bytes, split in place at commas and newlines */
  char **cells;  /* (n_rows + 1, n_columns): row 0 is the header */
  size_t n_rows; /* data rows, header excluded */
  size_t n_columns;
} PlotTable;

/* Reads path; fails with a one-line message when it is missing, empty, or a
 * row has a different number of fields than the header. */
int plot_table_read(const char *path, PlotTable *table);
void plot_table_free(PlotTable *table);

/* Index of the named column; fails (naming the file and the expected
 * columns) when absent. */
int plot_table_column(const PlotTable *table, const char *name, size_t *column);
/* Checks that every column of a comma-separated list is present. */
int plot_table_require(const PlotTable *table, const char *columns);

/* The text of a data cell (row in 0..n_rows-1). */
const char *plot_table_cell(const PlotTable *table, size_t row, size_t column);
/* A data cell as a number; fails naming file, row and column when it is not. */
int plot_table_number(const PlotTable *table, size_t row, size_t column, double *out);

#endif
