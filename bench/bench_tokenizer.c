/* Tokenizer encode speed: tokens per second of tokenizer_encode on a text of
 * at least 30K tokens (a file given as argument, or by default the test
 * corpus repeated), best of five runs, plus the time to load the tokenizer
 * from the GGUF metadata.
 *   bench_tokenizer [MODEL.gguf | HF_FOLDER] [TEXT_FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/obc_error.h"
#include "common/obc_startup.h"
#include "common/obc_time.h"
#include "tokenizer/text_input.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

static int open_tokenizer(const char *path, Tokenizer **out) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return tokenizer_from_hf(path, out);
  GgufFile *file = NULL;
  int rc = gguf_open(path, &file);
  if (rc) return rc;
  rc = tokenizer_from_gguf(file, path, out);
  gguf_close(file);
  return rc;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  const char *model = argc > 1 ? argv[1] : model_default_path();
  const char *text_path = argc > 2 ? argv[2] : OBC_SOURCE_DIR "/tests/tokenizer_corpus.txt";
  char *unit = NULL;
  size_t unit_length = 0;
  Tokenizer *tok = NULL;
  double t0 = obc_now_seconds();
  int rc = open_tokenizer(model, &tok);
  double load_s = obc_now_seconds() - t0;
  if (!rc) rc = text_read_file(text_path, OBC_TEXT_MAX_BYTES, &unit, &unit_length);
  if (rc) {
    fprintf(stderr, "bench_tokenizer: %s\n", obc_error_message());
    return 1;
  }
  /* Repeat the text until it has at least 30K tokens. */
  int32_t *ids = NULL;
  size_t n_unit = 0;
  rc = tokenizer_encode(tok, unit, unit_length, &ids, &n_unit);
  free(ids);
  size_t copies = n_unit ? (30000 + n_unit - 1) / n_unit : 1;
  char *text = malloc(copies * unit_length + 1);
  for (size_t i = 0; i < copies; i++) memcpy(text + i * unit_length, unit, unit_length);
  size_t length = copies * unit_length;
  double best = 1e30;
  size_t n = 0;
  for (int run = 0; run < 5 && !rc; run++) {
    double start = obc_now_seconds();
    rc = tokenizer_encode(tok, text, length, &ids, &n);
    double seconds = obc_now_seconds() - start;
    if (seconds < best) best = seconds;
    free(ids);
  }
  if (rc) {
    fprintf(stderr, "bench_tokenizer: %s\n", obc_error_message());
    return 1;
  }
  printf("tokenizer load (%zu tokens): %.3f s\n", tokenizer_vocab_size(tok), load_s);
  printf(
      "encode %s x%zu: %zu bytes -> %zu tokens in %.4f s (best of 5): %.0f tokens/s, %.1f MB/s\n",
      text_path, copies, length, n, best, (double)n / best, (double)length / best / 1e6);
  free(text);
  free(unit);
  tokenizer_free(tok);
  return 0;
}
