/* Test helper for tests/test_budget_rule_reference.py: for every n in
 * 1..N prints, under budget rule RULE and budget B, one line
 *   n k adakv_safeguard critical_first_stage pyramid_0 pyramid_mid pyramid_last
 * where k = evict_budget_count, the safeguard evict_budget_share(k, 5, 0.2),
 * the first stage evict_preset_critical_first_stage, and the pyramid
 * columns evict_preset_pyramid_budget of layers 0, L/2 and L-1 (window W,
 * L layers) for every STRIDE-th n (else "-"). */
#include <stdio.h>
#include <stdlib.h>

#include "common/obc_error.h"
#include "evict/policy.h"
#include "evict/preset.h"

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: budget_dump RULE B N W L STRIDE\n");
    return 2;
  }
  EvictPolicy p;
  evict_policy_default(&p);
  int rc = evict_policy_set_budget_rule(&p, argv[1]);
  if (!rc) rc = evict_policy_set_budget(&p, argv[2]);
  size_t n_max = strtoull(argv[3], NULL, 10), window = strtoull(argv[4], NULL, 10);
  size_t layers = strtoull(argv[5], NULL, 10), stride = strtoull(argv[6], NULL, 10);
  if (!rc && (layers < 2 || stride == 0)) rc = obc_fail(OBC_EINVAL, "L >= 2 and STRIDE >= 1");
  for (size_t n = 1; n <= n_max && !rc; n++) {
    size_t k = 0;
    if ((rc = evict_budget_count(&p, n, &k))) break;
    printf("%zu %zu %zu %zu", n, k, evict_budget_share(&p, k, 5, 0.2),
           evict_preset_critical_first_stage(&p, n, k));
    size_t at[3] = {0, layers / 2, layers - 1};
    for (int i = 0; i < 3 && !rc; i++) {
      size_t kept = 0;
      if (n % stride || n <= window) {
        printf(" -");
        continue;
      }
      rc = evict_preset_pyramid_budget(&p, n, window, layers, at[i], &kept);
      printf(" %zu", kept);
    }
    printf("\n");
  }
  if (rc) {
    fprintf(stderr, "budget_dump: %s\n", obc_error_message());
    return 1;
  }
  return 0;
}
