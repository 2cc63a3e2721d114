/* HDF5 plumbing for the trace reader and writer: scalar attributes, text
 * datasets, the half-precision type and the float <-> half conversion. We
 * convert halves ourselves (round to nearest even) instead of relying on
 * HDF5's soft conversion path, which is slow and version-dependent. */
#include "traces/trace_h5.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/obc_error.h"

void trace_h5_silence(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* H5Ewalk2 callback: sets *found when an entry of the stack mentions a
 * checksum (HDF5's words: "incorrect metadata checksum", "data error detected
 * by Fletcher32 checksum"). */
static herr_t find_checksum(unsigned n, const H5E_error2_t *entry, void *found) {
  (void)n;
  if (entry->desc && strstr(entry->desc, "checksum")) *(int *)found = 1;
  return 0;
}

bool trace_h5_checksum_failed(void) {
  int checksum = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_checksum, &checksum);
  return checksum != 0;
}

const char *trace_h5_damage(void) {
  return trace_h5_checksum_failed() ? "checksum mismatch (the file is damaged)"
                                    : "unreadable (the file is damaged or truncated)";
}

int trace_h5_fail_damaged(const char *path, const char *object) {
  return obc_fail(OBC_EFORMAT, "%s: %s: %s", path, object, trace_h5_damage());
}

hid_t trace_h5_dataset_plist(int rank, const hsize_t *dims, const hsize_t *chunk,
                             int compression_level) {
  hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  bool empty = false;
  for (int i = 0; i < rank; i++) empty |= dims[i] == 0;
  if (plist < 0 || !chunk || empty) return plist; /* HDF5 cannot chunk an empty dataset */
  herr_t status = H5Pset_chunk(plist, rank, chunk);
  if (status >= 0 && compression_level > 0) {
    status = H5Pset_shuffle(plist);
    if (status >= 0) status = H5Pset_deflate(plist, (unsigned)compression_level);
  }
  /* Last on write, so first on read: a damaged chunk is refused before the
   * decompressor sees it. */
  if (status >= 0) status = H5Pset_fletcher32(plist);
  if (status < 0) {
    H5Pclose(plist);
    return -1;
  }
  return plist;
}

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

/* Variable-length UTF-8: what schema 1 wrote, still read. */
static hid_t string_type(void) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  return type;
}

/* Fixed-length UTF-8 of size bytes, padded with NULs (schema 2). HDF5 needs a
 * size of at least 1, so "" is stored as one NUL. */
static hid_t fixed_string_type(size_t size) {
  hid_t type = H5Tcopy(H5T_C_S1);
  if (type < 0) return type;
  if (H5Tset_size(type, size ? size : 1) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0 ||
      H5Tset_cset(type, H5T_CSET_UTF8) < 0) {
    H5Tclose(type);
    return -1;
  }
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
  const char *text = value ? value : "";
  size_t n = strlen(text);
  hid_t type = fixed_string_type(n);
  if (type < 0) return obc_fail(OBC_EIO, "%s: cannot make a string type for %s", path, name);
  int rc = attr_write(path, obj, name, type, type, n ? text : "");
  H5Tclose(type);
  return rc;
}

int trace_h5_attr_write_names(const char *path, hid_t obj, const char *name, const char *names,
                              size_t stride, size_t count) {
  if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0)
    return obc_fail(OBC_EIO, "%s: cannot replace attribute %s", path, name);
  hsize_t dims[1] = {count};
  hid_t type = fixed_string_type(stride);
  hid_t space = H5Screate_simple(1, dims, NULL);
  hid_t attr =
      type >= 0 && space >= 0 ? H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
  herr_t status = attr >= 0 ? (count ? H5Awrite(attr, type, names) : 0) : -1;
  if (attr >= 0) H5Aclose(attr);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot write attribute %s", path, name);
  return OBC_OK;
}

/* A damaged attribute: "<path>: attribute <name>: checksum mismatch ...". */
static int fail_attribute(const char *path, const char *name) {
  char object[128];
  snprintf(object, sizeof object, "attribute %s", name);
  return trace_h5_fail_damaged(path, object);
}

