/* model_load and friends (model/model.h): choose the format from the path (a
 * folder is a Hugging Face checkpoint, anything else a GGUF file), validate the
 * configuration, and derive the RoPE frequencies both runtimes use.
 *
 * A GGUF file's matrices stay in their stored type by default (the file stays
 * mapped for the model's lifetime): 92 MB for the default Q4_1 model, 4.9 GB
 * for an 8B Q4_K_M one. --weights f32 dequantises them at load, 4 bytes per
 * parameter (540 MB, 32 GB), the reference path. */
#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/obc_error.h"
#include "common/obc_paths.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "model/model_load.h"

const char *model_default_path(void) {
  const char *env = getenv("OBC_MODEL");
  if (env && env[0]) return env;
  static char path[4096];
  if (!path[0])
    snprintf(path, sizeof path, "%s/models/%s.Q4_1.gguf", obc_data_dir(), MODEL_DEFAULT_NAME);
  return path;
}

int model_load(const char *path, Model **out) {
  ModelLoadOptions options = {.weights = MODEL_WEIGHTS_NATIVE};
  return model_load_with(path, &options, out);
}

const char *model_weights_mode_name(ModelWeightsMode mode) {
  return mode == MODEL_WEIGHTS_F32 ? "f32" : "native";
}

int model_weights_mode_parse(void *target, const char *option, const char *value) {
  ModelWeightsMode *mode = target;
  if (value && !strcmp(value, "native"))
    *mode = MODEL_WEIGHTS_NATIVE;
  else if (value && !strcmp(value, "f32"))
    *mode = MODEL_WEIGHTS_F32;
  else
    return obc_fail(OBC_EINVAL, "%s: expected native or f32, got '%s'", option, value ? value : "");
  return OBC_OK;
}

void model_weights_mode_show(const void *target, char *text, size_t size) {
  snprintf(text, size, "%s", model_weights_mode_name(*(const ModelWeightsMode *)target));
}

int model_locate(const char *path, bool *folder, char *resolved) {
  if (!path) path = model_default_path();
  struct stat st;
  if (stat(path, &st) != 0 || (resolved && !realpath(path, resolved)))
    return obc_fail(OBC_ENOTFOUND,
                    "%s: no such model file or folder (hint: run scripts/setup.sh for the default "
                    "model, or pass --model PATH)",
                    path);
  if (folder) *folder = S_ISDIR(st.st_mode);
  return OBC_OK;
}

int model_load_with(const char *path, const ModelLoadOptions *options, Model **out) {
  assert(out && options);
  *out = NULL;
  if (!path) path = model_default_path();
  bool folder = false;
  int rc = model_locate(path, &folder, NULL);
  if (rc) return rc;
  Model *model = obc_calloc(1, sizeof *model, "a model");
  if (!model) return OBC_ENOMEM;
  snprintf(model->path, sizeof model->path, "%s", path);
  model->weights_mode = options->weights;
  rc = folder ? model_load_hf(path, options->tokenizer, model)
              : model_load_gguf(path, options->tokenizer, model);
  if (rc) {
    model_free(model);
    return rc;
  }
  *out = model;
  return OBC_OK;
}

void model_free(Model *model) {
  if (!model) return;
  if (model->tokenizer) tokenizer_free(model->tokenizer);
  free(model->weights.layers);
  free(model->storage);
  if (model->mapping) gguf_close(model->mapping);
  free(model);
}

void model_rope_inv_freq(const Model *model, double *inv_freq) {
  const ModelConfig *c = &model->config;
  for (size_t i = 0; i < c->head_dim / 2; i++) {
    double f = pow(c->rope_theta, -2.0 * (double)i / (double)c->head_dim);
    if (c->rope_scaling == OBC_ROPE_LINEAR) f /= c->rope_factor;
    if (model->weights.rope_freq_factors) f /= model->weights.rope_freq_factors[i];
    inv_freq[i] = f;
  }
}

