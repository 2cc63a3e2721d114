/* `obcache info TRACE`: a readable summary of a trace (who made it, the
 * model, the positions and captured rows, the spans, the datasets and their
 * size on disk). Opening the trace validates it, so a summary also means the
 * trace is well-formed; `obcache verify` checks the numbers. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_text.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "traces/trace.h"
#include "traces/trace_h5.h"

static const char *usage =
    "usage: obcache info [options] TRACE.h5\n"
    "\n"
    "Print a summary of a trace: producer, model configuration, storage dtype,\n"
    "positions, captured rows, decode steps, spans, datasets with their size on\n"
    "disk, and the complete flag. Fails with one line if the trace is malformed.\n";

static void print_bytes(const char *label, double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) bytes /= 1024.0, u++;
  printf("%s%.1f %s", label, bytes, units[u]);
}

/* Prints text on one line in quotes, escaped (obc_text_escape), cut at
 * max bytes (at most QUOTED_MAX). */
enum { QUOTED_MAX = 200 };
static void print_quoted(const char *text, size_t max) {
  char cut[QUOTED_MAX + 1], escaped[OBC_ESCAPED_SIZE(QUOTED_MAX)];
  if (max > QUOTED_MAX) max = QUOTED_MAX;
  snprintf(cut, max + 1, "%s", text);
  printf("\"%s\"%s", obc_text_escape(escaped, sizeof escaped, cut, true),
         strlen(text) > max ? "..." : "");
}

/* Per dataset name (K, V, ...): total bytes stored and logical size. */
static void print_datasets(TraceReader *reader, const TraceMeta *m) {
  const char *names[] = {"K",        "V",         "Q",         "O",          "lse",   "A",
                         "col_attn", "col_obc_v", "col_obc_k", "col_obc_vk", "q_sum", "q_outer"};
  const char *shapes[] = {"(n_kv_heads, n_positions, head_dim)",
                          "(n_kv_heads, n_positions, head_dim)",
                          "(n_heads, n_rows, head_dim)",
                          "(n_heads, n_rows, head_dim)",
                          "(n_heads, n_rows)",
                          "(n_heads, n_rows, n_positions)",
                          "(2, n_heads, n_prompt)",
                          "(2, n_heads, n_prompt)",
                          "(2, n_heads, n_prompt)",
                          "(2, n_heads, n_prompt)",
                          "(2, n_heads, head_dim)",
                          "(2, n_heads, head_dim^2)"};
  printf("datasets   per layer /layers/NNN/...; stored sizes summed over %zu layers\n",
         m->model.n_layers);
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    if ((k == 5 && !m->has_attn) || (k > 5 && k < 10 && !m->has_column_sums) ||
        (k >= 10 && !m->has_query_stats))
      continue;
    double stored = 0.0, logical = 0.0;
    char type[16] = "?";
    for (size_t layer = 0; layer < m->model.n_layers; layer++) {
      char name[64];
      trace_h5_layer_dataset(name, sizeof name, layer, names[k]);
      double layer_stored = 0.0, layer_logical = 0.0;
      size_t element = 0;
      if (trace_dataset_sizes(reader, name, &layer_stored, &layer_logical, &element)) continue;
      stored += layer_stored;
      logical += layer_logical;
      snprintf(type, sizeof type, "f%zu", 8 * element);
    }
    printf("  %-10s %-3s %-38s", names[k], type, shapes[k]);
    print_bytes(" ", stored);
    printf(" (%.0f%% of raw)\n", logical > 0 ? 100.0 * stored / logical : 0.0);
  }
  printf("  row_positions (%zu) i64%s%s\n", m->n_rows,
         m->tokens ? ", tokens (n_positions) i32" : "",
         m->has_logits ? ", logits (n_decode, vocab_size) f32" : "");
  if (m->has_column_sums)
    printf(
        "  column sums over every prompt row: [0] agnostic, rows [0, %zu) (before the "
        "question), [1] all rows [0, %zu); column_counts (2, n_prompt) i64\n",
        m->agnostic_rows, m->n_prompt);
  else
    printf("  no column sums (obcache capture records them unless --no-column-sums)\n");
  if (m->has_query_stats)
    printf(
        "  pre-RoPE query statistics over prompt rows from %d on: [0] agnostic, [1] all "
        "rows; query_counts (2) i64, rope_inv_freq (head_dim / 2) f64\n",
        TRACE_QSTATS_FIRST_ROW);
}

static void print_spans(const TraceMeta *m, const Tokenizer *tokenizer) {
  if (!m->n_spans) {
    printf("spans      none\n");
    return;
  }
  for (size_t i = 0; i < m->n_spans; i++) {
    const TraceSpan *s = &m->spans[i];
    char name[OBC_ESCAPED_SIZE(sizeof s->name)];
    printf("%s %-12s [%lld, %lld)  %lld tokens", i ? "          " : "spans     ",
           obc_text_escape(name, sizeof name, s->name, false), (long long)s->begin,
           (long long)s->end, (long long)(s->end - s->begin));
    if (m->tokens && tokenizer) {
      char *text = NULL;
      if (!tokenizer_decode(tokenizer, m->tokens + s->begin, (size_t)(s->end - s->begin), &text)) {
        printf("  ");
        print_quoted(text, 160);
        free(text);
      }
    } else if (m->tokens) {
      printf("  ids");
      for (int64_t p = s->begin; p < s->end && p < s->begin + 8; p++) printf(" %d", m->tokens[p]);
      if (s->end - s->begin > 8) printf(" ...");
    }
    putchar('\n');
  }
}

