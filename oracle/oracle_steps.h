/* Which decode steps an oracle (and the decode_attn score) sums over, as the
 * user writes it (`--oracle 1 | T | N | a-b`) and as outputs name it
 * (`oracle@1`, `oracle@T`, `oracle@a-b`); docs/SCIENCE.md, "The oracle".
 * One parser and one naming function serve every command, so `obcache
 * analyze`, `evict` and `replay --sweep` agree on what a name means. */
#ifndef OBC_ORACLE_STEPS_H
#define OBC_ORACLE_STEPS_H

#include <stdbool.h>
#include <stddef.h>

/* Decode steps first..last, 1-based and inclusive; all = every captured step
 * (first and last are then 1 and 0 until resolved). */
typedef struct {
  size_t first, last;
  bool all;
} OracleSteps;

#define ORACLE_STEPS_ONE ((OracleSteps){1, 1, false})
#define ORACLE_STEPS_ALL ((OracleSteps){1, 0, true})

/* "1", "T", "N" (step N alone, = "N-N") or "a-b" (1 <= a <= b); a leading
 * "oracle@" is accepted, and so are "oracle1" / "oracleT" (= "1" / "T"),
 * the names some report.json files carry.
 * OBC_EINVAL with a one-line message naming `option` otherwise. */
int oracle_steps_parse(const char *option, const char *text, OracleSteps *out);
/* The same as an option parser (common/obc_options.h): target is an OracleSteps. */
int oracle_steps_parse_option(void *target, const char *option, const char *text);

/* The steps against a trace with n_decode captured decode steps: *first_step
 * (1-based) and *n_steps. OBC_EINVAL naming the trace (when not NULL; else
 * the caller adds it) when the range goes beyond the captured steps. */
int oracle_steps_resolve(const OracleSteps *steps, size_t n_decode, const char *trace,
                         size_t *first_step, size_t *n_steps);

/* "T", "1", "a-b" (a single step N other than 1 is "N-N"); out: >= 48 bytes. */
void oracle_steps_label(const OracleSteps *steps, char *out, size_t size);

/* prefix + "@" + label: "oracle@T", "decode_attn@3-9". */
void oracle_steps_name(const char *prefix, const OracleSteps *steps, char *out, size_t size);

bool oracle_steps_equal(const OracleSteps *a, const OracleSteps *b);

#endif
