/* `obcache synth`: writes a synthetic trace (see traces/synth.h) of a chosen
 * shape from a seed. The defaults make a tiny trace for quick checks; --shape
 * fills in the dimensions of a real model. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_options.h"
#include "common/obc_thread.h"
#include "traces/synth.h"
#include "traces/trace.h"

static void synth_usage(FILE *out, const ObcOptionList *list) {
  fprintf(out,
          "usage: obcache synth [options] -o TRACE.h5\n"
          "\n"
          "Write a synthetic attention trace with realistic structure: an attention sink at\n"
          "position 0, local attention, a planted needle span that the question and decode\n"
          "queries retrieve, log-normal value norms. O, lse (and A) are exact.\n"
          "\n"
          "options (defaults make a tiny trace):\n");
  obc_options_print_help(out, list, 1);
}

static int parse_shape(void *target, const char *option, const char *value) {
  (void)option;
  return synth_options_shape(target, value);
}

/* Default --max-bytes: 16 GiB, twice the largest named shape (--shape
 * llama8b, about 8.7 GB in f32 without A), so a typo in --layers or --prompt
 * is refused instead of filling the disk. */
#define OBC_SYNTH_MAX_BYTES ((uint64_t)16 << 30)

static int parse_args(int argc, char **argv, SynthOptions *o, const char **output,
                      uint64_t *max_bytes, bool *help) {
  size_t threads = 0;
  const ObcOption options[] = {
      {"--output", "-o", "PATH", "trace to write (required; written under a temporary name)", NULL,
       OBC_OPTION_TEXT, output, NULL, NULL},
      {"--shape", NULL, "NAME",
       "model dimensions of smollm2 (30 layers, 9 heads, 3 KV heads, d=64) or llama8b (32 "
       "layers, 32 heads, 8 KV heads, d=128, prompt 32768, rows 128, decode 16); later options "
       "override",
       NULL, OBC_OPTION_CUSTOM, o, parse_shape, NULL},
      {"--layers", NULL, "N", "layers", "2", OBC_OPTION_SIZE, &o->n_layers, NULL, NULL},
      {"--heads", NULL, "N", "query heads", "4", OBC_OPTION_SIZE, &o->n_heads, NULL, NULL},
      {"--kv-heads", NULL, "N", "KV heads, must divide --heads", "2", OBC_OPTION_SIZE,
       &o->n_kv_heads, NULL, NULL},
      {"--head-dim", NULL, "N", "head dimension d", "16", OBC_OPTION_SIZE, &o->head_dim, NULL,
       NULL},
      {"--prompt", NULL, "S", "prompt positions s", "64", OBC_OPTION_SIZE, &o->n_prompt, NULL,
       NULL},
      {"--rows", NULL, "R", "captured prompt rows: the last R prompt positions", "16",
       OBC_OPTION_SIZE, &o->n_prompt_rows, NULL, NULL},
      {"--decode", NULL, "T", "decode steps, all captured", "4", OBC_OPTION_SIZE, &o->n_decode,
       NULL, NULL},
      {"--vocab", NULL, "V", "also store random tokens and decode logits of V entries", "0: none",
       OBC_OPTION_SIZE, &o->vocab_size, NULL, NULL},
      {"--seed", NULL, "N", "random seed; same seed, same trace", "1", OBC_OPTION_UINT64, &o->seed,
       NULL, NULL},
      {"--needle-depth", NULL, "PCT", "needle start, percent of the haystack", "50",
       OBC_OPTION_DOUBLE, &o->needle_depth, NULL, NULL},
      {"--needle-length", NULL, "N", "needle tokens", "16", OBC_OPTION_SIZE, &o->needle_length,
       NULL, NULL},
      {"--question-length", NULL, "N", "last prompt positions that ask for the needle",
       "0: s/16, 1..8", OBC_OPTION_SIZE, &o->question_length, NULL, NULL},
      {"--store-attn", NULL, NULL, "also store the attention rows A (n_heads, rows, positions)",
       NULL, OBC_OPTION_FLAG, &o->store_attn, NULL, NULL},
      {"--column-sums", NULL, NULL,
       "also store the column sums of every prompt row (schema 3; needs --rows equal to "
       "--prompt)",
       NULL, OBC_OPTION_FLAG, &o->store_column_sums, NULL, NULL},
      {"--dtype", NULL, "f32|f16", "storage precision of the tensors", "f32", OBC_OPTION_CUSTOM,
       &o->store_f16, trace_parse_dtype, NULL},
      {"--compress", NULL, "0-9", "deflate level with byte shuffle", "0: none", OBC_OPTION_CUSTOM,
       &o->compression_level, trace_parse_compression, NULL},
      {"--threads", NULL, "N", "OpenMP threads; the trace does not depend on it", "0: all cores",
       OBC_OPTION_SIZE, &threads, NULL, NULL},
      {"--max-bytes", NULL, "N",
       "refuse a trace of more than N bytes (uncompressed size, computed before writing; the "
       "free space of the output's folder is checked too)",
       "17179869184 = 16 GiB", OBC_OPTION_UINT64, max_bytes, NULL, NULL},
      {"--help", "-h", NULL, "this help", NULL, OBC_OPTION_HELP, NULL, NULL, NULL},
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("synth", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    synth_usage(stdout, &list);
    *help = true;
    return OBC_OK;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache synth --help)",
                    args.positional[0]);
  obc_set_threads(threads);
  return OBC_OK;
}

int cmd_synth(int argc, char **argv) {
  SynthOptions options;
  synth_options_default(&options);
  const char *output = NULL;
  uint64_t max_bytes = OBC_SYNTH_MAX_BYTES, bytes = 0;
  bool help = false;
  int rc = parse_args(argc, argv, &options, &output, &max_bytes, &help);
  if (rc || help) return rc;
  if (!output)
    return obc_fail(OBC_EINVAL, "no output: give -o TRACE.h5 (see obcache synth --help)");
  if ((rc = synth_trace_bytes(&options, output, &bytes))) return rc;
  if (bytes > max_bytes)
    return obc_fail(OBC_EINVAL,
                    "%s: the trace would take %" PRIu64 " bytes, more than --max-bytes %" PRIu64
                    " (raise it to write it)",
                    output, bytes, max_bytes);
  if ((rc = obc_file_check_space(output, (double)bytes, "the trace"))) return rc;
  return synth_generate(&options, output);
}