void model_llama3_freq_factors(const ModelConfig *c, float *factors) {
  const double pi = 3.14159265358979323846;
  double original = (double)c->rope_original_context;
  double low_wavelen = original / c->rope_low_freq_factor;   /* longer than this: fully scaled */
  double high_wavelen = original / c->rope_high_freq_factor; /* shorter than this: unscaled */
  for (size_t i = 0; i < c->head_dim / 2; i++) {
    double inv_freq = pow(c->rope_theta, -2.0 * (double)i / (double)c->head_dim);
    double wavelen = 2.0 * pi / inv_freq;
    double divisor;
    if (wavelen < high_wavelen) {
      divisor = 1.0;
    } else if (wavelen > low_wavelen) {
      divisor = c->rope_factor;
    } else { /* blend 1/factor and 1 by where the wavelength falls */
      double smooth = (original / wavelen - c->rope_low_freq_factor) /
                      (c->rope_high_freq_factor - c->rope_low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / c->rope_factor + smooth);
    }
    factors[i] = (float)divisor;
  }
}

bool model_architecture_set(ModelConfig *c, const char *arch) {
  static const struct {
    const char *name;
    bool qkv_bias, qk_norm;
  } families[] = {
      {.name = "llama"},
      {.name = "qwen2", .qkv_bias = true},
      {.name = "qwen3", .qk_norm = true},
  };
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
    if (!strcmp(arch, families[i].name)) {
      snprintf(c->architecture, sizeof c->architecture, "%s", families[i].name);
      c->qkv_bias = families[i].qkv_bias;
      c->qk_norm = families[i].qk_norm;
      return true;
    }
  return false;
}

static int invalid(const char *source, const char *what) {
  return obc_fail(OBC_EUNSUPPORTED, "%s: %s", source, what);
}

int model_config_validate(const ModelConfig *c, const char *source) {
  const size_t limit = (size_t)1 << 20; /* far above any real model; keeps products in range */
  char text[256];
  const struct {
    const char *name;
    size_t value;
  } sizes[] = {
      {"n_layers", c->n_layers},     {"dim", c->dim},
      {"ffn_dim", c->ffn_dim},       {"n_heads", c->n_heads},
      {"n_kv_heads", c->n_kv_heads}, {"head_dim", c->head_dim},
      {"vocab_size", c->vocab_size}, {"context_length", c->context_length},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    bool is_context =
        sizes[i].value == c->context_length && !strcmp(sizes[i].name, "context_length");
    if (sizes[i].value == 0 || sizes[i].value > (is_context ? limit * 64 : limit)) {
      snprintf(text, sizeof text, "%s is %zu (expected a positive size)", sizes[i].name,
               sizes[i].value);
      return invalid(source, text);
    }
  }
  ModelConfig family = {0};
  if (!model_architecture_set(&family, c->architecture)) {
    snprintf(text, sizeof text,
             "architecture \"%s\" is not supported (supported: " MODEL_ARCHITECTURES ")",
             c->architecture);
    return invalid(source, text);
  }
  if (c->n_heads % c->n_kv_heads) {
    snprintf(text, sizeof text, "%zu query heads are not a multiple of %zu KV heads", c->n_heads,
             c->n_kv_heads);
    return invalid(source, text);
  }
  if (c->head_dim % 2) {
    snprintf(text, sizeof text, "head_dim %zu is odd (RoPE rotates pairs)", c->head_dim);
    return invalid(source, text);
  }
  if (!(c->norm_eps > 0 && c->norm_eps < 1))
    return invalid(source, "RMSNorm epsilon is not in (0, 1)");
  if (!(c->rope_theta > 1 && isfinite(c->rope_theta)))
    return invalid(source, "rope theta is not a number above 1");
  if (c->rope_scaling == OBC_ROPE_LINEAR && !(c->rope_factor > 0 && isfinite(c->rope_factor)))
    return invalid(source, "linear rope scaling needs a positive factor");
  /* GGUF files carry Llama-3 scaling as the rope_freqs tensor and leave these 0. */
  if (c->rope_scaling == OBC_ROPE_LLAMA3 && c->rope_factor != 0 &&
      !(c->rope_factor > 0 && c->rope_low_freq_factor > 0 &&
        c->rope_high_freq_factor > c->rope_low_freq_factor && c->rope_original_context > 0))
    return invalid(
        source,
        "llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
        "original_max_position_embeddings > 0");
  return OBC_OK;
}