/* Opens a scalar (or one-element) attribute of the given class. */
static int attr_open(const char *path, hid_t obj, const char *name, H5T_class_t expected,
                     const char *what, hid_t *out) {
  htri_t exists = H5Aexists(obj, name);
  if (exists < 0) return fail_attribute(path, name);
  if (exists == 0)
    return obc_fail(OBC_EFORMAT, "%s: attribute '%s' is missing (expected %s)", path, name, what);
  hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (attr < 0) return fail_attribute(path, name);
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
  rc = H5Aread(attr, H5T_NATIVE_INT64, value) < 0 ? fail_attribute(path, name) : OBC_OK;
  H5Aclose(attr);
  return rc;
}

int trace_h5_attr_read_f64(const char *path, hid_t obj, const char *name, double *value) {
  hid_t attr = -1;
  int rc = attr_open(path, obj, name, H5T_FLOAT, "floating-point number", &attr);
  if (rc) return rc;
  rc = H5Aread(attr, H5T_NATIVE_DOUBLE, value) < 0 ? fail_attribute(path, name) : OBC_OK;
  H5Aclose(attr);
  return rc;
}

/* Reads a string attribute or dataset (variable or fixed length) into a
 * malloc'ed copy. is_attr selects H5Aread / H5Dread. Variable-length strings
 * live in HDF5's global heap, which has no checksum and which HDF5 1.10
 * trusts blindly: only schema 1 files may have them (allow_variable). */
static int string_read(const char *path, hid_t obj, hid_t file_type, int is_attr, const char *name,
                       bool allow_variable, char **out) {
  herr_t status;
  char *copy = NULL;
  const char *why = NULL;
  htri_t variable = H5Tis_variable_str(file_type);
  if (variable < 0) return trace_h5_fail_damaged(path, name);
  if (variable && !allow_variable)
    return obc_fail(OBC_EFORMAT, "%s: %s is a variable-length string (schema 2 stores none)", path,
                    name);
  if (variable) {
    hid_t mem = string_type();
    H5Tset_cset(mem, H5Tget_cset(file_type)); /* HDF5 converts no character set */
    char *text = NULL;
    status = is_attr ? H5Aread(obj, mem, &text)
                     : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text);
    if (status < 0) why = trace_h5_damage(); /* before the next call clears the stack */
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
    H5Tset_cset(mem, H5Tget_cset(file_type)); /* HDF5 converts no character set */
    copy = calloc(n + 1, 1);
    status = copy ? (is_attr ? H5Aread(obj, mem, copy)
                             : H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, copy))
                  : -1;
    if (status < 0) why = trace_h5_damage();
    H5Tclose(mem);
  }
  if (!copy) return obc_fail(OBC_ENOMEM, "%s: out of memory for string %s", path, name);
  if (status < 0) {
    free(copy);
    return obc_fail(OBC_EFORMAT, "%s: %s: %s", path, name, why);
  }
  *out = copy;
  return OBC_OK;
}

int trace_h5_attr_read_str(const char *path, hid_t obj, const char *name, bool allow_variable,
                           char *out, size_t size) {
  hid_t attr = -1;
  int rc = attr_open(path, obj, name, H5T_STRING, "string", &attr);
  if (rc) return rc;
  hid_t type = H5Aget_type(attr);
  char *text = NULL, label[128];
  snprintf(label, sizeof label, "attribute %s", name);
  rc = string_read(path, attr, type, 1, label, allow_variable, &text);
  H5Tclose(type);
  H5Aclose(attr);
  if (rc) return rc;
  snprintf(out, size, "%s", text);
  free(text);
  return OBC_OK;
}

