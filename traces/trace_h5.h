/* Internal helpers shared by the trace reader and writer (not part of the
 * trace.h contract): typed scalar attributes on an HDF5 object, the 16-bit
 * IEEE float type that HDF5 1.10 lacks, float <-> half conversion, and the
 * names of the per-layer datasets. Every helper that can fail leaves an
 * obc_fail message naming the file path it is given. */
#ifndef OBC_TRACE_H5_H
#define OBC_TRACE_H5_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* Silences HDF5's own error-stack printing once per process; our messages
 * replace it. */
void trace_h5_silence(void);

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

/* Scalar attributes. Strings are variable-length UTF-8 (h5py reads str). */
int trace_h5_attr_write_i64(const char *path, hid_t obj, const char *name, int64_t value);
int trace_h5_attr_write_f64(const char *path, hid_t obj, const char *name, double value);
int trace_h5_attr_write_str(const char *path, hid_t obj, const char *name, const char *value);
/* Readers return OBC_EFORMAT naming the attribute when it is absent or has
 * the wrong type. */
int trace_h5_attr_read_i64(const char *path, hid_t obj, const char *name, int64_t *value);
int trace_h5_attr_read_f64(const char *path, hid_t obj, const char *name, double *value);
/* Copies into out (truncating to size-1 characters). */
int trace_h5_attr_read_str(const char *path, hid_t obj, const char *name, char *out, size_t size);

/* Scalar variable-length string dataset (prompt / generated text). */
int trace_h5_text_write(const char *path, hid_t file, const char *name, const char *text);
/* *out is a malloc'ed copy (caller frees). */
int trace_h5_text_read(const char *path, hid_t file, const char *name, char **out);

#endif
