/* The keep file of `obcache evict` (evict/policy.h): which prompt positions
 * every (layer, KV head) keeps, as a mask, counts and a padded position list,
 * with every policy parameter as an attribute so the file says how it was
 * made, and the content hash of the trace it was made for, so that another
 * trace of the same shape refuses it. Written under a temporary name and
 * renamed when complete. Read as an untrusted file: every value used is
 * checked (mask 0/1, counts whole and in range, names known). */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_text.h"
#include "evict/keep_legacy.h"
#include "evict/policy.h"
#include "evict/preset.h"
#include "evict/score_file.h"
#include "traces/trace_format.h"
#include "traces/trace_h5.h"

/* Schema 2: fixed-length strings (no global heap, which has no checksum),
 * checksummed metadata (HDF5 1.10 format) and Fletcher32 on the datasets,
 * so that damage is an error, not a crash. Schema 1 (variable-length
 * strings, no checksums) is still read. */
#define EVICT_KEEP_SCHEMA "obcache-keep/2"
#define EVICT_KEEP_SCHEMA_1 "obcache-keep/1"

/* A dataset in chunks of one (layer, KV head) row, each with a Fletcher32
 * checksum. */
static herr_t write_dataset(hid_t file, const char *name, hid_t file_type, hid_t mem_type, int rank,
                            const hsize_t *dims, const void *data) {
  hsize_t chunk[3] = {1, 1, 1};
  chunk[rank - 1] = dims[rank - 1] ? dims[rank - 1] : 1;
  hid_t space = H5Screate_simple(rank, dims, NULL);
  hid_t dcpl = trace_h5_dataset_plist(rank, dims, chunk, 0);
  hid_t set =
      dcpl < 0 ? -1 : H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  herr_t status = set < 0 ? -1 : H5Dwrite(set, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  if (set >= 0) H5Dclose(set);
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Sclose(space);
  return status;
}

/* The score's kind as the keep file records it ("unknown" for a policy
 * read back from a file, whose row is not looked up). */
static const char *kind_name(const EvictSource *source) {
  if (!source) return "unknown";
  switch (source->kind) {
    case EVICT_SCORE_RANDOM: return "random";
    case EVICT_SCORE_RECENCY: return "recency";
    case EVICT_SCORE_ORACLE: return "oracle";
    case EVICT_SCORE_DECODE_ATTN: return "decode_attn";
    case EVICT_SCORE_PRESET: return "preset";
    case EVICT_SCORE_FILE: return "file";
    default: return "quantity";
  }
}

int evict_keep_write(const char *path, const EvictKeepSet *k, const char *trace_path,
                     const char *command_line) {
  size_t heads = k->n_layers * k->n_kv_heads, max_kept = 1;
  for (size_t i = 0; i < heads; i++) {
    size_t all = k->n_kept[i] + (k->n_prompt - k->n_candidates);
    if (all > max_kept) max_kept = all;
  }
  int64_t *counts = obc_malloc(heads * sizeof *counts, "kept counts");
  int64_t *positions = obc_malloc(heads * max_kept * sizeof *positions, "kept positions");
  if (!counts || !positions) {
    free(counts);
    free(positions);
    return OBC_ENOMEM;
  }
  for (size_t i = 0; i < heads; i++) {
    size_t j = 0;
    for (size_t p = 0; p < k->n_prompt; p++)
      if (k->keep[i * k->n_prompt + p]) positions[i * max_kept + j++] = (int64_t)p;
    counts[i] = (int64_t)k->n_kept[i];
    for (; j < max_kept; j++) positions[i * max_kept + j] = -1;
  }
  ObcPendingFile pending;
  int rc = obc_pending_init(&pending, path);
  if (rc) {
    free(counts);
    free(positions);
    return rc;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  obc_pending_register(&pending);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110); /* as traces: checksummed */
  errno = 0;
  hid_t file = H5Fcreate(pending.temp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  int err = errno;
  H5Pclose(fapl);
  if (file < 0) {
    free(counts);
    free(positions);
    rc = obc_fail(OBC_EIO, "%s: cannot create the keep file: %s", path,
                  obc_write_error_text(pending.temp_path, err));
    obc_pending_abort(&pending); /* H5Fcreate may fail after creating the file */
    return rc;
  }
  const EvictPolicy *p = &k->policy;
  const char *tmp = pending.temp_path;
  char protect[EVICT_MAX_PROTECT * 64];
  evict_policy_protect_text(p, protect, sizeof protect);
  hsize_t mask_dims[3] = {k->n_layers, k->n_kv_heads, k->n_prompt};
  hsize_t count_dims[2] = {k->n_layers, k->n_kv_heads};
  hsize_t list_dims[3] = {k->n_layers, k->n_kv_heads, max_kept};
  char score_file[1200] = ""; /* a score from a file: PATH[:DATASET] */
  if (p->source && p->source->kind == EVICT_SCORE_FILE && evict_score_file_path(p->score)) {
    const char *dataset = evict_score_file_dataset(p->score);
    snprintf(score_file, sizeof score_file, "%s%s%s", evict_score_file_path(p->score),
             *dataset ? ":" : "", dataset);
  }
  errno = 0; /* HDF5 keeps the errno of a failed write */
  bool ok =
      write_dataset(file, "keep", H5T_STD_U8LE, H5T_NATIVE_UCHAR, 3, mask_dims, k->keep) >= 0 &&
      write_dataset(file, "n_kept", H5T_STD_I64LE, H5T_NATIVE_INT64, 2, count_dims, counts) >= 0 &&
      write_dataset(file, "positions", H5T_STD_I64LE, H5T_NATIVE_INT64, 3, list_dims, positions) >=
          0 &&
      trace_h5_attr_write_str(tmp, file, "schema", EVICT_KEEP_SCHEMA) == 0 &&
      trace_h5_attr_write_str(tmp, file, "tool_version", OBC_VERSION) == 0 &&
      trace_h5_attr_write_str(tmp, file, "trace", trace_path) == 0 &&
      trace_h5_attr_write_str(tmp, file, "trace_hash", k->trace_hash) == 0 &&
      trace_h5_attr_write_str(tmp, file, "command_line", command_line ? command_line : "") == 0 &&
      trace_h5_attr_write_str(tmp, file, "score", p->score) == 0 &&
      trace_h5_attr_write_str(tmp, file, "score_kind", kind_name(p->source)) == 0 &&
      (!*score_file || trace_h5_attr_write_str(tmp, file, "score_file", score_file) == 0) &&
      trace_h5_attr_write_str(tmp, file, "budget_given", p->budget_text) == 0 &&
      trace_h5_attr_write_str(tmp, file, "budget_rule", evict_budget_rule_name(p->budget_rule)) ==
          0 &&
      trace_h5_attr_write_f64(tmp, file, "budget", (double)k->budget) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "window", (double)k->window) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "recent", (double)p->recent) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "sinks", (double)p->sinks) == 0 &&
      trace_h5_attr_write_str(tmp, file, "allocation", evict_allocation_name(p->allocation)) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "adakv_floor", p->adakv_floor) == 0 &&
      trace_h5_attr_write_str(tmp, file, "protocol", evict_protocol_name(p->protocol)) == 0 &&
      trace_h5_attr_write_str(tmp, file, "protect", protect) == 0 &&
      trace_h5_attr_write_str(tmp, file, "protect_budget", EVICT_PROTECT_BUDGET) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "seed", (double)p->seed) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "n_prompt", (double)k->n_prompt) == 0 &&
      trace_h5_attr_write_f64(tmp, file, "n_candidates", (double)k->n_candidates) == 0 &&
      trace_h5_attr_write_str(tmp, file, "complete", "1") >= 0;
  ok = H5Fclose(file) >= 0 && ok;
  err = errno;
  free(counts);
  free(positions);
  if (!ok) {
    obc_pending_unregister(&pending);
    obc_pending_abort(&pending);
    return obc_fail(OBC_EIO, "%s: cannot write the keep file: %s", path,
                    obc_write_error_text(pending.temp_path, err));
  }
  rc = obc_pending_commit(&pending);
  obc_pending_unregister(&pending);
  return rc;
}

