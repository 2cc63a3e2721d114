/* Whether an answer holds the needle: the one rule that capture (the trace's
 * needle_found) and model replay (the evicted answer's) both apply. RULER's
 * string_match_all: every value of the needle occurs in the answer, ASCII
 * case ignored. A needle without a value (none, or an empty one) is not
 * looked for: its result is "not applicable", never "found". */
#ifndef OBC_MATCH_H
#define OBC_MATCH_H

#include <stdbool.h>
#include <stddef.h>

/* Whether text holds needle[0..n) somewhere, ASCII case ignored; false for
 * n = 0 (an empty needle has nothing to find). */
bool obc_match_holds(const char *text, const char *needle, size_t n);

/* 1 when answer holds every one of values[0..n_values) (obc_match_holds),
 * 0 when one is missing, -1 when there is nothing to look for (n_values 0 or
 * an empty value). answer NULL reads as "". */
int obc_match_needle(const char *answer, const char *const *values, size_t n_values);

#endif
