/* libFuzzer harness: a GGUF file as `obcache model-info` reads it. The input
 * is the whole file. It is opened with gguf_open, every metadata value is read
 * through the typed getters (arrays up to 64 elements), every tensor is looked
 * up and, when small, dequantised; then the tokenizer is built from the
 * metadata and used, and model_load runs the loader (configuration, weights,
 * tokenizer). Seeds: tests/fuzz/make_seeds.py. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "model/model.h"
#include "tests/fuzz/fuzz_common.h"
#include "tokenizer/tokenizer.h"

static const char fuzz_text[] =
    "Hello world! The needle is 42.\n<|im_start|>user\nna\xc3\xafve caf\xc3\xa9 \xf0\x9f\x98\x80";

static void read_array(const GgufFile *file, const char *key) {
  uint32_t type;
  uint64_t count;
  if (gguf_get_array(file, key, &type, &count)) return;
  for (uint64_t i = 0; i < count && i < 64; i++) {
    GgufString s;
    double f;
    int64_t n;
    uint32_t inner_type;
    uint64_t inner_count;
    gguf_get_array_string(file, key, i, &s);
    gguf_get_array_f64(file, key, i, &f);
    gguf_get_array_i64(file, key, i, &n);
    gguf_get_array_nested(file, key, i, &inner_type, &inner_count);
  }
}

static void read_metadata(const GgufFile *file) {
  gguf_version(file);
  gguf_alignment(file);
  gguf_data_offset(file);
  for (size_t i = 0; i < gguf_metadata_count(file); i++) {
    const char *key = gguf_metadata_key(file, i);
    uint64_t u;
    double f;
    bool b;
    GgufString s;
    gguf_metadata_type(file, i);
    gguf_get_u64(file, key, &u);
    gguf_get_f64(file, key, &f);
    gguf_get_bool(file, key, &b);
    gguf_get_string(file, key, &s);
    read_array(file, key);
  }
}

/* Tensors of up to 64K elements are dequantised (bigger ones only cost time). */
static void read_tensors(const GgufFile *file) {
  for (size_t i = 0; i < gguf_tensor_count(file); i++) {
    const GgufTensor *t = gguf_tensor(file, i);
    gguf_find_tensor(file, t->name);
    gguf_type_name(t->type);
    gguf_type_block_size(t->type);
    gguf_type_block_bytes(t->type);
    gguf_tensor_check_shape(file, t, t->n_dims < 4 ? t->n_dims : 4, t->dims);
    if (!t->data || t->n_elements > (1 << 16)) continue;
    float *values = malloc((t->n_elements ? t->n_elements : 1) * sizeof *values);
    if (values) gguf_tensor_to_f32(file, t, values);
    free(values);
  }
}

static void use_tokenizer(const Tokenizer *tokenizer) {
  int32_t *ids = NULL;
  size_t n_ids = 0;
  if (!tokenizer_encode(tokenizer, fuzz_text, sizeof fuzz_text - 1, &ids, &n_ids)) {
    char *text = NULL;
    if (!tokenizer_decode(tokenizer, ids, n_ids, &text)) free(text);
  }
  free(ids);
  char buf[64];
  for (int32_t id = 0; id < 8; id++) tokenizer_token_text(tokenizer, id, buf, sizeof buf);
  tokenizer_token_id(tokenizer, "<|im_end|>");
  tokenizer_is_stop(tokenizer, tokenizer_eos_id(tokenizer));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[8192];
  fuzz_write("model.gguf", data, size, path, sizeof path);
  GgufFile *file;
  if (!gguf_open(path, &file)) {
    read_metadata(file);
    read_tensors(file);
    Tokenizer *tokenizer;
    if (!tokenizer_from_gguf(file, path, &tokenizer)) {
      use_tokenizer(tokenizer);
      tokenizer_free(tokenizer);
    }
    gguf_close(file);
    Model *model;
    if (!model_load(path, &model)) model_free(model);
  }
  unlink(path);
  return 0;
}
