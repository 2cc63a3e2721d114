/* Internal to traces/ (not part of the trace.h contract): the content hash
 * that is a trace's identity (traces/SCHEMA.md "Content hash"). Every tensor
 * slab and the logits are hashed with 64-bit FNV-1a over their stored bytes;
 * those hashes and the trace's shape, row positions, tokens, texts and spans
 * then form a text manifest in a fixed order, and the hash of the manifest is
 * the content hash. The order depends only on the trace's coordinates, not on
 * the order the slabs were written or read, nor on the thread count. */
#ifndef OBC_TRACE_HASH_H
#define OBC_TRACE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "common/obc_hash.h" /* obc_hash_bytes: FNV-1a 64 */
#include "traces/trace.h"


/* The per-layer datasets, in manifest order. A is last and only present when
 * the trace has attention rows. */
enum {
  OBC_TRACE_SLAB_K,
  OBC_TRACE_SLAB_V,
  OBC_TRACE_SLAB_Q,
  OBC_TRACE_SLAB_O,
  OBC_TRACE_SLAB_LSE,
  OBC_TRACE_SLAB_A,
  OBC_TRACE_SLAB_KINDS
};

/* Name ("K", "lse", ...) and heads (n_kv_heads for K and V, else n_heads) of
 * a slab kind. */
const char *trace_hash_slab_name(int kind);
size_t trace_hash_slab_heads(const TraceMeta *meta, int kind);
/* Slabs per trace, and the index of (layer, kind, head) in the array of slab
 * hashes trace_hash_manifest takes: layer-major, then kind, then head. */
size_t trace_hash_slab_count(const TraceMeta *meta);
size_t trace_hash_slab_index(const TraceMeta *meta, size_t layer, int kind, size_t head);

/* The column sums of a schema-3 trace (trace_read_column_sums): four
 * datasets per layer, each (TRACE_ROWS_VARIANTS, n_heads, n_prompt) f32,
 * hashed whole; their hashes follow the slabs' in the same array, layer-major,
 * then the hash of /column_counts. */
enum {
  OBC_TRACE_SUMS_ATTN,
  OBC_TRACE_SUMS_OBC_V,
  OBC_TRACE_SUMS_OBC_K,
  OBC_TRACE_SUMS_OBC_VK,
  OBC_TRACE_SUMS_KINDS
};
const char *trace_hash_sums_name(int kind);
size_t trace_hash_sums_index(const TraceMeta *meta, size_t layer, int kind);
size_t trace_hash_counts_index(const TraceMeta *meta);
/* The query statistics (trace_read_query_stats), after the column sums:
 * per layer q_sum then q_outer, hashed whole as stored (f64), then
 * /query_counts and /rope_inv_freq (layer n_layers, kinds 0 and 1). */
enum { OBC_TRACE_QSTATS_SUM, OBC_TRACE_QSTATS_OUTER, OBC_TRACE_QSTATS_KINDS };
size_t trace_hash_qstats_index(const TraceMeta *meta, size_t layer, int kind);

/* The content hash of a trace: meta (shape, row positions, tokens, texts,
 * spans), the hash of the stored logits (ignored without logits) and the
 * slab hashes (trace_hash_slab_count of them). Writes 16 lower-case hex
 * digits and a NUL into out. */
void trace_hash_manifest(const TraceMeta *meta, uint64_t logits_hash,
                         const uint64_t *slab_hashes /* (trace_hash_slab_count) */, char out[17]);

#endif
