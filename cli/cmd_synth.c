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

static const char *usage =
    "usage: obcache synth [options] -o TRACE.h5\n"
    "\n"
    "Write a synthetic attention trace with realistic structure: an attention sink at\n"
    "position 0, local attention, a planted needle span that the question and decode\n"
    "queries retrieve, log-normal value norms. O, lse (and A) are exact.\n"
    "The defaults make a tiny trace.\n";

static int parse_shape(void *target, const char *option, const char *value) {
  (void)option;
  return synth_options_shape(target, value);
}

/* Default --max-bytes: 16 GiB, twice the largest named shape (--shape
 * llama8b, about 8.7 GB in f32 without A), so a typo in --layers or --length
 * is refused instead of filling the disk. */
#define OBC_SYNTH_MAX_BYTES ((uint64_t)16 << 30)

static int parse_args(int argc, char **argv, SynthOptions *o, const char **output,
                      uint64_t *max_bytes, bool *help) {
  size_t threads = 0;
  const ObcOption options[] = {
      OBC_OPT_TEXT("--output", "PATH", output,
                   "trace to write (required; written under a temporary name)", .alias = "-o"),
      OBC_OPT_CUSTOM(
          "--shape", "NAME", o, parse_shape,
          "model dimensions of smollm2 (30 layers, 9 heads, 3 KV heads, d=64) or llama8b (32 "
          "layers, 32 heads, 8 KV heads, d=128, prompt 32768, rows 128, decode 16); later options "
          "override"),
      OBC_OPT_SIZE("--layers", "N", &o->n_layers, "layers"),
      OBC_OPT_SIZE("--heads", "N", &o->n_heads, "query heads"),
      OBC_OPT_SIZE("--kv-heads", "N", &o->n_kv_heads, "KV heads, must divide --heads"),
      OBC_OPT_SIZE("--head-dim", "N", &o->head_dim, "head dimension d"),
      OBC_OPT_SIZE("--length", "N", &o->n_prompt, "prompt positions s"),
      OBC_OPT_SIZE("--prompt", "N", &o->n_prompt, NULL, .renamed = "--length"),
      OBC_OPT_SIZE("--rows", "R", &o->n_prompt_rows,
                   "captured prompt rows: the last R prompt positions"),
      OBC_OPT_SIZE("--decode", "T", &o->n_decode, "decode steps, all captured"),
      OBC_OPT_SIZE("--vocab", "V", &o->vocab_size,
                   "also store random tokens and decode logits of V entries",
                   .default_text = "0: none"),
      OBC_OPT_UINT64("--seed", "N", &o->seed, "random seed; same seed, same trace"),
      OBC_OPT_DOUBLE("--needle-depth", "PCT", &o->needle_depth,
                     "needle start, percent of the haystack"),
      OBC_OPT_SIZE("--needle-length", "N", &o->needle_length, "needle tokens"),
      OBC_OPT_SIZE("--question-length", "N", &o->question_length,
                   "last prompt positions that ask for the needle",
                   .default_text = "0: s/16, 1..8"),
      OBC_OPT_FLAG("--store-attn", &o->store_attn,
                   "also store the attention rows A (n_heads, rows, positions)"),
      OBC_OPT_FLAG(
          "--column-sums", &o->store_column_sums,
          "also store the column sums of every prompt row (schema 3; needs --rows equal to "
          "--length)"),
      OBC_OPT_CUSTOM("--dtype", "f32|f16", &o->store_f16, trace_parse_dtype,
                     "storage precision of the tensors", .show = trace_show_dtype),
      OBC_OPT_CUSTOM("--compress", "0-9", &o->compression_level, trace_parse_compression,
                     "deflate level with byte shuffle", .show = obc_option_show_int),
      OBC_OPT_SIZE("--threads", "N", &threads, "OpenMP threads; the trace does not depend on it",
                   .default_text = "all cores"),
      OBC_OPT_UINT64(
          "--max-bytes", "N", max_bytes,
          "refuse a trace of more than N bytes (uncompressed size, computed before writing; the "
          "free space of the output's folder is checked too)"),
  };
  const ObcOptionList list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int rc = obc_options_parse("synth", &list, 1, argc, argv, &args);
  if (rc) return rc;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &list, 1);
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
