/* Seeded random keys and values for needles. splitmix64 is small, fast and
 * has no platform-dependent state, so the same seed gives the same needles on
 * every machine. The word lists are plain, common English words chosen so that
 * each usually stays a single word-piece or two for BPE tokenizers. */
#include "prompts/niah_random.h"

#include <assert.h>
#include <stdio.h>

static const char *const adjectives[] = {
    "quiet",   "brave",  "gentle", "hollow",  "bright",  "silent",   "golden", "rapid",
    "ancient", "humble", "frozen", "velvet",  "crimson", "distant",  "eager",  "fragile",
    "hidden",  "lively", "narrow", "patient", "proud",   "rusty",    "shiny",  "sleepy",
    "smooth",  "steady", "sturdy", "tender",  "tidy",    "wild",     "wooden", "young",
    "bitter",  "calm",   "clever", "curious", "dusty",   "empty",    "fancy",  "gray",
    "heavy",   "jolly",  "lonely", "mellow",  "noisy",   "odd",      "plain",  "quick",
    "round",   "salty",  "tall",   "warm",    "wise",    "cheerful", "polite", "soft",
    "sharp",   "sweet",  "thin",   "vivid",   "bold",    "cozy",     "fierce", "grand"};

static const char *const nouns[] = {
    "lantern", "harbor",  "meadow",   "pencil",  "violin", "garden",  "castle", "bridge",
    "candle",  "feather", "island",   "kettle",  "ladder", "mirror",  "needle", "orchard",
    "pebble",  "pillow",  "rabbit",   "river",   "saddle", "shadow",  "tunnel", "wagon",
    "anchor",  "basket",  "button",   "cabinet", "carpet", "cottage", "desert", "engine",
    "falcon",  "forest",  "glacier",  "hammer",  "helmet", "jacket",  "kitten", "lemon",
    "magnet",  "market",  "mountain", "napkin",  "ocean",  "parrot",  "planet", "pocket",
    "puzzle",  "rocket",  "sandal",   "signal",  "spider", "statue",  "teapot", "thunder",
    "tiger",   "trumpet", "valley",   "village", "window", "wizard",  "zebra",  "compass"};

void niah_random_seed(NiahRandom *random, uint64_t seed) { random->state = seed; }

uint64_t niah_random_next(NiahRandom *random) {
  uint64_t z = (random->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

size_t niah_random_below(NiahRandom *random, size_t n) {
  assert(n > 0);
  /* Rejection sampling keeps the draw exactly uniform. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = niah_random_next(random);
  while (x >= limit);
  return (size_t)(x % n);
}

void niah_random_key(NiahRandom *random, char *out, size_t size) {
  size_t n_adjectives = sizeof adjectives / sizeof *adjectives;
  size_t n_nouns = sizeof nouns / sizeof *nouns;
  const char *adjective = adjectives[niah_random_below(random, n_adjectives)];
  const char *noun = nouns[niah_random_below(random, n_nouns)];
  snprintf(out, size, "%s-%s", adjective, noun);
}

void niah_random_number(NiahRandom *random, char *out, size_t size) {
  snprintf(out, size, "%zu", 1000000 + niah_random_below(random, 9000000));
}

void niah_random_uuid(NiahRandom *random, char *out, size_t size) {
  uint64_t hi = niah_random_next(random);
  uint64_t lo = niah_random_next(random);
  hi = (hi & ~0xf000ull) | 0x4000ull;                        /* version 4 */
  lo = (lo & 0x3fffffffffffffffull) | 0x8000000000000000ull; /* variant 10 */
  snprintf(out, size, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32),
           (unsigned)((hi >> 16) & 0xffff), (unsigned)(hi & 0xffff), (unsigned)(lo >> 48),
           (unsigned long long)(lo & 0xffffffffffffull));
}
