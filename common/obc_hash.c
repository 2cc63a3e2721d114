/* FNV-1a 64 over bytes and over whole files; see obc_hash.h. */
#include "common/obc_hash.h"

#include "common/obc_file.h"

#define HASH_PRIME 0x100000001b3ull /* FNV 64 prime */

uint64_t obc_hash_bytes(uint64_t state, const void *data, size_t size) {
  const unsigned char *bytes = data;
  for (size_t i = 0; i < size; i++) state = (state ^ bytes[i]) * HASH_PRIME;
  return state;
}

int obc_hash_file(const char *path, uint64_t *hash, uint64_t *size) {
  const void *map = NULL;
  size_t n = 0;
  int rc = obc_file_map(path, &map, &n);
  if (rc) return rc;
  *hash = obc_hash_bytes(OBC_HASH_SEED, map, n);
  *size = n;
  obc_file_unmap(map, n);
  return 0;
}
