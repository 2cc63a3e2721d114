/* The OpenMP thread count every parallel stage runs with. */
#ifndef OBC_THREAD_H
#define OBC_THREAD_H

#include <stddef.h>

/* Sets the OpenMP thread count (0 = leave the default). */
void obc_set_threads(size_t threads);

#endif
