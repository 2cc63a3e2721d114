/* Internal helpers shared by the trace reader and writer (not part of the
 * trace.h contract): typed scalar attributes on an HDF5 object, the 16-bit
 * IEEE float type that HDF5 1.10 lacks, float <-> half conversion, and the
 * names of the per-layer datasets. Every helper that can fail leaves an
 * obc_fail message naming the file path it is given. */
#ifndef OBC_TRACE_H5_H
#define OBC_TRACE_H5_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Silences HDF5's own error-stack printing once per process; our messages
 * replace it. HDF5 still records the stack of a failed call, which
 * trace_h5_damage reads. */
void trace_h5_silence(void);
/* Why the last HDF5 call failed, from its error stack: "checksum mismatch
 * (the file is damaged)" when a checksum failed, else "unreadable (the file
 * is damaged or truncated)". Call these three right after the failed call:
 * the next HDF5 call (even a close) clears the stack. */
const char *trace_h5_damage(void);
/* Whether the last failed HDF5 call failed on a checksum. */
bool trace_h5_checksum_failed(void);
/* obc_fail(OBC_EFORMAT, "<path>: <object>: <trace_h5_damage()>"). */
int trace_h5_fail_damaged(const char *path, const char *object);

/* A dataset creation property list: chunks of `chunk` (none when chunk is
 * NULL or the dataset is empty), shuffle + deflate at compression_level 1..9,
 * then a Fletcher32 checksum on every chunk. Caller H5Pclose()s it; < 0 on
 * failure. */
hid_t trace_h5_dataset_plist(int rank, const hsize_t *dims /* (rank) */,
                             const hsize_t *chunk /* (rank) or NULL */, int compression_level);

/* A new 16-bit little-endian IEEE float type (sign 15, exponent 10..14, bias
 * 15, mantissa 0..9): what numpy/h5py call float16. Caller H5Tclose()s it. */
hid_t trace_h5_f16_type(void);

/* Round-to-nearest-even float -> half bits and back (exact for every half). */
uint16_t trace_h5_half_from_float(float value);
float trace_h5_float_from_half(uint16_t bits);
/* Rounds x in place to the nearest half value (what f16 storage keeps). */
void trace_h5_round_to_half(float *x /* (count) */, size_t count);

/* "/layers/007" and "/layers/007/K" style names. */
void trace_h5_layer_group(char *out, size_t size, size_t layer);
void trace_h5_layer_dataset(char *out, size_t size, size_t layer, const char *name);

/* Scalar attributes. Strings are written as fixed-length UTF-8 of their own
 * length, NUL-padded (h5py reads bytes); schema 1 wrote variable-length
 * ones. */
int trace_h5_attr_write_i64(const char *path, hid_t obj, const char *name, int64_t value);
int trace_h5_attr_write_f64(const char *path, hid_t obj, const char *name, double value);
int trace_h5_attr_write_str(const char *path, hid_t obj, const char *name, const char *value);
/* Readers return OBC_EFORMAT naming the attribute when it is absent or has
 * the wrong type. */
int trace_h5_attr_read_i64(const char *path, hid_t obj, const char *name, int64_t *value);
int trace_h5_attr_read_f64(const char *path, hid_t obj, const char *name, double *value);
/* Copies into out (truncating to size-1 characters). Variable-length strings
 * (their bytes live in HDF5's unchecksummed global heap) are refused unless
 * allow_variable (schema 1). */
int trace_h5_attr_read_str(const char *path, hid_t obj, const char *name, bool allow_variable,
                           char *out, size_t size);
/* A 1-D attribute of count fixed-length strings of stride bytes each, NUL
 * padded (names is (count, stride)); count may be 0. */
int trace_h5_attr_write_names(const char *path, hid_t obj, const char *name,
                              const char *names /* (count, stride) */, size_t stride, size_t count);
/* Reads such a list into names (max, stride), NUL-terminated (names longer
 * than stride-1 bytes are cut); OBC_EFORMAT when it has more than max. */
int trace_h5_attr_read_names(const char *path, hid_t obj, const char *name,
                             char *names /* (max, stride) */, size_t stride, size_t max,
                             size_t *count);

/* Text (prompt / generated): written as a (n) uint8 dataset of its UTF-8
 * bytes, chunked with a Fletcher32 checksum. */
int trace_h5_text_write(const char *path, hid_t file, const char *name, const char *text);
/* Reads a text dataset written as bytes, or as a scalar string (variable
 * length only when allow_variable). *out is a malloc'ed copy (caller frees). */
int trace_h5_text_read(const char *path, hid_t file, const char *name, bool allow_variable,
                       char **out);

#endif
