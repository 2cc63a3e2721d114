/* hf_config_read (model/hf_config.h): the fields of a Llama/Qwen2/Qwen3
 * config.json, with transformers' defaults where a field may be absent
 * (num_key_value_heads = num_attention_heads, head_dim = hidden_size /
 * num_attention_heads or 128 for Qwen3, rope_theta = 10000,
 * tie_word_embeddings = false), and a refusal naming the field for every
 * configuration the runtime does not implement. */
#include "model/hf_config.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/obc_error.h"
#include "formats/json_file.h"

typedef struct {
  const char *path; /* config.json, for messages */
  const cJSON *root;
} ConfigReader;

static const cJSON *field(const ConfigReader *r, const cJSON *object, const char *name) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(object ? object : r->root, name);
  return cJSON_IsNull(item) ? NULL : item;
}

/* A positive integer field; def == 0 means required. */
static int read_size(const ConfigReader *r, const cJSON *object, const char *name, size_t def,
                     size_t *out) {
  const cJSON *item = field(r, object, name);
  if (!item) {
    if (def == 0) return obc_fail(OBC_EFORMAT, "%s: field %s is missing", r->path, name);
    *out = def;
    return OBC_OK;
  }
  double v = cJSON_IsNumber(item) ? item->valuedouble : -1;
  if (!(v >= 1 && v <= 1e12) || v != floor(v))
    return obc_fail(OBC_EFORMAT, "%s: field %s must be a positive integer", r->path, name);
  *out = (size_t)v;
  return OBC_OK;
}

static int read_double(const ConfigReader *r, const cJSON *object, const char *name, double def,
                       double *out) {
  const cJSON *item = field(r, object, name);
  if (!item) {
    if (isnan(def)) return obc_fail(OBC_EFORMAT, "%s: field %s is missing", r->path, name);
    *out = def;
    return OBC_OK;
  }
  if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble <= 0)
    return obc_fail(OBC_EFORMAT, "%s: field %s must be a positive number", r->path, name);
  *out = item->valuedouble;
  return OBC_OK;
}

static int read_bool(const ConfigReader *r, const char *name, bool def, bool *out) {
  const cJSON *item = field(r, NULL, name);
  if (!item) {
    *out = def;
    return OBC_OK;
  }
  if (!cJSON_IsBool(item))
    return obc_fail(OBC_EFORMAT, "%s: field %s must be true or false", r->path, name);
  *out = cJSON_IsTrue(item);
  return OBC_OK;
}

static int refuse(const ConfigReader *r, const char *field_name, const char *why) {
  return obc_fail(OBC_EUNSUPPORTED, "%s: %s: %s", r->path, field_name, why);
}

