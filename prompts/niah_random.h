/* The random choices of the Needle-in-a-Haystack builder, all drawn from one
 * seeded splitmix64 stream so that a prompt is a pure function of its seed:
 * needle keys ("adjective-noun" from fixed word lists kept in this module)
 * and needle values (7-digit numbers or UUID-formatted strings). */
#ifndef OBC_NIAH_RANDOM_H
#define OBC_NIAH_RANDOM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t state;
} NiahRandom;

void niah_random_seed(NiahRandom *random, uint64_t seed);
uint64_t niah_random_next(NiahRandom *random);
/* Uniform in [0, n), n > 0. */
size_t niah_random_below(NiahRandom *random, size_t n);

/* "adjective-noun", e.g. "quiet-lantern" (at most 40 bytes with the NUL). */
void niah_random_key(NiahRandom *random, char *out, size_t size);
/* Seven decimal digits, 1000000..9999999 (RULER's range). */
void niah_random_number(NiahRandom *random, char *out, size_t size);
/* 8-4-4-4-12 lowercase hex digits, version-4 layout. */
void niah_random_uuid(NiahRandom *random, char *out, size_t size);

#endif
