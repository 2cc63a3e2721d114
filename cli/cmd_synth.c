/* `obcache synth`: writes a synthetic trace (see traces/synth.h) of a chosen
 * shape from a seed. The defaults make a tiny trace for quick checks; --shape
 * fills in the dimensions of a real model. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_cli.h"
#include "common/obc_error.h"
#include "traces/synth.h"

static void synth_usage(FILE *out) {
  fprintf(out,
          "usage: obcache synth [options] -o TRACE.h5\n"
          "\n"
          "Write a synthetic attention trace with realistic structure: an attention sink at\n"
          "position 0, local attention, a planted needle span that the question and decode\n"
          "queries retrieve, log-normal value norms. O, lse (and A) are exact.\n"
          "\n"
          "options (defaults make a tiny trace):\n"
          "  -o, --output PATH      trace to write (required; written under a temporary name)\n"
          "  --shape NAME           model dimensions of smollm2 (30 layers, 9 heads, 3 KV heads,\n"
          "                         d=64) or llama8b (32 layers, 32 heads, 8 KV heads, d=128,\n"
          "                         prompt 32768, rows 128, decode 16); later options override\n"
          "  --layers N             layers (2)\n"
          "  --heads N              query heads (4)\n"
          "  --kv-heads N           KV heads, must divide --heads (2)\n"
          "  --head-dim N           head dimension d (16)\n"
          "  --prompt S             prompt positions s (64)\n"
          "  --rows R               captured prompt rows: the last R prompt positions (16)\n"
          "  --decode T             decode steps, all captured (4)\n"
          "  --vocab V              also store random tokens and decode logits of V entries (0: none)\n"
          "  --seed N               random seed; same seed, same trace (1)\n"
          "  --needle-depth PCT     needle start, percent of the haystack (50)\n"
          "  --needle-length N      needle tokens (16)\n"
          "  --question-length N    last prompt positions that ask for the needle (0: s/16, 1..8)\n"
          "  --store-attn           also store the attention rows A (n_heads, rows, positions)\n"
          "  --dtype f32|f16        storage precision of the tensors (f32)\n"
          "  --compress 0-9         deflate level with byte shuffle (0: none)\n"
          "  --threads N            OpenMP threads (0: all cores); the trace does not depend on it\n"
          "  -h, --help             this help\n");
}

static int parse_args(int argc, char **argv, SynthOptions *o, const char **output, bool *help) {
  size_t threads = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      *help = true;
      return OBC_OK;
    }
    if (!strcmp(arg, "--store-attn")) {
      o->store_attn = true;
      continue;
    }
    if (i + 1 >= argc) return obc_fail(OBC_EINVAL, "%s: missing value (see obcache synth --help)", arg);
    const char *value = argv[++i];
    int rc = OBC_OK;
    long level = 0;
    if (!strcmp(arg, "-o") || !strcmp(arg, "--output")) *output = value;
    else if (!strcmp(arg, "--shape")) rc = synth_options_shape(o, value);
    else if (!strcmp(arg, "--layers")) rc = obc_parse_size(arg, value, &o->n_layers);
    else if (!strcmp(arg, "--heads")) rc = obc_parse_size(arg, value, &o->n_heads);
    else if (!strcmp(arg, "--kv-heads")) rc = obc_parse_size(arg, value, &o->n_kv_heads);
    else if (!strcmp(arg, "--head-dim")) rc = obc_parse_size(arg, value, &o->head_dim);
    else if (!strcmp(arg, "--prompt")) rc = obc_parse_size(arg, value, &o->n_prompt);
    else if (!strcmp(arg, "--rows")) rc = obc_parse_size(arg, value, &o->n_prompt_rows);
    else if (!strcmp(arg, "--decode")) rc = obc_parse_size(arg, value, &o->n_decode);
    else if (!strcmp(arg, "--vocab")) rc = obc_parse_size(arg, value, &o->vocab_size);
    else if (!strcmp(arg, "--needle-depth")) rc = obc_parse_double(arg, value, &o->needle_depth);
    else if (!strcmp(arg, "--needle-length")) rc = obc_parse_size(arg, value, &o->needle_length);
    else if (!strcmp(arg, "--question-length")) rc = obc_parse_size(arg, value, &o->question_length);
    else if (!strcmp(arg, "--threads")) rc = obc_parse_size(arg, value, &threads);
    else if (!strcmp(arg, "--seed")) {
      size_t seed = 0;
      rc = obc_parse_size(arg, value, &seed);
      o->seed = seed;
    } else if (!strcmp(arg, "--dtype")) {
      if (!strcmp(value, "f16")) o->store_f16 = true;
      else if (!strcmp(value, "f32")) o->store_f16 = false;
      else rc = obc_fail(OBC_EINVAL, "--dtype: expected f32 or f16, got '%s'", value);
    } else if (!strcmp(arg, "--compress")) {
      rc = obc_parse_int(arg, value, &level);
      if (!rc && (level < 0 || level > 9))
        rc = obc_fail(OBC_EINVAL, "--compress: expected 0..9, got '%s'", value);
      o->compression_level = (int)level;
    } else {
      return obc_fail(OBC_EINVAL, "unknown option '%s' (see obcache synth --help)", arg);
    }
    if (rc) return rc;
  }
  obc_set_threads(threads);
  return OBC_OK;
}

int cmd_synth(int argc, char **argv) {
  SynthOptions options;
  synth_options_default(&options);
  const char *output = NULL;
  bool help = false;
  int rc = parse_args(argc, argv, &options, &output, &help);
  if (rc) return rc;
  if (help) {
    synth_usage(stdout);
    return OBC_OK;
  }
  if (!output) return obc_fail(OBC_EINVAL, "no output: give -o TRACE.h5 (see obcache synth --help)");
  return synth_generate(&options, output);
}
