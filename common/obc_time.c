/* The monotonic wall clock and the process CPU clock; see obc_time.h. */
#include "common/obc_time.h"

#include <time.h>

static double clock_seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double obc_now_seconds(void) { return clock_seconds(CLOCK_MONOTONIC); }

double obc_cpu_seconds(void) { return clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }
