/* The clocks that progress lines and timings read. */
#ifndef OBC_TIME_H
#define OBC_TIME_H

/* Wall-clock seconds since an arbitrary origin. */
double obc_now_seconds(void);

/* CPU seconds this process has used, all its threads together: what a
 * benchmark on a shared machine reads besides the wall clock, which also
 * measures the other users. */
double obc_cpu_seconds(void);

#endif
