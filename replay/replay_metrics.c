/* Answer metrics of a model replay (replay/replay_metrics.h). */
#include "replay/replay_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_match.h"

size_t replay_first_divergence(const int32_t *full, const int32_t *replay, size_t n) {
  for (size_t t = 0; t < n; t++)
    if (full[t] != replay[t]) return t + 1;
  return 0;
}

size_t replay_needle_prefix(const char *answer, const char *value) {
  size_t n = strlen(value);
  while (n > 0 && !obc_match_holds(answer, value, n)) n--;
  return n;
}

double replay_piece_share(const char *const *value, size_t n_value, const char *const *answer,
                          size_t n_answer) {
  if (n_value == 0) return NAN;
  /* One row of the LCS table at a time: row[j] = LCS(value[..i), answer[..j)). */
  size_t *row = calloc(n_answer + 1, sizeof *row);
  if (!row) return NAN;
  for (size_t i = 0; i < n_value; i++) {
    size_t diagonal = 0; /* LCS(value[..i), answer[..j-1)) */
    for (size_t j = 1; j <= n_answer; j++) {
      size_t above = row[j];
      if (!strcmp(value[i], answer[j - 1]))
        row[j] = diagonal + 1;
      else if (row[j - 1] > row[j])
        row[j] = row[j - 1];
      diagonal = above;
    }
  }
  double share = (double)row[n_answer] / (double)n_value;
  free(row);
  return share;
}
