/* Batched decoding on the CPU (docs/SCIENCE.md, "Batched replay"): B
 * sequences that share the prompt cache [0, s) of one Runtime advance one
 * token each per call. Each sequence has its own eviction marks over the
 * prompt (per layer and KV head, as runtime_set_kept) and its own K/V rows for
 * the tokens it generated; the new token of every sequence sits at position
 * s + t after t calls. Per call, every weight product is one GEMM of B rows
 * (the weights are read once for all sequences), and attention per (layer,
 * KV head) is a GEMM of the sequences' queries against the shared prompt keys
 * plus each sequence's own tail. The results equal B separate Runtimes with
 * the same marks (runtime_set_kept, runtime_forward one token at a time) up
 * to the rounding of a different summation order. */
#ifndef OBC_RUNTIME_BATCH_H
#define OBC_RUNTIME_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

typedef struct RuntimeBatch RuntimeBatch;

/* Bytes of batch state per sequence for a runtime at its current position s
 * and max_steps tokens per sequence (marks, own K/V rows, activations,
 * logits); what runtime_batch_create allocates is about max_seqs times this. */
size_t runtime_batch_bytes_per_seq(const Runtime *runtime, size_t max_steps);

/* A batch of up to max_seqs sequences of at most max_steps tokens each over
 * the prompt [0, s) of runtime, s = runtime_position(runtime) now. The
 * runtime must outlive the batch; the rows [0, s) of its host cache are read,
 * never written, and its own eviction marks are not used. The batch computes
 * on the CPU whatever the runtime's backend. */
int runtime_batch_create(Runtime *runtime, size_t max_seqs, size_t max_steps, RuntimeBatch **out);
void runtime_batch_free(RuntimeBatch *batch);

/* Starts n_seqs (<= max_seqs) sequences with no tokens and every prompt
 * position kept. */
int runtime_batch_reset(RuntimeBatch *batch, size_t n_seqs);
/* Sets the marks of sequence seq over prompt positions [0, n) of (layer,
 * kv_head) from a keep mask, as runtime_set_kept does; n must be <= s. */
int runtime_batch_set_kept(RuntimeBatch *batch, size_t seq, size_t layer, size_t kv_head,
                           const unsigned char *keep /* (n) */, size_t n);
/* Runs one token per sequence (tokens[b] for sequence b) at position s + t,
 * t = tokens run since the reset, and writes the next-token logits of every
 * sequence (logits NULL: none, the LM head is skipped, for tokens whose
 * successor is known). Fails (one-line message) beyond max_steps or on a token id
 * outside the vocabulary; the batch is then unchanged. */
int runtime_batch_forward(RuntimeBatch *batch, const int32_t *tokens /* (n_seqs) */,
                          float *logits /* (n_seqs, vocab_size) or NULL */);

size_t runtime_batch_max_seqs(const RuntimeBatch *batch);
size_t runtime_batch_steps(const RuntimeBatch *batch); /* tokens run since the reset */

#endif
