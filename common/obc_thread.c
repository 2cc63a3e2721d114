/* The OpenMP thread count; see obc_thread.h. */
#include "common/obc_thread.h"

#include <omp.h>

void obc_set_threads(size_t threads) {
  if (threads > 0) omp_set_num_threads((int)threads);
}