int trace_h5_attr_read_names(const char *path, hid_t obj, const char *name, char *names,
                             size_t stride, size_t max, size_t *count) {
  hid_t attr = -1;
  htri_t exists = H5Aexists(obj, name);
  if (exists < 0) return fail_attribute(path, name);
  if (!exists) return obc_fail(OBC_EFORMAT, "%s: attribute '%s' is missing", path, name);
  attr = H5Aopen(obj, name, H5P_DEFAULT);
  if (attr < 0) return fail_attribute(path, name);
  hid_t type = H5Aget_type(attr), space = H5Aget_space(attr);
  int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  hssize_t n = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  htri_t variable = type >= 0 ? H5Tis_variable_str(type) : -1;
  int rc = OBC_OK;
  if (type < 0 || H5Tget_class(type) != H5T_STRING || variable != 0 || rank != 1 || n < 0)
    rc = obc_fail(OBC_EFORMAT, "%s: attribute '%s' is not a list of fixed-length strings", path,
                  name);
  else if ((size_t)n > max)
    rc = obc_fail(OBC_EFORMAT, "%s: attribute '%s' has %lld names (at most %zu)", path, name,
                  (long long)n, max);
  hid_t mem = rc ? -1 : fixed_string_type(stride);
  if (!rc) {
    H5Tset_strpad(mem, H5T_STR_NULLTERM); /* longer names are cut */
    H5Tset_cset(mem, H5Tget_cset(type));  /* HDF5 converts no character set */
  }
  memset(names, 0, stride * max);
  if (!rc && n > 0 && H5Aread(attr, mem, names) < 0) rc = fail_attribute(path, name);
  if (!rc) *count = (size_t)n;
  if (mem >= 0) H5Tclose(mem);
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  H5Aclose(attr);
  return rc;
}

int trace_h5_text_write(const char *path, hid_t file, const char *name, const char *text) {
  if (H5Lexists(file, name, H5P_DEFAULT) > 0 && H5Ldelete(file, name, H5P_DEFAULT) < 0)
    return obc_fail(OBC_EIO, "%s: cannot replace dataset %s", path, name);
  const char *value = text ? text : "";
  hsize_t dims[1] = {strlen(value)};
  hsize_t chunk[1] = {dims[0] < ((hsize_t)1 << 20) ? dims[0] : ((hsize_t)1 << 20)};
  hid_t space = H5Screate_simple(1, dims, NULL);
  hid_t plist = trace_h5_dataset_plist(1, dims, chunk, 0);
  hid_t dset = space >= 0 && plist >= 0
                   ? H5Dcreate2(file, name, H5T_STD_U8LE, space, H5P_DEFAULT, plist, H5P_DEFAULT)
                   : -1;
  herr_t status =
      dset >= 0
          ? (dims[0] ? H5Dwrite(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, value) : 0)
          : -1;
  if (dset >= 0) H5Dclose(dset);
  if (plist >= 0) H5Pclose(plist);
  if (space >= 0) H5Sclose(space);
  if (status < 0) return obc_fail(OBC_EIO, "%s: cannot write dataset %s", path, name);
  return OBC_OK;
}

/* A (n) uint8 dataset of UTF-8 bytes (schema 2) into a NUL-terminated copy. */
static int bytes_read(const char *path, hid_t dset, const char *name, char **out) {
  hid_t space = H5Dget_space(dset);
  int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  hsize_t n = 0;
  if (rank == 1) H5Sget_simple_extent_dims(space, &n, NULL);
  if (space >= 0) H5Sclose(space);
  if (rank != 1) return obc_fail(OBC_EFORMAT, "%s: %s is not a 1-D byte array", path, name);
  if (n >= ((hsize_t)1 << 31))
    return obc_fail(OBC_EFORMAT, "%s: %s claims %llu bytes of text (at most 2 GiB)", path, name,
                    (unsigned long long)n);
  char *copy = obc_malloc((size_t)n + 1, "trace text");
  if (!copy) return OBC_ENOMEM;
  if (n && H5Dread(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, copy) < 0) {
    free(copy);
    return trace_h5_fail_damaged(path, name);
  }
  copy[n] = '\0';
  *out = copy;
  return OBC_OK;
}

int trace_h5_text_read(const char *path, hid_t file, const char *name, bool allow_variable,
                       char **out) {
  hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  if (dset < 0) return trace_h5_fail_damaged(path, name);
  hid_t type = H5Dget_type(dset);
  H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  int rc;
  if (cls == H5T_INTEGER && H5Tget_size(type) == 1)
    rc = bytes_read(path, dset, name, out);
  else if (cls == H5T_STRING)
    rc = string_read(path, dset, type, 0, name, allow_variable, out);
  else
    rc = obc_fail(OBC_EFORMAT, "%s: dataset %s is neither text nor bytes", path, name);
  if (type >= 0) H5Tclose(type);
  H5Dclose(dset);
  return rc;
}
