/* The paper's pairing (docs/SCIENCE.md, "Paired sweep"): a score named
 * X+obc_S is method X with OBCache's score S inside, and pairs with the
 * baseline X when both are swept. Names are treated as text only: any X
 * and any suffix after "+obc_" pair, so the logic does not depend on which
 * presets exist. */
#ifndef OBC_SWEEP_REPLAY_PAIRS_H
#define OBC_SWEEP_REPLAY_PAIRS_H

#include <stdbool.h>
#include <stddef.h>

#define SWEEP_PAIR_MARK "+obc_"

typedef struct {
  size_t baseline, paired; /* indices into the score list */
} SweepPair;

/* Whether name is a paired score X+obc_S (X and S not empty); baseline
 * (size bytes) receives X. */
bool sweep_pair_baseline(const char *name, char *baseline, size_t size);
/* The pairs among names (n): for every paired name, in list order, whose
 * baseline is in the list too. Returns the number found (at most max). */
size_t sweep_pairs_find(const char (*names)[32], size_t n, SweepPair *pairs, size_t max);
/* --pairs "X+obc_S,..": appends each entry's baseline X and the entry to
 * names (*n of at most max), skipping names already there; OBC_EINVAL for
 * an entry that is not a pair or too many names. */
int sweep_pairs_expand(const char *list, char (*names)[32], size_t *n, size_t max);

#endif