static void print_rows(const TraceMeta *m) {
  size_t first_decode = 0;
  size_t decode = trace_meta_decode_rows(m, &first_decode);
  size_t window = trace_meta_window_rows(m);
  printf("rows       %zu captured: %zu prompt rows", m->n_rows, first_decode);
  if (first_decode)
    printf(" (positions %lld..%lld, contiguous window of %zu ending at the last prompt position)",
           (long long)m->row_positions[0], (long long)m->row_positions[first_decode - 1], window);
  printf(", %zu decode rows\n", decode);
  printf("decode     %zu steps (positions %zu..%zu)\n", m->n_decode, m->n_prompt,
         m->n_positions ? m->n_positions - 1 : 0);
}

static void print_summary(const char *path, TraceReader *reader, const Tokenizer *tokenizer) {
  const TraceMeta *m = trace_meta(reader);
  const TraceModel *c = &m->model;
  /* Every string of the trace, escaped: the file may hold ESC sequences or
   * newlines. */
  char tool[OBC_ESCAPED_SIZE(sizeof m->tool_version)], created[OBC_ESCAPED_SIZE(sizeof m->created)];
  char producer[OBC_ESCAPED_SIZE(sizeof m->producer)], name[OBC_ESCAPED_SIZE(sizeof c->name)];
  char arch[OBC_ESCAPED_SIZE(sizeof c->architecture)];
  char layout[OBC_ESCAPED_SIZE(sizeof c->rope_layout)];
  char scaling[OBC_ESCAPED_SIZE(sizeof c->rope_scaling)];
  obc_text_escape(tool, sizeof tool, m->tool_version, false);
  obc_text_escape(created, sizeof created, m->created, false);
  obc_text_escape(producer, sizeof producer, m->producer, false);
  obc_text_escape(name, sizeof name, c->name, false);
  obc_text_escape(arch, sizeof arch, c->architecture, false);
  obc_text_escape(layout, sizeof layout, c->rope_layout[0] ? c->rope_layout : "unrecorded", false);
  obc_text_escape(scaling, sizeof scaling, c->rope_scaling, false);
  struct stat st;
  printf("trace      %s", path);
  if (stat(path, &st) == 0) print_bytes(" (", (double)st.st_size), printf(" on disk)");
  printf("\nschema     version %d, written by obcache %s at %s; complete: %s\n", m->schema_version,
         tool, created, m->complete ? "yes" : "no");
  printf("content    hash %s\n",
         m->content_hash[0] ? m->content_hash : "none (schema 1 traces record none)");
  printf("producer   %s\n", producer);
  printf("model      %s (%s): %zu layers, %zu heads, %zu KV heads, head dim %zu, vocab %zu\n", name,
         arch, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim, c->vocab_size);
  printf(
      "           rope theta %g, layout %s, scaling %s (factor %g, low %g, high %g, original "
      "context %zu), attn_scale %.6g\n",
      c->rope_theta, layout, scaling, c->rope_factor, c->rope_low_freq_factor,
      c->rope_high_freq_factor, c->rope_original_context, c->attn_scale);
  printf("dtype      %s\n", m->dtype);
  printf("positions  %zu (prompt %zu + decode %zu)\n", m->n_positions, m->n_prompt, m->n_decode);
  print_rows(m);
  printf("needle     %s\n", m->needle_found < 0 ? "not applicable"
                            : m->needle_found   ? "found"
                                                : "not found");
  print_spans(m, tokenizer);
  if (m->prompt_text) printf("prompt     %zu bytes of text\n", strlen(m->prompt_text));
  if (m->generated_text) {
    printf("generated  ");
    print_quoted(m->generated_text, 200);
    putchar('\n');
  }
  print_datasets(reader, m);
}

int cmd_info(int argc, char **argv) {
  const char *path = NULL, *tokenizer_path = NULL;
  const ObcOption options[] = {
      OBC_OPT_TEXT(
          "--tokenizer", "GGUF", &tokenizer_path,
          "decode the span tokens with this model's tokenizer (the trace stores token ids, not "
          "their text)"),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("info", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
    return OBC_OK;
  }
  if (args.n_positional > 1)
    return obc_fail(OBC_EINVAL, "%s: only one trace at a time (see obcache info --help)",
                    args.positional[1]);
  if (args.n_positional) path = args.positional[0];
  if (!path) return obc_fail(OBC_EINVAL, "no trace given (see obcache info --help)");
  TraceReader *reader = NULL;
  rc = trace_open(path, &reader);
  if (rc) return rc;
  GgufFile *gguf = NULL;
  Tokenizer *tokenizer = NULL;
  if (tokenizer_path) {
    rc = gguf_open(tokenizer_path, &gguf);
    if (!rc) rc = tokenizer_from_gguf(gguf, tokenizer_path, &tokenizer);
  }
  if (!rc) print_summary(path, reader, tokenizer);
  if (tokenizer) tokenizer_free(tokenizer);
  if (gguf) gguf_close(gguf);
  trace_close(reader);
  return rc;
}
