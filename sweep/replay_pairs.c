/* Pairs of baseline and baseline + OBCache scores by name
 * (sweep/replay_pairs.h). */
#include "sweep/replay_pairs.h"

#include <stdio.h>
#include <string.h>

#include "common/obc_error.h"
#include "common/obc_parse.h"
#include "evict/policy.h"

bool sweep_pair_baseline(const char *name, char *baseline, size_t size) {
  const char *mark = strstr(name, SWEEP_PAIR_MARK);
  if (!mark || mark == name || !mark[strlen(SWEEP_PAIR_MARK)]) return false;
  size_t n = (size_t)(mark - name);
  if (n >= size) return false;
  memcpy(baseline, name, n);
  baseline[n] = '\0';
  return true;
}

static size_t index_of(const char (*names)[32], size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return i;
  return n;
}

size_t sweep_pairs_find(const char (*names)[32], size_t n, SweepPair *pairs, size_t max) {
  size_t count = 0;
  for (size_t i = 0; i < n && count < max; i++) {
    char baseline[32];
    if (!sweep_pair_baseline(names[i], baseline, sizeof baseline)) continue;
    size_t b = index_of(names, n, baseline);
    if (b < n) pairs[count++] = (SweepPair){.baseline = b, .paired = i};
  }
  return count;
}

/* Appends name unless it is there already. */
static int add_name(char (*names)[32], size_t *n, size_t max, const char *name) {
  if (index_of((const char(*)[32])names, *n, name) < *n) return OBC_OK;
  if (*n == max) return obc_fail(OBC_EINVAL, "--pairs: more than %zu scores in all", max);
  snprintf(names[(*n)++], 32, "%s", name);
  return OBC_OK;
}

int sweep_pairs_expand(const char *list, char (*names)[32], size_t *n, size_t max) {
  char buf[1024], *items[64];
  size_t count = 0;
  int rc = obc_split_list("--pairs", list, buf, sizeof buf, items, 64, &count);
  for (size_t i = 0; i < count && !rc; i++) {
    char baseline[32], name[64];
    evict_policy_canonical_score(items[i], name, sizeof name);
    if (strlen(name) >= 32 || !sweep_pair_baseline(name, baseline, sizeof baseline))
      return obc_fail(OBC_EINVAL,
                      "--pairs %s: expected X" SWEEP_PAIR_MARK
                      "S (a score with OBCache's "
                      "score S inside, e.g. snapkv+obc_vk; < 32 characters)",
                      items[i]);
    rc = add_name(names, n, max, baseline);
    if (!rc) rc = add_name(names, n, max, name);
  }
  return rc;
}
