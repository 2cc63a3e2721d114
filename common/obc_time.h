/* The monotonic wall clock that progress lines and timings read. */
#ifndef OBC_TIME_H
#define OBC_TIME_H

/* Wall-clock seconds since an arbitrary origin. */
double obc_now_seconds(void);

#endif
