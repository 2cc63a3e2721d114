/* Raw-byte checks of the HDF5 format (traces/trace_format.h). The layouts
 * are those of the HDF5 File Format Specification, version 3: superblock
 * versions 2 and 3 (signature, version, size of offsets, size of lengths,
 * flags, base address, superblock extension address, end-of-file address,
 * root group object header address, checksum) and the version-2 object
 * header prefix ("OHDR", version, flags, optional times and attribute
 * phase-change values, size of chunk 0, messages, checksum). */
#include "traces/trace_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/obc_error.h"

static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
#define UNDEFINED_ADDRESS UINT64_MAX
/* The largest first chunk of an object header read to check its checksum:
 * far above what a trace's root (its attributes) needs. */
#define MAX_HEADER_CHUNK ((uint64_t)1 << 24)

/* ---- lookup3 ---------------------------------------------------------------- */

#define ROT(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

uint32_t trace_format_lookup3(const void *data, size_t size, uint32_t initval) {
  const unsigned char *k = data;
  uint32_t a, b, c;
  a = b = c = 0xdeadbeefu + (uint32_t)size + initval;
  while (size > 12) {
    a += k[0] + ((uint32_t)k[1] << 8) + ((uint32_t)k[2] << 16) + ((uint32_t)k[3] << 24);
    b += k[4] + ((uint32_t)k[5] << 8) + ((uint32_t)k[6] << 16) + ((uint32_t)k[7] << 24);
    c += k[8] + ((uint32_t)k[9] << 8) + ((uint32_t)k[10] << 16) + ((uint32_t)k[11] << 24);
    /* mix */
    a -= c, a ^= ROT(c, 4), c += b;
    b -= a, b ^= ROT(a, 6), a += c;
    c -= b, c ^= ROT(b, 8), b += a;
    a -= c, a ^= ROT(c, 16), c += b;
    b -= a, b ^= ROT(a, 19), a += c;
    c -= b, c ^= ROT(b, 4), b += a;
    size -= 12;
    k += 12;
  }
  switch (size) {                        /* the last 1..12 bytes; every case falls through */
    case 12: c += (uint32_t)k[11] << 24; /* fall through */
    case 11: c += (uint32_t)k[10] << 16; /* fall through */
    case 10: c += (uint32_t)k[9] << 8;   /* fall through */
    case 9: c += k[8];                   /* fall through */
    case 8: b += (uint32_t)k[7] << 24;   /* fall through */
    case 7: b += (uint32_t)k[6] << 16;   /* fall through */
    case 6: b += (uint32_t)k[5] << 8;    /* fall through */
    case 5: b += k[4];                   /* fall through */
    case 4: a += (uint32_t)k[3] << 24;   /* fall through */
    case 3: a += (uint32_t)k[2] << 16;   /* fall through */
    case 2: a += (uint32_t)k[1] << 8;    /* fall through */
    case 1: a += k[0]; break;
    default: return c;
  }
  /* final */
  c ^= b, c -= ROT(b, 14);
  a ^= c, a -= ROT(c, 11);
  b ^= a, b -= ROT(a, 25);
  c ^= b, c -= ROT(b, 16);
  a ^= c, a -= ROT(c, 4);
  b ^= a, b -= ROT(a, 14);
  c ^= b, c -= ROT(b, 24);
  return c;
}

/* ---- raw reads --------------------------------------------------------------- */

/* Reads size bytes at offset; 0 on success, 1 when the file ends first. */
static int read_at(int fd, uint64_t offset, void *out, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, (char *)out + done, size - done, (off_t)(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 1;
    done += (size_t)n;
  }
  return 0;
}

