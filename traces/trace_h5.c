/* HDF5 plumbing for the trace reader and writer: scalar attributes, text
 * datasets, the half-precision type and the float <-> half conversion. We
 * convert halves ourselves (round to nearest even) instead of relying on
 * HDF5's soft conversion path, which is slow and version-dependent. */
#include "traces/trace_h5.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

void trace_h5_silence(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

hid_t trace_h5_f16_type(void) {
  hid_t type = H5Tcopy(H5T_IEEE_F32LE);
  if (type < 0) return type;
  /* Order matters: shrink the fields first, then the precision and size. */
  if (H5Tset_fields(type, 15, 10, 5, 0, 10) < 0 || H5Tset_precision(type, 16) < 0 ||
      H5Tset_size(type, 2) < 0 || H5Tset_ebias(type, 15) < 0) {
    H5Tclose(type);
    return -1;
  }
  return type;
}

uint16_t trace_h5_half_from_float(float value) {
  uint32_t f;
  memcpy(&f, &value, sizeof f);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t exponent = (f >> 23) & 0xffu;
  uint32_t mantissa = f & 0x7fffffu;
  if (exponent == 0xffu) /* inf stays inf, NaN stays a (quiet) NaN */
    return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
  int e = (int)exponent - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) { /* half subnormal (or zero) */
    if (e < -10) return (uint16_t)sign;
    mantissa |= 0x800000u;
    unsigned shift = (unsigned)(14 - e);
    uint32_t h = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* may carry into inf */
  return (uint16_t)(sign | h);
}

float trace_h5_float_from_half(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t f;
  if (exponent == 0) {
    float magnitude = ldexpf((float)mantissa, -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    f = sign | 0x7f800000u | (mantissa << 13);
  else
    f = sign | ((exponent - 15u + 127u) << 23) | (mantissa << 13);
  float value;
  memcpy(&value, &f, sizeof value);
  return value;
}

void trace_h5_round_to_half(float *x, size_t count) {
  for (size_t i = 0; i < count; i++)
    x[i] = trace_h5_float_from_half(trace_h5_half_from_float(x[i]));
}

void trace_h5_layer_group(char *out, size_t size, size_t layer) {
  snprintf(out, size, "/layers/%03zu", layer);
}

void trace_h5_layer_dataset(char *out, size_t size, size_t layer, const char *name) {
  snprintf(out, size, "/layers/%03zu/%s", layer, name);
}

/* ---- attributes ---------------------------------------------------------- */

static hid_t string_type(void) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  return type;
}

static int attr_write(const char *path, hid_t obj, const char *name, hid_t file_type,
                      hid_t mem_type, const void *value) {
  if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0)
    return obc_fail(OBC_EIO, "%s: cannot replace attribute %s", path, name);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  herr_t status = attr >= 0 ? H5Awrite(attr, mem_type, value) : -1;
  if (attr >= 0) H5Aclose(attr);
  H5Sclose(space);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot write attribute %s", path, name);
  return OBC_OK;
}

int trace_h5_attr_write_i64(const char *path, hid_t obj, const char *name, int64_t value) {
  return attr_write(path, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

int trace_h5_attr_write_f64(const char *path, hid_t obj, const char *name, double value) {
  return attr_write(path, obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

int trace_h5_attr_write_str(const char *path, hid_t obj, const char *name, const char *value) {
  hid_t type = string_type();
  const char *text = value ? value : "";
  int rc = attr_write(path, obj, name, type, type, &text);
  H5Tclose(type);
  return rc;
}

/* Opens a scalar (or one-element) attribute of the given class. */
static int attr_open(const char *path, hid_t obj, const char *name, H5T_class_t expected,
                     const char *what, hid_t *out) {
  if (H5Aexists(obj, name) <= 0)
    return obc_fail(OBC_EFORMAT, "%s: attribute '%s' is missing (expected %s)", path, name, what);
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (attr < 0) return obc_fail(OBC_EFORMAT, "%s: cannot open attribute '%s'", path, name);
  hid_t type = H5Aget_type(attr);
  hid_t space = H5Aget_space(attr);
  H5T_class_t cls = H5Tget_class(type);
  hssize_t count = H5Sget_simple_extent_npoints(space);
  H5Tclose(type);
  H5Sclose(space);
  if (cls != expected || count != 1) {
    H5Aclose(attr);
    return obc_fail(OBC_EFORMAT, "%s: attribute '%s' is not a single %s", path, name, what);
  }
  *out = attr;
  return OBC_OK;
}

int trace_h5_attr_read_i64(const char *path, hid_t obj, const char *name, int64_t *value) {
  hid_t attr = -1;
  int rc = attr_open(path, obj, name, H5T_INTEGER, "integer", &attr);
  if (rc) return rc;
  herr_t status = H5Aread(attr, H5T_NATIVE_INT64, value);
  H5Aclose(attr);
  if (status < 0) return obc_fail(OBC_EFORMAT, "%s: cannot read attribute '%s'", path, name);
  return OBC_OK;
}

int trace_h5_attr_read_f64(const char *path, hid_t obj, const char *name, double *value) {
  hid_t attr = -1;
  int rc = attr_open(path, obj, name, H5T_FLOAT, "floating-point number", &attr);
  if (rc) return rc;
  herr_t status = H5Aread(attr, H5T_NATIVE_DOUBLE, value);
  H5Aclose(attr);
  if (status < 0) return obc_fail(OBC_EFORMAT, "%s: cannot read attribute '%s'", path, name);
  return OBC_OK;
}

/* Reads a string attribute or dataset (variable or fixed length) into a
 * malloc'ed copy. is_attr selects H5Aread / H5Dread. */
static int string_read(const char *path, hid_t obj, hid_t file_type, int is_attr, const char *name,
                       char **out) {
  herr_t status;
  char *copy = NULL;
  if (H5Tis_variable_str(file_type) > 0) {
    hid_t mem = string_type();
    char *text = NULL;
    status = is_attr ? H5Aread(obj, mem, &text)
                     : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text);
    if (status >= 0) {
      size_t n = text ? strlen(text) : 0;
      copy = malloc(n + 1);
      if (copy) {
        if (n) memcpy(copy, text, n);
        copy[n] = '\0';
      }
    }
    if (text) H5free_memory(text);
    H5Tclose(mem);
  } else {
    size_t n = H5Tget_size(file_type);
    hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, n + 1);
    H5Tset_strpad(mem, H5T_STR_NULLTERM);
    copy = calloc(n + 1, 1);
    status = copy ? (is_attr ? H5Aread(obj, mem, copy)
                             : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, copy))
                  : -1;
    H5Tclose(mem);
  }
  if (status < 0 || !copy) {
    free(copy);
    return obc_fail(status < 0 ? OBC_EFORMAT : OBC_ENOMEM, "%s: cannot read string '%s'", path,
                    name);
  }
  *out = copy;
  return OBC_OK;
}

int trace_h5_attr_read_str(const char *path, hid_t obj, const char *name, char *out, size_t size) {
  hid_t attr = -1;
  int rc = attr_open(path, obj, name, H5T_STRING, "string", &attr);
  if (rc) return rc;
  hid_t type = H5Aget_type(attr);
  char *text = NULL;
  rc = string_read(path, attr, type, 1, name, &text);
  H5Tclose(type);
  H5Aclose(attr);
  if (rc) return rc;
  snprintf(out, size, "%s", text);
  free(text);
  return OBC_OK;
}

int trace_h5_text_write(const char *path, hid_t file, const char *name, const char *text) {
  if (H5Lexists(file, name, H5P_DEFAULT) > 0 && H5Ldelete(file, name, H5P_DEFAULT) < 0)
    return obc_fail(OBC_EIO, "%s: cannot replace dataset %s", path, name);
  hid_t type = string_type();
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const char *value = text ? text : "";
  herr_t status = dset >= 0 ? H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) : -1;
  if (dset >= 0) H5Dclose(dset);
  H5Sclose(space);
  H5Tclose(type);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot write dataset %s", path, name);
  return OBC_OK;
}

int trace_h5_text_read(const char *path, hid_t file, const char *name, char **out) {
  hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  if (dset < 0) return obc_fail(OBC_EFORMAT, "%s: dataset %s is missing", path, name);
  hid_t type = H5Dget_type(dset);
  int rc;
  if (H5Tget_class(type) != H5T_STRING)
    rc = obc_fail(OBC_EFORMAT, "%s: dataset %s is not a string", path, name);
  else
    rc = string_read(path, dset, type, 0, name, out);
  H5Tclose(type);
  H5Dclose(dset);
  return rc;
}