static int read_architecture(const ConfigReader *r, ModelConfig *config) {
  static const char *const classes[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"};
  const cJSON *type = field(r, NULL, "model_type");
  if (!cJSON_IsString(type))
    return obc_fail(OBC_EFORMAT, "%s: field model_type is missing", r->path);
  if (strlen(type->valuestring) >= sizeof config->architecture ||
      !model_architecture_set(config, type->valuestring)) {
    char why[160];
    snprintf(why, sizeof why, "\"%.64s\" is not supported (supported: " MODEL_ARCHITECTURES ")",
             type->valuestring);
    return refuse(r, "model_type", why);
  }
  const cJSON *architectures = field(r, NULL, "architectures");
  const cJSON *first = cJSON_IsArray(architectures) ? cJSON_GetArrayItem(architectures, 0) : NULL;
  if (!cJSON_IsString(first)) return OBC_OK;
  for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
    if (!strcmp(first->valuestring, classes[i])) return OBC_OK;
  char why[200];
  snprintf(why, sizeof why,
           "\"%.64s\" is not supported (supported: LlamaForCausalLM, Qwen2ForCausalLM, "
           "Qwen3ForCausalLM)",
           first->valuestring);
  return refuse(r, "architectures", why);
}

/* Features that would change the computation and that the runtime lacks. */
static int refuse_unsupported(const ConfigReader *r, const ModelConfig *config) {
  static const char *const expert_fields[] = {"num_local_experts", "num_experts",
                                              "n_routed_experts"};
  for (size_t i = 0; i < sizeof expert_fields / sizeof expert_fields[0]; i++) {
    const cJSON *item = field(r, NULL, expert_fields[i]);
    if (cJSON_IsNumber(item) && item->valuedouble > 0)
      return refuse(r, expert_fields[i], "mixture-of-experts models are not supported");
  }
  bool flag = false;
  int rc = read_bool(r, "use_sliding_window", false, &flag);
  if (rc) return rc;
  if (flag) return refuse(r, "use_sliding_window", "sliding-window attention is not supported");
  if (!strcmp(config->architecture, "llama")) { /* Qwen configs carry an inactive value */
    const cJSON *window = field(r, NULL, "sliding_window");
    if (cJSON_IsNumber(window) && window->valuedouble > 0)
      return refuse(r, "sliding_window", "sliding-window attention is not supported");
  }
  const cJSON *layer_types = field(r, NULL, "layer_types");
  const cJSON *layer_type;
  if (!cJSON_IsArray(layer_types)) layer_types = NULL;
  cJSON_ArrayForEach(layer_type, layer_types) {
    if (!cJSON_IsString(layer_type) || strcmp(layer_type->valuestring, "full_attention"))
      return refuse(r, "layer_types", "only \"full_attention\" layers are supported");
  }
  rc = read_bool(r, "attention_bias", false, &flag);
  if (rc) return rc;
  if (flag && !config->qkv_bias) {
    char why[160];
    snprintf(why, sizeof why, "biases on the attention projections of a %s model are not supported",
             config->architecture);
    return refuse(r, "attention_bias", why);
  }
  rc = read_bool(r, "mlp_bias", false, &flag);
  if (rc) return rc;
  if (flag) return refuse(r, "mlp_bias", "MLP biases are not supported");
  const cJSON *act = field(r, NULL, "hidden_act");
  if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
    return refuse(r, "hidden_act", "only \"silu\" (SwiGLU MLP) is supported");
  return OBC_OK;
}

/* transformers 5 writes rope_theta and the scaling fields into one object,
 * rope_parameters, where older configs have rope_theta and rope_scaling at
 * the top level; either is read, rope_scaling first. A rope_parameters
 * without rope_theta (and none at the top level) is an error rather than
 * the default 10000: a per-layer-type rope_parameters has that shape. */
static int read_rope_scaling(const ConfigReader *r, ModelConfig *config) {
  config->rope_scaling = OBC_ROPE_NONE;
  const cJSON *scaling = field(r, NULL, "rope_scaling");
  const char *name = "rope_scaling";
  if (!scaling) {
    scaling = field(r, NULL, "rope_parameters");
    name = "rope_parameters";
  }
  if (!scaling) return OBC_OK;
  if (!cJSON_IsObject(scaling))
    return obc_fail(OBC_EFORMAT, "%s: field %s must be an object", r->path, name);
  bool parameters = !strcmp(name, "rope_parameters");
  if (parameters && !field(r, NULL, "rope_theta")) {
    int rc = read_double(r, scaling, "rope_theta", NAN, &config->rope_theta);
    if (rc) return rc;
  }
  const cJSON *type = field(r, scaling, "rope_type");
  if (!type) type = field(r, scaling, "type");
  if (!type && parameters) return OBC_OK; /* rope_theta alone */
  if (!cJSON_IsString(type))
    return obc_fail(OBC_EFORMAT, "%s: field %s.rope_type is missing", r->path, name);
  if (!strcmp(type->valuestring, "default")) return OBC_OK;
  int rc;
  if (!strcmp(type->valuestring, "linear")) {
    config->rope_scaling = OBC_ROPE_LINEAR;
    return read_double(r, scaling, "factor", NAN, &config->rope_factor);
  }
  if (strcmp(type->valuestring, "llama3")) {
    char why[160], where[64];
    snprintf(why, sizeof why,
             "type \"%.64s\" is not supported (expected llama3, linear or default)",
             type->valuestring);
    snprintf(where, sizeof where, "%s.rope_type", name);
    return refuse(r, where, why);
  }
  config->rope_scaling = OBC_ROPE_LLAMA3;
  if ((rc = read_double(r, scaling, "factor", NAN, &config->rope_factor)) ||
      (rc = read_double(r, scaling, "low_freq_factor", NAN, &config->rope_low_freq_factor)) ||
      (rc = read_double(r, scaling, "high_freq_factor", NAN, &config->rope_high_freq_factor)) ||
      (rc = read_size(r, scaling, "original_max_position_embeddings", 0,
                      &config->rope_original_context)))
    return rc;
  if (config->rope_high_freq_factor <= config->rope_low_freq_factor)
    return obc_fail(OBC_EFORMAT, "%s: %s.high_freq_factor must exceed low_freq_factor", r->path,
                    name);
  return OBC_OK;
}

static void folder_name(const char *folder, char *name, size_t size) {
  size_t length = strlen(folder);
  while (length > 1 && folder[length - 1] == '/') length--;
  size_t start = length;
  while (start > 0 && folder[start - 1] != '/') start--;
  snprintf(name, size, "%.*s", (int)(length - start), folder + start);
}

int hf_config_read(const char *folder, ModelConfig *config) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", folder);
  cJSON *root;
  int rc = json_file_read(path, &root);
  if (rc) return rc;
  ConfigReader r = {path, root};
  memset(config, 0, sizeof *config);
  folder_name(folder, config->name, sizeof config->name);
  if (!cJSON_IsObject(root)) rc = obc_fail(OBC_EFORMAT, "%s: not a JSON object", path);
  if (!rc) rc = read_architecture(&r, config);
  if (!rc) rc = refuse_unsupported(&r, config);
  if (!rc) rc = read_size(&r, NULL, "hidden_size", 0, &config->dim);
  if (!rc) rc = read_size(&r, NULL, "intermediate_size", 0, &config->ffn_dim);
  if (!rc) rc = read_size(&r, NULL, "num_hidden_layers", 0, &config->n_layers);
  if (!rc) rc = read_size(&r, NULL, "num_attention_heads", 0, &config->n_heads);
  if (!rc) rc = read_size(&r, NULL, "num_key_value_heads", config->n_heads, &config->n_kv_heads);
  /* transformers' defaults: Qwen3Config's head_dim is 128, the others derive it. */
  size_t head_dim = rc ? 0 : config->qk_norm ? 128 : config->dim / config->n_heads;
  if (!rc) rc = read_size(&r, NULL, "head_dim", head_dim, &config->head_dim);
  if (!rc) rc = read_size(&r, NULL, "vocab_size", 0, &config->vocab_size);
  if (!rc) rc = read_size(&r, NULL, "max_position_embeddings", 0, &config->context_length);
  if (!rc) rc = read_double(&r, NULL, "rms_norm_eps", 1e-6, &config->norm_eps);
  if (!rc) rc = read_double(&r, NULL, "rope_theta", 10000.0, &config->rope_theta);
  if (!rc) rc = read_bool(&r, "tie_word_embeddings", false, &config->tied_embeddings);
  if (!rc) rc = read_rope_scaling(&r, config);
  config->rope_interleaved = false;
  cJSON_Delete(root);
  return rc;
}