/* A little-endian unsigned integer of width bytes (1..8). */
static uint64_t le_uint(const unsigned char *p, unsigned width) {
  uint64_t v = 0;
  for (unsigned i = width; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

static int fail_damaged(const char *path, const char *object) {
  return obc_fail(OBC_EFORMAT, "%s: %s: checksum mismatch (the file is damaged)", path, object);
}

static int fail_truncated(const char *path, const char *object) {
  return obc_fail(OBC_EFORMAT, "%s: %s: unreadable (the file is damaged or truncated)", path,
                  object);
}

/* 1 when the header at absolute offset is a version-2 header whose first
 * chunk's checksum holds, 0 when it is not a version-2 header, an obc_fail
 * when it is one but damaged or cut off. */
static int check_header_at(int fd, const char *path, uint64_t file_size, uint64_t offset,
                           const char *object) {
  unsigned char prefix[4 + 1 + 1 + 16 + 4 + 8];
  size_t have = sizeof prefix;
  if (offset >= file_size) return fail_truncated(path, object);
  if (file_size - offset < have) have = (size_t)(file_size - offset);
  if (read_at(fd, offset, prefix, have)) return fail_truncated(path, object);
  if (have < 6 || memcmp(prefix, "OHDR", 4) || prefix[4] != 2) return 0;
  unsigned flags = prefix[5];
  size_t at = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
  unsigned width = 1u << (flags & 3);
  if (flags & 0xc0) return fail_damaged(path, object); /* reserved bits */
  if (at + width > have) return fail_truncated(path, object);
  uint64_t chunk = le_uint(prefix + at, width);
  uint64_t total = at + width + chunk; /* bytes the checksum covers */
  if (chunk > MAX_HEADER_CHUNK || total + 4 > file_size - offset)
    return fail_truncated(path, object);
  unsigned char stack[4096];
  unsigned char *bytes = total + 4 <= sizeof stack ? stack : obc_malloc(total + 4, object);
  if (!bytes) return OBC_ENOMEM;
  int rc = read_at(fd, offset, bytes, (size_t)total + 4) ? fail_truncated(path, object) : 1;
  if (rc == 1 && trace_format_lookup3(bytes, (size_t)total, 0) != le_uint(bytes + total, 4))
    rc = fail_damaged(path, object);
  if (bytes != stack) free(bytes);
  return rc;
}

static int open_raw(const char *path, int *fd, uint64_t *size) {
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  if (*fd < 0) return obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  int rc = fstat(*fd, &st) != 0   ? obc_fail(OBC_EIO, "%s: cannot read: %s", path, strerror(errno))
           : S_ISDIR(st.st_mode)  ? obc_fail(OBC_EIO, "%s: is a folder, not a file", path)
           : !S_ISREG(st.st_mode) ? obc_fail(OBC_EIO, "%s: not a regular file", path)
                                  : OBC_OK;
  if (rc) {
    close(*fd);
    return rc;
  }
  *size = (uint64_t)st.st_size;
  return OBC_OK;
}

/* Superblock 2 or 3 at offset (its signature checked): addresses, checksum,
 * and the version-2 headers it points to. */
static int probe_superblock_2(int fd, const char *path, TraceFileFormat *f) {
  unsigned char sb[12 + 4 * 8 + 4];
  uint64_t offset = f->superblock_offset;
  if (f->file_size - offset < 12 || read_at(fd, offset, sb, 12))
    return fail_truncated(path, "superblock");
  unsigned width = sb[9];
  if (width != 2 && width != 4 && width != 8) return fail_damaged(path, "superblock");
  size_t size = 12 + 4 * (size_t)width + 4;
  if (f->file_size - offset < size || read_at(fd, offset, sb, size))
    return fail_truncated(path, "superblock");
  if (trace_format_lookup3(sb, size - 4, 0) != le_uint(sb + size - 4, 4))
    return fail_damaged(path, "superblock");
  uint64_t undefined = width == 8 ? UNDEFINED_ADDRESS : (((uint64_t)1 << (8 * width)) - 1);
  uint64_t base = le_uint(sb + 12, width);
  uint64_t extension = le_uint(sb + 12 + width, width);
  uint64_t root = le_uint(sb + 12 + 3 * width, width);
  f->base_address = base;
  if (f->superblock_version != 3) return OBC_OK;
  if (root == undefined || base > f->file_size || root > f->file_size - base)
    return fail_truncated(path, "root group");
  int rc = check_header_at(fd, path, f->file_size, base + root, "root group");
  if (rc == 1 && extension != undefined) {
    if (extension > f->file_size - base) return fail_truncated(path, "superblock extension");
    rc = check_header_at(fd, path, f->file_size, base + extension, "superblock extension");
  }
  if (rc < 0) return rc;
  f->checksummed = rc == 1;
  return OBC_OK;
}

int trace_format_probe(const char *path, const char *what, TraceFileFormat *f) {
  memset(f, 0, sizeof *f);
  f->superblock_version = -1;
  int fd;
  int rc = open_raw(path, &fd, &f->file_size);
  if (rc) return rc;
  /* HDF5 looks for the signature at 0, then at 512, 1024, 2048, ... */
  bool found = false;
  for (uint64_t at = 0; !found && at + 9 <= f->file_size; at = at ? 2 * at : 512) {
    unsigned char head[9];
    if (read_at(fd, at, head, sizeof head)) break;
    if (memcmp(head, hdf5_signature, sizeof hdf5_signature)) continue;
    found = true;
    f->superblock_offset = at;
    f->superblock_version = head[8];
  }
  if (!found)
    rc = obc_fail(OBC_EFORMAT, "%s: not an HDF5 file (expected %s)", path, what);
  else if (f->superblock_version > 3)
    rc = obc_fail(OBC_EFORMAT, "%s: superblock version %d (this obcache reads HDF5 1.10 files)",
                  path, f->superblock_version);
  else if (f->superblock_version >= 2)
    rc = probe_superblock_2(fd, path, f);
  else
    f->base_address = f->superblock_offset; /* superblock 0/1: read by HDF5, in a child */
  close(fd);
  return rc;
}

int trace_format_check_header(const char *path, int fd, const TraceFileFormat *f, uint64_t address,
                              const char *object) {
  if (address == UNDEFINED_ADDRESS || f->base_address > f->file_size ||
      address >= f->file_size - f->base_address)
    return fail_truncated(path, object);
  int rc = check_header_at(fd, path, f->file_size, f->base_address + address, object);
  if (rc == 0)
    rc = obc_fail(OBC_EFORMAT,
                  "%s: %s: not a version-2 object header (schema 2 is HDF5 1.10's checksummed "
                  "format; the file is forged or damaged)",
                  path, object);
  return rc < 0 ? rc : OBC_OK;
}
