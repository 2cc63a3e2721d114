/* The needle-in-the-answer rule (common/obc_match.h). */
#include "common/obc_match.h"

#include <ctype.h>
#include <string.h>

bool obc_match_holds(const char *text, const char *needle, size_t n) {
  if (n == 0) return false;
  for (const char *p = text; *p; p++) {
    size_t i = 0;
    while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i])) i++;
    if (i == n) return true;
  }
  return false;
}

int obc_match_needle(const char *answer, const char *const *values, size_t n_values) {
  if (n_values == 0) return -1;
  for (size_t i = 0; i < n_values; i++)
    if (!values[i][0]) return -1;
  for (size_t i = 0; i < n_values; i++)
    if (!obc_match_holds(answer ? answer : "", values[i], strlen(values[i]))) return 0;
  return 1;
}
