/* What a model replay's answer kept (docs/SCIENCE.md, "Eviction and
 * replay"): where the free-running tokens first leave the full-cache answer,
 * how long a prefix of the needle's value the answer still holds, and the
 * share of the value's tokens it reproduces in order. Pure functions, so the
 * tests check them on constructed answers. */
#ifndef OBC_REPLAY_REPLAY_METRICS_H
#define OBC_REPLAY_REPLAY_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* The first step (1-based) where replay[t] != full[t], t < n; 0 when none. */
size_t replay_first_divergence(const int32_t *full, const int32_t *replay, size_t n);

/* The length in characters of the longest prefix of value that occurs in
 * answer, ignoring case (strlen(value) when the whole value is there). */
size_t replay_needle_prefix(const char *answer, const char *value);

/* Length of the longest common subsequence of the pieces (strings compared
 * exactly) divided by n_value: the share of the value's tokens reproduced in
 * order. NaN when n_value is 0. */
double replay_piece_share(const char *const *value, size_t n_value, const char *const *answer,
                          size_t n_answer);

#endif
