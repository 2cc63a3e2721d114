/* obcache: git-style dispatch to the subcommands of cli/commands.h. The only
 * place that prints a library error and chooses the exit status. */
#include <cblas.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "common/obc_text.h"
#include "formats/quant_dot.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} Command;

static const Command commands[] = {
    /* One line per subcommand, in pipeline order. */
    {"synth", cmd_synth, "write a synthetic attention trace (no model needed)"},
    {"info", cmd_info, "summarise a trace: model, positions, rows, spans, datasets"},
    {"verify", cmd_verify, "recompute lse, O (and A) of a trace from its Q, K, V and compare"},
    {"capture", cmd_capture, "run the model on a needle-in-a-haystack prompt and record a trace"},
    {"analyze", cmd_analyze,
     "rank tokens by every eviction score and compare with the true eviction error"},
    {"sweep", cmd_sweep, "capture and analyse a grid of lengths x depths, with a summary table"},
    {"eval", cmd_eval, "task accuracy of eviction policies over many RULER samples"},
    {"evict", cmd_evict,
     "apply an eviction policy to a trace: kept prompt positions per (layer, KV head)"},
    {"replay", cmd_replay,
     "replay decoding over an evicted cache: offline output error, or the model's answer and KL"},
    {"dynamic", cmd_dynamic,
     "evict while decoding a long text: perplexity per running score and cache budget"},
    {"plot", cmd_plot, "render the figures of an analysis or sweep folder with gnuplot (PNG, SVG)"},
    {"tokenize", cmd_tokenize, "print the token ids of a text (tokenizer only)"},
    {"generate", cmd_generate, "greedy generation from a prompt, with tokens/s"},
    {"perplexity", cmd_perplexity, "teacher-forced perplexity of a model on a text file"},
    {"logits", cmd_logits, "debugging aid: write the logits of token ids as float32"},
    {"model-info", cmd_model_info,
     "format, tensor table and configuration of a GGUF file or HF folder"},
    {"upgrade", cmd_upgrade, "rewrite a schema-1 trace or keep file as schema 2 (checksummed)"},
    {NULL, NULL, NULL},
};

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: obcache <command> [options]   (obcache <command> --help for details)\n"
          "\n"
          "Capture attention traces of Llama-family models and analyse how well KV-cache\n"
          "eviction scores (OBCache, H2O, TOVA, SnapKV, VATP) find the tokens whose\n"
          "eviction really hurts.\n\ncommands:\n");
  for (size_t i = 0; commands[i].name; i++)
    fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "  %-12s %s\n", "version", "print the tool version");
  fprintf(out,
          "\nIdle OpenMP threads spin briefly, then sleep (GOMP_SPINCOUNT=1000) unless\n"
          "OMP_WAIT_POLICY or GOMP_SPINCOUNT is set; --threads N sets how many there are.\n"
          "OpenBLAS runs the kernels it detects; where it would fall back to its generic\n"
          "SSE3 ones on a processor with AVX or better, obcache sets OPENBLAS_CORETYPE\n"
          "(SkylakeX, Haswell or Sandybridge, from CPUID). A user's OPENBLAS_CORETYPE is\n"
          "kept. `obcache version` says which kernels run and why.\n");
}

/* `obcache version`'s line on OpenMP waiting, from the environment this
 * process started with (what libgomp read), e.g. "openmp  OMP_WAIT_POLICY unset
 * GOMP_SPINCOUNT=1000". */
static void main_print_wait_policy(void) {
  const char *policy = getenv("OMP_WAIT_POLICY");
  const char *spin = getenv("GOMP_SPINCOUNT");
  if (policy && policy[0])
    printf("openmp  OMP_WAIT_POLICY=%s", policy);
  else
    printf("openmp  OMP_WAIT_POLICY unset");
  if (spin) printf(" GOMP_SPINCOUNT=%s", spin);
  printf("\n");
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv);
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const char *name = argv[1];
  /* A file-size limit (ulimit -f) must fail a write with a message, not kill
   * the process before it removes its temporary file. */
  signal(SIGXFSZ, SIG_IGN);
  /* After a failed write (disk full), HDF5 1.10's exit-time clean-up crashes
   * on the file it could not close; every writer closes or removes its own
   * files, so that clean-up has nothing to do. Must precede any HDF5 call. */
  H5dont_atexit();
  if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
    print_usage(stdout);
    return 0;
  }
  if (!strcmp(name, "version") || !strcmp(name, "--version")) {
    /* The BLAS kernels decide the last bits of every GEMM (CONTRIBUTING.md, "Test"). */
    char core[256];
    obc_blas_core_describe(core, sizeof core);
    printf("obcache %s\nblas    %s (core %s)\n", OBC_VERSION, openblas_get_config(), core);
    QuantSimd simd = quant_dot_simd();
    printf(
        "simd    quantised dot products: %s, dequantisation: %s (OBC_SIMD=portable|avx2|avx512 "
        "picks)\n",
        quant_dot_simd_name(simd),
        quant_dot_simd_name(simd > QUANT_SIMD_AVX2 ? QUANT_SIMD_AVX2 : simd));
    main_print_wait_policy();
    return 0;
  }
  for (size_t i = 0; commands[i].name; i++) {
    if (strcmp(name, commands[i].name)) continue;
    int rc = commands[i].run(argc - 1, argv + 1);
    if (rc < 0) {
      /* Escaped once more as a whole: a value from a file or an option that
       * reached the message unescaped still prints on one line. */
      static char msg[OBC_ESCAPED_SIZE(1024)];
      obc_text_escape(msg, sizeof msg, obc_error_message(), false);
      fprintf(stderr, "obcache %s: %s\n", name, msg[0] ? msg : obc_error_name(rc));
      return 1;
    }
    return rc;
  }
  fprintf(stderr, "obcache: unknown command '%s' (try obcache --help)\n", name);
  return 2;
}