/* ---- reading: the file is untrusted, so every value used is checked -------- */

/* A float64 attribute; -1, with no message, when it is missing or not a
 * number (the caller says which and why). */
static int read_f64_attr(hid_t file, const char *name, double *value) {
  if (H5Aexists(file, name) > 0 && !trace_h5_attr_read_f64("", file, name, value)) return 0;
  obc_error_clear();
  return -1;
}

/* A string attribute into out: OBC_OK, 1 (no message) when it is missing, or
 * an error naming it when it is not a string or unreadable. Variable-length
 * strings, whose bytes HDF5 keeps in its unchecksummed global heap, only in
 * schema 1 files. */
static int read_str_attr(hid_t file, const char *path, const char *name, bool schema_1, char *out,
                         size_t size) {
  if (H5Aexists(file, name) <= 0) return 1;
  return trace_h5_attr_read_str(path, file, name, schema_1, out, size);
}

/* A count attribute: a whole number in lo..hi, never cast from a negative,
 * fractional, NaN or huge double. A missing optional one leaves *out. */
static int read_count_attr(hid_t file, const char *path, const char *name, bool required, size_t lo,
                           size_t hi, size_t *out) {
  double v = 0;
  if (read_f64_attr(file, name, &v))
    return required ? obc_fail(OBC_EFORMAT, "%s: attribute %s missing or not a number", path, name)
                    : OBC_OK;
  if (!(v >= (double)lo && v <= (double)hi && v == floor(v)))
    return obc_fail(OBC_EFORMAT, "%s: %s %g (expected a whole number in %zu..%zu)", path, name, v,
                    lo, hi);
  *out = (size_t)v;
  return OBC_OK;
}

