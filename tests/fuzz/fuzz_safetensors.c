/* libFuzzer harness: a Hugging Face folder of config.json and one
 * model.safetensors, as `obcache model-info` and model_load read it. The input
 * is config.json, a NUL byte, then model.safetensors (no NUL: config.json
 * alone). The safetensors file is opened alone and as the folder, every tensor
 * is looked up and, when small, converted; config.json is read by
 * hf_config_read; then model_load loads the folder. Seeds:
 * tests/fuzz/make_seeds.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "model/hf_config.h"
#include "model/model.h"
#include "tests/fuzz/fuzz_common.h"

/* Tensors of up to 64K elements are converted (bigger ones only cost time). */
static void read_tensors(const SafetensorsModel *st) {
  for (size_t i = 0; i < safetensors_tensor_count(st); i++) {
    const SafetensorsTensor *t = safetensors_tensor(st, i);
    safetensors_find(st, t->name);
    safetensors_check_shape(t, t->n_dims < 4 ? t->n_dims : 4, t->shape);
    if (t->n_elements > (1 << 16)) continue;
    float *values = malloc((t->n_elements ? t->n_elements : 1) * sizeof *values);
    if (values) safetensors_to_f32(t, values);
    free(values);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t config_n, weights_n;
  const uint8_t *weights;
  fuzz_split(data, size, &config_n, &weights, &weights_n);
  char config[8192], tensors[8192];
  fuzz_write("config.json", data, config_n, config, sizeof config);
  fuzz_write("model.safetensors", weights, weights_n, tensors, sizeof tensors);
  const char *folder = fuzz_scratch();
  SafetensorsModel *st;
  if (!safetensors_open_file(tensors, &st)) {
    read_tensors(st);
    safetensors_close(st);
  }
  if (!safetensors_open_folder(folder, &st)) safetensors_close(st);
  ModelConfig model_config;
  hf_config_read(folder, &model_config);
  Model *model;
  if (!model_load(folder, &model)) model_free(model);
  unlink(config);
  unlink(tensors);
  return 0;
}
