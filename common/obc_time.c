/* The monotonic wall clock; see obc_time.h. */
#include "common/obc_time.h"

#include <time.h>

double obc_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
