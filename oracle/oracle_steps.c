/* Parsing and naming of decode-step ranges (oracle/oracle_steps.h). */
#include "oracle/oracle_steps.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/obc_error.h"

/* A positive decimal integer filling text[0..n). */
static bool parse_step(const char *text, size_t n, size_t *out) {
  if (n == 0 || n > 9) return false;
  size_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)text[i])) return false;
    v = v * 10 + (size_t)(text[i] - '0');
  }
  *out = v;
  return v >= 1;
}

int oracle_steps_parse_option(void *target, const char *option, const char *text) {
  return oracle_steps_parse(option, text, target);
}

int oracle_steps_parse(const char *option, const char *text, OracleSteps *out) {
  const char *spec = text;
  if (!strncmp(spec, "oracle@", 7))
    spec += 7;
  else if (!strcmp(spec, "oracle1"))
    spec = "1";
  else if (!strcmp(spec, "oracleT"))
    spec = "T";
  if (!strcmp(spec, "T")) {
    *out = ORACLE_STEPS_ALL;
    return OBC_OK;
  }
  const char *dash = strchr(spec, '-');
  size_t a = 0, b = 0;
  bool ok = dash ? parse_step(spec, (size_t)(dash - spec), &a) &&
                       parse_step(dash + 1, strlen(dash + 1), &b) && a <= b
                 : parse_step(spec, strlen(spec), &a) && (b = a, true);
  if (!ok)
    return obc_fail(OBC_EINVAL,
                    "%s %s: expected 1 (the first decode step), T (every captured step), N "
                    "(step N alone) or a-b (steps a..b, 1-based, a <= b)",
                    option, text);
  *out = (OracleSteps){a, b, false};
  return OBC_OK;
}

int oracle_steps_resolve(const OracleSteps *steps, size_t n_decode, const char *trace,
                         size_t *first_step, size_t *n_steps) {
  char label[48];
  oracle_steps_label(steps, label, sizeof label);
  if (n_decode == 0 || (!steps->all && steps->last > n_decode))
    return obc_fail(OBC_EINVAL,
                    "%s%soracle@%s needs decode steps beyond the %zu captured (expected a range "
                    "within 1-%zu; hint: capture more --decode steps)",
                    trace ? trace : "", trace ? ": " : "", label, n_decode, n_decode);
  *first_step = steps->all ? 1 : steps->first;
  *n_steps = steps->all ? n_decode : steps->last - steps->first + 1;
  return OBC_OK;
}

void oracle_steps_label(const OracleSteps *steps, char *out, size_t size) {
  if (steps->all)
    snprintf(out, size, "T");
  else if (steps->first == 1 && steps->last == 1)
    snprintf(out, size, "1");
  else
    snprintf(out, size, "%zu-%zu", steps->first, steps->last);
}

void oracle_steps_name(const char *prefix, const OracleSteps *steps, char *out, size_t size) {
  char label[48];
  oracle_steps_label(steps, label, sizeof label);
  snprintf(out, size, "%s@%s", prefix, label);
}

bool oracle_steps_equal(const OracleSteps *a, const OracleSteps *b) {
  if (a->all || b->all) return a->all == b->all;
  return a->first == b->first && a->last == b->last;
}