/* A text attribute shown in reports: refused when it holds control characters. */
static int read_text_attr(hid_t file, const char *path, bool schema_1, const char *name, char *out,
                          size_t size) {
  int rc = read_str_attr(file, path, name, schema_1, out, size);
  if (rc) return rc > 0 ? OBC_OK : rc; /* optional: a missing one keeps the default */
  for (const char *c = out; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      return obc_fail(OBC_EFORMAT, "%s: attribute %s holds control characters", path, name);
  return OBC_OK;
}

/* An attribute naming one of two choices (or three, when third is not
 * NULL); *out = 0, 1 or 2, left when missing. */
static int read_choice_attr(hid_t file, const char *path, bool schema_1, const char *name,
                            const char *first, const char *second, const char *third, int *out) {
  char text[32] = "";
  int rc = read_str_attr(file, path, name, schema_1, text, sizeof text);
  if (rc) return rc > 0 ? OBC_OK : rc;
  if (strcmp(text, first) && strcmp(text, second) && (!third || strcmp(text, third))) {
    char escaped[OBC_ESCAPED_SIZE(sizeof text)];
    obc_text_escape(escaped, sizeof escaped, text, false);
    if (third)
      return obc_fail(OBC_EFORMAT, "%s: %s '%s' (expected %s, %s or %s)", path, name, escaped,
                      first, second, third);
    return obc_fail(OBC_EFORMAT, "%s: %s '%s' (expected %s or %s)", path, name, escaped, first,
                    second);
  }
  *out = !strcmp(text, first) ? 0 : !strcmp(text, second) ? 1 : 2;
  return OBC_OK;
}

/* The schema, and complete = "1" (written last). */
static int check_schema(hid_t file, const char *path, bool *schema_1) {
  char schema[64] = "", complete[8] = "";
  if (read_str_attr(file, path, "schema", true, schema, sizeof schema) ||
      (strcmp(schema, EVICT_KEEP_SCHEMA) && strcmp(schema, EVICT_KEEP_SCHEMA_1))) {
    char escaped[OBC_ESCAPED_SIZE(sizeof schema)];
    return obc_fail(OBC_EFORMAT, "%s: not a keep file (expected schema %s, found '%s')", path,
                    EVICT_KEEP_SCHEMA, obc_text_escape(escaped, sizeof escaped, schema, false));
  }
  *schema_1 = !strcmp(schema, EVICT_KEEP_SCHEMA_1);
  if (read_str_attr(file, path, "complete", *schema_1, complete, sizeof complete) ||
      strcmp(complete, "1"))
    return obc_fail(OBC_EFORMAT, "%s: keep file not marked complete", path);
  return OBC_OK;
}

/* Dataset keep: integer, (layers, KV heads, prompt) of the trace. */
static int check_keep_dataset(hid_t set, const char *path, const TraceMeta *meta) {
  hid_t space = set < 0 ? -1 : H5Dget_space(set);
  hid_t type = set < 0 ? -1 : H5Dget_type(set);
  hsize_t dims[3] = {0, 0, 0};
  bool ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 3 &&
            H5Sget_simple_extent_dims(space, dims, NULL) >= 0;
  bool integer = type >= 0 && H5Tget_class(type) == H5T_INTEGER;
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (!ok) return obc_fail(OBC_EFORMAT, "%s: dataset keep missing or not 3-D", path);
  if (!integer) return obc_fail(OBC_EFORMAT, "%s: dataset keep is not of integers (0 or 1)", path);
  if (dims[0] != meta->model.n_layers || dims[1] != meta->model.n_kv_heads ||
      dims[2] != meta->n_prompt)
    return obc_fail(OBC_EFORMAT,
                    "%s: keep is (%llu, %llu, %llu) (expected (%zu, %zu, %zu) for the "
                    "trace's layers, KV heads and prompt; hint: made from another trace?)",
                    path, (unsigned long long)dims[0], (unsigned long long)dims[1],
                    (unsigned long long)dims[2], meta->model.n_layers, meta->model.n_kv_heads,
                    meta->n_prompt);
  return OBC_OK;
}


/* The trace's content hash recorded in the keep file (hash) against the
 * trace's: refused when both are known and differ. Schema 2 always writes
 * trace_hash ("" for a trace of schema 1, which has none), so a schema-2
 * keep file without it is damaged: it would bind to any trace of its shape. */
static int check_trace_hash(hid_t file, const char *path, bool schema_1, const TraceMeta *meta,
                            char *hash, size_t size) {
  char recorded[64] = "";
  int rc = read_str_attr(file, path, "trace_hash", schema_1, recorded, sizeof recorded);
  if (rc < 0) return rc;
  if (rc > 0 && !schema_1)
    return obc_fail(OBC_EFORMAT,
                    "%s: damaged keep file: attribute trace_hash is missing (schema %s always "
                    "writes it)",
                    path, EVICT_KEEP_SCHEMA);
  if (recorded[0] && !trace_content_hash_valid(recorded)) {
    char escaped[OBC_ESCAPED_SIZE(sizeof recorded)];
    return obc_fail(OBC_EFORMAT, "%s: trace_hash '%s' is not a content hash (hex digits)", path,
                    obc_text_escape(escaped, sizeof escaped, recorded, false));
  }
  snprintf(hash, size, "%s", recorded);
  if (hash[0] && meta->content_hash[0] && strcmp(hash, meta->content_hash)) {
    char trace[256] = "";
    if (read_str_attr(file, path, "trace", schema_1, trace, sizeof trace) < 0) obc_error_clear();
    char escaped[OBC_ESCAPED_SIZE(sizeof trace)];
    return obc_fail(OBC_EFORMAT,
                    "%s: made for trace %s (%s), not this trace %s (hint: run obcache evict on "
                    "this trace)",
                    path, hash, obc_text_escape(escaped, sizeof escaped, trace, false),
                    meta->content_hash);
  }
  return OBC_OK;
}

/* Every mask value 0 or 1, every position after the candidates kept; counts
 * the kept candidates of each head. */
static int check_mask(EvictKeepSet *k, const char *path) {
  size_t heads = k->n_layers * k->n_kv_heads;
  for (size_t i = 0; i < heads; i++) {
    const unsigned char *mask = k->keep + i * k->n_prompt;
    for (size_t q = 0; q < k->n_prompt; q++) {
      /* read as signed char: HDF5 clamps, so no value outside 0/1 becomes one */
      if (mask[q] > 1)
        return obc_fail(OBC_EFORMAT, "%s: keep[%zu][%zu][%zu] is not 0 or 1", path,
                        i / k->n_kv_heads, i % k->n_kv_heads, q);
      if (q >= k->n_candidates && !mask[q])
        return obc_fail(OBC_EFORMAT,
                        "%s: keep[%zu][%zu][%zu] is 0, but positions after the candidates "
                        "(%zu) are always kept",
                        path, i / k->n_kv_heads, i % k->n_kv_heads, q, k->n_candidates);
      if (q < k->n_candidates) k->n_kept[i] += mask[q];
    }
  }
  return OBC_OK;
}

/* The mask's counts against the budget attribute, which the reports quote:
 * uniform allocation keeps exactly budget candidates in every KV head,
 * AdaKV budget x n_kv_heads in every layer (evict/policy.h), pyramid the
 * layer's budget recomputed from budget_given, the window and the shape
 * (evict/preset.h) in every KV head. A mask that keeps nothing at all is no
 * policy's. */
static int check_budget(const EvictKeepSet *k, const char *path) {
  size_t G = k->n_kv_heads, total = 0;
  for (size_t i = 0; i < k->n_layers * G; i++) total += k->n_kept[i];
  if (!total)
    return obc_fail(OBC_EFORMAT, "%s: the keep mask keeps none of the %zu candidate positions",
                    path, k->n_candidates);
  for (size_t l = 0; l < k->n_layers; l++) {
    size_t layer = 0, pyramid = 0;
    if (k->policy.allocation == EVICT_ALLOC_PYRAMID &&
        evict_preset_pyramid_budget(&k->policy, k->n_candidates, k->window, k->n_layers, l,
                                    &pyramid))
      return obc_fail(OBC_EFORMAT, "%s: attribute budget_given '%s' is no budget", path,
                      k->policy.budget_text);
    for (size_t g = 0; g < G; g++) {
      size_t kept = k->n_kept[l * G + g];
      layer += kept;
      if (k->policy.allocation == EVICT_ALLOC_PYRAMID && kept != pyramid)
        return obc_fail(OBC_EFORMAT,
                        "%s: keep[%zu][%zu] keeps %zu candidates, but the pyramid allocation "
                        "of budget %s keeps %zu in every KV head of layer %zu",
                        path, l, g, kept, k->policy.budget_text, pyramid, l);
      if (k->policy.allocation == EVICT_ALLOC_UNIFORM && kept != k->budget)
        return obc_fail(OBC_EFORMAT,
                        "%s: attribute budget is %zu, but keep[%zu][%zu] keeps %zu candidates "
                        "(uniform allocation keeps the budget in every KV head)",
                        path, k->budget, l, g, kept);
    }
    if (k->policy.allocation == EVICT_ALLOC_ADAKV && layer != k->budget * G)
      return obc_fail(OBC_EFORMAT,
                      "%s: attribute budget is %zu, but layer %zu keeps %zu candidates (adakv "
                      "allocation keeps budget x %zu KV heads = %zu in every layer)",
                      path, k->budget, l, layer, G, k->budget * G);
  }
  return OBC_OK;
}

/* The query protocol: attribute protocol, or in files without it,
 * attribute mode: "aware", or "agnostic", which stands for agnostic's
 * kept set replayed with the question's K/V as captured
 * (agnostic-captured). Aware when both are missing. */
static int read_protocol(hid_t file, const char *path, bool schema_1, EvictPolicy *p) {
  char text[32] = "";
  int rc = read_str_attr(file, path, "protocol", schema_1, text, sizeof text);
  if (rc < 0) return rc;
  if (rc == 0) {
    for (int i = 0; i < EVICT_N_PROTOCOLS; i++)
      if (!strcmp(text, evict_protocol_name((EvictProtocol)i))) {
        p->protocol = (EvictProtocol)i;
        return OBC_OK;
      }
    char escaped[OBC_ESCAPED_SIZE(sizeof text)];
    return obc_fail(OBC_EFORMAT,
                    "%s: protocol '%s' (expected agnostic, aware or agnostic-captured)", path,
                    obc_text_escape(escaped, sizeof escaped, text, false));
  }
  int agnostic = 0;
  p->protocol = EVICT_PROTOCOL_AWARE;
  rc = read_choice_attr(file, path, schema_1, "mode", "aware", "agnostic", NULL, &agnostic);
  if (!rc && agnostic) p->protocol = EVICT_PROTOCOL_AGNOSTIC_CAPTURED;
  return rc;
}

/* The protected spans ("" or missing: none), each name checked. */
static int read_protect(hid_t file, const char *path, bool schema_1, EvictPolicy *p) {
  char text[EVICT_MAX_PROTECT * 64] = "";
  int rc = read_text_attr(file, path, schema_1, "protect", text, sizeof text);
  if (rc) return rc > 0 ? OBC_OK : rc;
  if (!text[0]) return OBC_OK;
  rc = evict_policy_set_protect(p, text);
  char escaped[OBC_ESCAPED_SIZE(200)];
  return rc ? obc_fail(OBC_EFORMAT, "%s: attribute protect '%s' is not a span list", path,
                       obc_text_escape(escaped, sizeof escaped, text, false))
            : OBC_OK;
}

/* The policy attributes (reports only), each checked. */
static int read_policy(hid_t file, const char *path, bool schema_1, const TraceMeta *meta,
                       EvictKeepSet *k) {
  EvictPolicy *p = &k->policy;
  evict_policy_default(p);
  int allocation = (int)p->allocation, rule = (int)EVICT_BUDGET_RULE_FLOOR;
  int rc = read_text_attr(file, path, schema_1, "score", p->score, sizeof p->score);
  if (!rc)
    rc =
        read_text_attr(file, path, schema_1, "budget_given", p->budget_text, sizeof p->budget_text);
  if (!rc)
    rc = read_choice_attr(file, path, schema_1, "allocation", "uniform", "adakv", "pyramid",
                          &allocation);
  /* files written before the attribute existed counted with the floor rule */
  if (!rc)
    rc = read_choice_attr(file, path, schema_1, "budget_rule", "floor", "kvpress", NULL, &rule);
  if (!rc) rc = read_protocol(file, path, schema_1, p);
  if (!rc) rc = read_protect(file, path, schema_1, p);
  if (!rc) rc = read_count_attr(file, path, "window", false, 0, meta->n_rows, &k->window);
  if (!rc) rc = read_count_attr(file, path, "recent", false, 0, k->n_prompt, &p->recent);
  if (!rc) rc = read_count_attr(file, path, "sinks", false, 0, k->n_prompt, &p->sinks);
  p->allocation = (EvictAllocation)allocation;
  p->budget_rule = (EvictBudgetRule)rule;
  return rc;
}

/* The protected spans against the trace and the mask: each a span of the
 * trace, each of its candidate positions kept in every KV head (protection
 * keeps them first, inside the budget). */
static int check_protect(const EvictKeepSet *k, const TraceMeta *meta, const char *path) {
  unsigned char *protect = NULL;
  if (evict_policy_protected(&k->policy, meta, path, &protect)) return OBC_EFORMAT;
  int rc = OBC_OK;
  for (size_t i = 0; protect && i < k->n_layers * k->n_kv_heads && !rc; i++)
    for (size_t q = 0; q < k->n_candidates && !rc; q++)
      if (protect[q] && !k->keep[i * k->n_prompt + q])
        rc = obc_fail(OBC_EFORMAT,
                      "%s: attribute protect names position %zu, but keep[%zu][%zu][%zu] is 0 "
                      "(protected positions are always kept)",
                      path, q, i / k->n_kv_heads, i % k->n_kv_heads, q);
  free(protect);
  return rc;
}

/* The budget attribute against budget_given and budget_rule: the count
 * evict_budget_count gives over the candidates, as every policy counted it
 * when evict wrote the file (protected positions take their share inside
 * it, so it does not change with them). */
static int check_budget_given(const EvictKeepSet *k, const char *path) {
  EvictPolicy p = k->policy;
  size_t tokens = 0;
  if (!p.budget_text[0]) return OBC_OK; /* files from before the attribute */
  char escaped[OBC_ESCAPED_SIZE(sizeof p.budget_text)];
  obc_text_escape(escaped, sizeof escaped, p.budget_text, false);
  if (evict_policy_set_budget(&p, k->policy.budget_text) ||
      evict_budget_count(&p, k->n_candidates, &tokens))
    return obc_fail(OBC_EFORMAT, "%s: attribute budget_given '%s' is no budget", path, escaped);
  if (tokens != k->budget)
    return obc_fail(OBC_EFORMAT,
                    "%s: attribute budget is %zu, but budget_given %s (%s rule) keeps %zu of the "
                    "%zu candidates",
                    path, k->budget, escaped, evict_budget_rule_name(p.budget_rule), tokens,
                    k->n_candidates);
  return OBC_OK;
}

static int read_keep(hid_t file, const char *path, const TraceMeta *meta, EvictKeepSet *out) {
  bool schema_1 = false;
  int rc = check_schema(file, path, &schema_1);
  if (rc) return rc;
  hid_t set = H5Dopen2(file, "keep", H5P_DEFAULT);
  rc = check_keep_dataset(set, path, meta);
  if (!rc)
    rc = check_trace_hash(file, path, schema_1, meta, out->trace_hash, sizeof out->trace_hash);
  out->n_layers = meta->model.n_layers;
  out->n_kv_heads = meta->model.n_kv_heads;
  out->n_prompt = meta->n_prompt;
  if (!rc)
    rc = read_count_attr(file, path, "n_candidates", true, 0, out->n_prompt, &out->n_candidates);
  if (!rc) rc = read_count_attr(file, path, "budget", true, 1, out->n_candidates, &out->budget);
  if (!rc) {
    out->keep = obc_malloc(out->n_layers * out->n_kv_heads * out->n_prompt, "kept positions");
    out->n_kept = obc_calloc(out->n_layers * out->n_kv_heads, sizeof(size_t), "kept counts");
    if (!out->keep || !out->n_kept) rc = OBC_ENOMEM;
  }
  if (!rc && H5Dread(set, H5T_NATIVE_SCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->keep) < 0)
    rc = obc_fail(OBC_EFORMAT, "%s: cannot read dataset keep (damaged: checksum mismatch?)", path);
  if (!rc) rc = check_mask(out, path);
  if (!rc) rc = read_policy(file, path, schema_1, meta, out);
  if (!rc) rc = check_budget(out, path);
  if (!rc) rc = check_budget_given(out, path);
  if (!rc) rc = check_protect(out, meta, path);
  if (set >= 0) H5Dclose(set);
  return rc;
}

/* In the checksummed format: whether the schema attribute is a
 * variable-length string (schema 1, whose strings live in the unchecksummed
 * global heap: read in a child), and the raw check of the keep dataset's
 * object header before HDF5 parses it. */
static int check_checksummed(hid_t file, const char *path, const TraceFileFormat *format,
                             bool *schema_1) {
  *schema_1 = false;
  if (H5Aexists(file, "schema") > 0) {
    hid_t attr = H5Aopen(file, "schema", H5P_DEFAULT);
    hid_t type = attr >= 0 ? H5Aget_type(attr) : -1;
    *schema_1 = type >= 0 && H5Tis_variable_str(type) > 0;
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
  }
  H5L_info_t info;
  if (*schema_1 || H5Lexists(file, "keep", H5P_DEFAULT) <= 0 ||
      H5Lget_info(file, "keep", &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
    return OBC_OK; /* read_keep says what is missing */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return obc_fail(OBC_EIO, "%s: cannot open: %s", path, strerror(errno));
  int rc = trace_format_check_header(path, fd, format, info.u.address, "keep");
  close(fd);
  return rc;
}

int evict_keep_read_direct(const char *path, const TraceMeta *meta, const TraceFileFormat *format,
                           EvictKeepSet *out, bool *schema_1) {
  memset(out, 0, sizeof *out);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0)
    return obc_fail(OBC_EIO,
                    "%s: cannot open as HDF5 (expected a keep file of "
                    "obcache evict)",
                    path);
  *schema_1 = false;
  int rc = format && format->checksummed ? check_checksummed(file, path, format, schema_1) : 0;
  if (!rc && !*schema_1) rc = read_keep(file, path, meta, out);
  H5Fclose(file);
  if (rc) evict_keep_set_free(out);
  return rc;
}

int evict_keep_read(const char *path, const TraceMeta *meta, EvictKeepSet *out) {
  memset(out, 0, sizeof *out);
  TraceFileFormat format;
  int rc = trace_format_probe(path, "a keep file of obcache evict", &format);
  if (rc) return rc;
  bool schema_1 = !format.checksummed;
  if (format.checksummed) rc = evict_keep_read_direct(path, meta, &format, out, &schema_1);
  if (!rc && schema_1) rc = evict_keep_read_legacy(path, meta, out);
  if (rc) return rc;
  /* A schema-1 trace, or a keep file from before traces had a hash. */
  if (!out->trace_hash[0] || !meta->content_hash[0])
    fprintf(stderr,
            "obcache: warning: %s: cannot check that it was made for this trace (no content "
            "hash in %s); checked its shape only\n",
            path,
            out->trace_hash[0]      ? "the trace"
            : meta->content_hash[0] ? "the keep file"
                                    : "either");
  return OBC_OK;
}
