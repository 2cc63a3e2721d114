/* The HDF5 file format of a trace or keep file, read from its raw bytes
 * before HDF5 sees the file. Schema 2 promises HDF5 1.10's checksummed
 * format: superblock version 3 and version-2 object headers ("OHDR"), each
 * with a Jenkins lookup3 checksum. Files in the older formats (superblock 0
 * or 1, version-1 object headers) have no checksums, and HDF5 crashes or
 * hangs on damaged ones, so they are read only in a child process
 * (traces/trace_legacy.c). Every read here is bounded by the file's size. */
#ifndef OBC_TRACE_FORMAT_H
#define OBC_TRACE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  int superblock_version;     /* 0..3 as found */
  uint64_t superblock_offset; /* 0, 512, 1024, 2048, ... (a user block before it) */
  uint64_t base_address;      /* absolute offset that the file's addresses count from */
  uint64_t file_size;
  /* Superblock 3 whose checksum holds, with a version-2 root object header
   * (and superblock extension, when there is one) whose checksums hold. */
  bool checksummed;
} TraceFileFormat;

/* Finds the superblock and decides whether the file is in the checksummed
 * format. OBC_EIO when the file cannot be read; OBC_EFORMAT "<path>: not an
 * HDF5 file (expected <what>)" without a signature, or "<path>: <object>:
 * checksum mismatch (the file is damaged)" when a superblock 3 or a version-2
 * root header fails its checksum. An older format is OBC_OK with
 * checksummed false. */
int trace_format_probe(const char *path, const char *what, TraceFileFormat *format);

/* Checks, from the raw bytes read through fd (the file open for reading),
 * that the object header at address (relative to the base address) is a
 * version-2 header whose first chunk's checksum holds; OBC_EFORMAT naming
 * path and object otherwise. */
int trace_format_check_header(const char *path, int fd, const TraceFileFormat *format,
                              uint64_t address, const char *object);

/* Jenkins' lookup3 hashlittle, as HDF5 checksums its metadata (initval 0). */
uint32_t trace_format_lookup3(const void *data, size_t size, uint32_t initval);

#endif
