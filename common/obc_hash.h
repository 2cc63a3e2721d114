/* The one checksum of the tool: 64-bit FNV-1a (offset basis
 * 0xcbf29ce484222325, prime 0x100000001b3) over bytes. Not cryptographic: it
 * tells files and slabs apart and catches damage, it does not resist forgery.
 * Traces hash their slabs with it (traces/SCHEMA.md "Content hash"); sweeps
 * checksum the model file and every file of a finished cell. */
#ifndef OBC_HASH_H
#define OBC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define OBC_HASH_SEED 0xcbf29ce484222325ull /* FNV-1a 64 offset basis */

/* FNV-1a 64 of size bytes, continuing from state (OBC_HASH_SEED to start). */
uint64_t obc_hash_bytes(uint64_t state, const void *data, size_t size);

/* The hash and size of a whole regular file (memory-mapped). Fails with a
 * one-line message naming the file. */
int obc_hash_file(const char *path, uint64_t *hash, uint64_t *size);

#endif
