/* Check suite of model_load on Hugging Face folders (formats/safetensors.h,
 * model/hf_config.h) against GGUF: SmolLM2 converted by tests/gguf_to_hf.py
 * (dequantised by the gguf package, llama.cpp's Q/K permutation undone) loads
 * to the same weights as the GGUF itself, exactly in F32 and within bf16
 * rounding in BF16; a sharded index loads exactly as one file; Llama-3 rope
 * scaling follows transformers; unsupported configs and damaged safetensors
 * fail with a message naming the file and the field. */
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/obc_error.h"
#include "common/obc_file.h"
#include "common/obc_startup.h"
#include "model/hf_config.h"
#include "model/model.h"
#include "model/model_load.h"
#include "tests/tiny_gguf.h"
#include "tests/test_env.h"

static char scratch[4096];

static void make_scratch(void) { test_scratch_path("model_load", scratch, sizeof scratch, 1); }


/* Runs tests/gguf_to_hf.py unless out already holds a finished conversion. */
static void convert(const char *gguf, const char *out, const char *options) {
  char config[4200];
  snprintf(config, sizeof config, "%s/config.json", out);
  if (access(config, R_OK) == 0) return;
  const char *source = getenv("OBC_SOURCE_DIR");
  char command[16384];
  snprintf(command, sizeof command, "python3 '%s/tests/gguf_to_hf.py' '%s' '%s' %s",
           source ? source : ".", gguf, out, options);
  ck_assert_msg(system(command) == 0, "conversion failed: %s", command);
}

static void assert_message_names(const char *path, const char *fragment) {
  const char *msg = obc_error_message();
  ck_assert_msg(strstr(msg, path) != NULL, "message does not name %s: %s", path, msg);
  if (fragment)
    ck_assert_msg(strstr(msg, fragment) != NULL, "message lacks \"%s\": %s", fragment, msg);
}

/* ---- weight comparison ---- */

typedef struct {
  double max_abs, max_rel;
  size_t values;
} Difference;

/* Rows of a (heads * head_dim, cols) matrix: row h*hd + 2i + j of the
 * interleaved (GGUF) layout is row h*hd + j*hd/2 + i of the half-split one. */
static size_t hf_row(size_t gguf_row, size_t head_dim, bool interleaved) {
  if (!interleaved) return gguf_row;
  size_t h = gguf_row / head_dim, r = gguf_row % head_dim;
  return h * head_dim + (r % 2) * (head_dim / 2) + r / 2;
}

static void compare(Difference *d, const char *name, const float *gguf, const float *hf,
                    size_t rows, size_t cols, size_t head_dim, bool interleaved, double rel_tol) {
  if (!gguf && !hf) return;
  ck_assert_msg(gguf && hf, "%s present in only one model", name);
  size_t bad_row = rows, bad_col = 0; /* first element out of tolerance (asserted once: Check's
                                          per-call bookkeeping is too slow for 10^8 values) */
  for (size_t r = 0; r < rows; r++) {
    const float *a = gguf + r * cols, *b = hf + hf_row(r, head_dim, interleaved) * cols;
    for (size_t c = 0; c < cols; c++) {
      double diff = fabs((double)a[c] - (double)b[c]), scale = fabs((double)a[c]);
      if (diff > d->max_abs) d->max_abs = diff;
      if (scale > 0 && diff / scale > d->max_rel) d->max_rel = diff / scale;
      if (!(diff <= rel_tol * scale) && bad_row == rows) {
        bad_row = r;
        bad_col = c;
      }
    }
  }
  ck_assert_msg(bad_row == rows, "%s[%zu][%zu]: GGUF %.9g, HF %.9g", name, bad_row, bad_col,
                (double)gguf[bad_row * cols + bad_col],
                (double)hf[hf_row(bad_row, head_dim, interleaved) * cols + bad_col]);
  d->values += rows * cols;
}

/* Every weight of a equals the matching weight of b up to rel_tol, Q/K rows
 * matched through the RoPE layout permutation when a is interleaved and b not. */
/* The values of a matrix loaded with MODEL_WEIGHTS_F32 (load_ok). */
#define F32(matrix) ((const float *)(matrix).data)

static Difference compare_models(const Model *a, const Model *b, double rel_tol) {
  const ModelConfig *c = &a->config;
  ck_assert_uint_eq(c->n_layers, b->config.n_layers);
  ck_assert_uint_eq(c->dim, b->config.dim);
  ck_assert_uint_eq(c->ffn_dim, b->config.ffn_dim);
  ck_assert_uint_eq(c->n_heads, b->config.n_heads);
  ck_assert_uint_eq(c->n_kv_heads, b->config.n_kv_heads);
  ck_assert_uint_eq(c->head_dim, b->config.head_dim);
  ck_assert_uint_eq(c->vocab_size, b->config.vocab_size);
  ck_assert_uint_eq(c->context_length, b->config.context_length);
  ck_assert(c->norm_eps == b->config.norm_eps && c->rope_theta == b->config.rope_theta);
  ck_assert(c->tied_embeddings == b->config.tied_embeddings && c->qkv_bias == b->config.qkv_bias);
  ck_assert(c->qk_norm == b->config.qk_norm);
  bool permuted = c->rope_interleaved && !b->config.rope_interleaved;
  size_t hd = c->head_dim, q = c->n_heads * hd, kv = c->n_kv_heads * hd;
  Difference d = {0};
  const ModelWeights *x = &a->weights, *y = &b->weights;
  compare(&d, "token_embedding", F32(x->token_embedding), F32(y->token_embedding), c->vocab_size,
          c->dim, hd, false, rel_tol);
  compare(&d, "output_norm", x->output_norm, y->output_norm, 1, c->dim, hd, false, rel_tol);
  compare(&d, "output", F32(x->output), F32(y->output), c->vocab_size, c->dim, hd, false, rel_tol);
  for (size_t l = 0; l < c->n_layers; l++) {
    const ModelLayerWeights *u = &x->layers[l], *v = &y->layers[l];
    compare(&d, "attn_norm", u->attn_norm, v->attn_norm, 1, c->dim, hd, false, rel_tol);
    compare(&d, "wq", F32(u->wq), F32(v->wq), q, c->dim, hd, permuted, rel_tol);
    compare(&d, "wk", F32(u->wk), F32(v->wk), kv, c->dim, hd, permuted, rel_tol);
    compare(&d, "wv", F32(u->wv), F32(v->wv), kv, c->dim, hd, false, rel_tol);
    compare(&d, "bq", u->bq, v->bq, 1, q, hd, false, rel_tol);
    compare(&d, "bk", u->bk, v->bk, 1, kv, hd, false, rel_tol);
    compare(&d, "bv", u->bv, v->bv, 1, kv, hd, false, rel_tol);
    compare(&d, "q_norm", u->q_norm, v->q_norm, 1, hd, hd, false, rel_tol);
    compare(&d, "k_norm", u->k_norm, v->k_norm, 1, hd, hd, false, rel_tol);
    compare(&d, "wo", F32(u->wo), F32(v->wo), c->dim, q, hd, false, rel_tol);
    compare(&d, "ffn_norm", u->ffn_norm, v->ffn_norm, 1, c->dim, hd, false, rel_tol);
    compare(&d, "w_gate", F32(u->w_gate), F32(v->w_gate), c->ffn_dim, c->dim, hd, false, rel_tol);
    compare(&d, "w_up", F32(u->w_up), F32(v->w_up), c->ffn_dim, c->dim, hd, false, rel_tol);
    compare(&d, "w_down", F32(u->w_down), F32(v->w_down), c->dim, c->ffn_dim, hd, false, rel_tol);
  }
  return d;
}

static Model *load_ok(const char *path) {
  Model *m = NULL;
  ModelLoadOptions f32 = {.weights =
                              MODEL_WEIGHTS_F32}; /* elementwise comparisons of fp32 values */
  int rc = model_load_with(path, &f32, &m);
  ck_assert_msg(rc == 0, "model_load(%s): %s", path, obc_error_message());
  return m;
}

START_TEST(smollm2_gguf_and_converted_f32_folder_hold_identical_weights) {
  if (test_blas_twin()) {
    printf(
        "SKIP: SmolLM2 as the f32 folder in an OpenBLAS twin (loading uses no BLAS; "
        "test_model_load runs it)\n");
    return;
  }
  const char *gguf = test_real_model();
  if (!gguf) return;
  char folder[4200];
  test_scratch_file("smollm2-hf-f32", folder, sizeof folder);
  convert(gguf, folder, "--dtype f32");
  Model *a = load_ok(gguf), *b = load_ok(folder);
  ck_assert(a->config.rope_interleaved && !b->config.rope_interleaved);
  Difference d = compare_models(a, b, 0.0);
  printf(
      "SmolLM2 GGUF vs HF F32 folder: %zu weights, max |diff| %g (Q/K through the RoPE "
      "permutation)\n",
      d.values, d.max_abs);
  const ModelConfig *c = &a->config;
  size_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
  size_t per_layer = 2 * c->dim + 2 * q * c->dim + 2 * kv * c->dim + 3 * c->ffn_dim * c->dim;
  ck_assert_uint_eq(d.values, 2 * c->vocab_size * c->dim + c->dim + c->n_layers * per_layer);
  model_free(a);
  model_free(b);
}
END_TEST

START_TEST(smollm2_bf16_shards_match_gguf_within_bf16_rounding) {
  if (test_blas_twin()) {
    printf(
        "SKIP: SmolLM2 as the bf16 shards in an OpenBLAS twin (loading uses no BLAS; "
        "test_model_load runs it)\n");
    return;
  }
  const char *gguf = test_real_model();
  if (!gguf) return;
  char folder[4200];
  test_scratch_file("smollm2-hf-bf16-shards", folder, sizeof folder);
  convert(gguf, folder, "--dtype bf16 --shards 3");
  Model *a = load_ok(gguf), *b = load_ok(folder);
  /* bf16 keeps 8 significant bits: half an ulp is at most 2^-8 of the value. */
  Difference d = compare_models(a, b, 1.0 / 256);
  printf(
      "SmolLM2 GGUF vs HF BF16 in 3 shards: %zu weights, max relative diff %g (bound 2^-8 = %g)\n",
      d.values, d.max_rel, 1.0 / 256);
  model_free(a);
  model_free(b);
}
END_TEST

/* ---- tiny models ---- */

/* arch "llama", "qwen2", "qwen3" or "llama-untied" (with output.weight / lm_head). */
static const char *tiny_folder(const char *arch, const char *name, const char *options) {
  static char folder[4300];
  char gguf[4300];
  make_scratch();
  snprintf(gguf, sizeof gguf, "%s/tiny_%s.gguf", scratch, arch);
  bool untied = !strcmp(arch, "llama-untied");
  TinySpec spec = {.arch = untied ? "llama" : arch, .untied = untied};
  tiny_gguf_write(&spec, gguf);
  snprintf(folder, sizeof folder, "%s/%s", scratch, name);
  convert(gguf, folder, options);
  return folder;
}

START_TEST(sharded_index_loads_exactly_as_a_single_file) {
  static const char *arches[] = {"llama", "qwen2", "llama-untied", "qwen3"};
  for (size_t i = 0; i < 4; i++) {
    char gguf[4300], single[4300], sharded[4300];
    snprintf(single, sizeof single, "%s", tiny_folder(arches[i], "single", "--dtype f32"));
    snprintf(sharded, sizeof sharded, "%s",
             tiny_folder(arches[i], "sharded", "--dtype f32 --shards 4"));
    snprintf(gguf, sizeof gguf, "%s/tiny_%s.gguf", scratch, arches[i]);
    Model *g = load_ok(gguf), *a = load_ok(single), *b = load_ok(sharded);
    Difference d1 = compare_models(a, b, 0.0), d2 = compare_models(g, a, 0.0);
    printf("tiny %s: single vs 4 shards %zu weights max |diff| %g; GGUF vs HF max |diff| %g\n",
           arches[i], d1.values, d1.max_abs, d2.max_abs);
    ck_assert(a->config.qkv_bias == (i == 1));
    ck_assert(a->config.qk_norm == (i == 3) && (a->weights.layers[1].k_norm != NULL) == (i == 3));
    ck_assert(a->config.tied_embeddings == (i != 2) && g->config.tied_embeddings == (i != 2));
    ck_assert((a->weights.output.data == a->weights.token_embedding.data) == (i != 2));
    model_free(g);
    model_free(a);
    model_free(b);
    char command[9000];
    snprintf(command, sizeof command, "rm -rf '%s' '%s'", single, sharded);
    ck_assert_int_eq(system(command), 0);
  }
}
END_TEST

START_TEST(f16_and_bf16_folders_match_within_their_rounding) {
  static const struct {
    const char *options;
    double bound;
  } cases[] = {
      {"--dtype f16", 1.0 / 2048}, /* 11 significant bits; tiny values are far from subnormal */
      {"--dtype bf16 --shards 2", 1.0 / 256},
  };
  for (size_t i = 0; i < 2; i++) {
    char name[16], gguf[4300];
    snprintf(name, sizeof name, "half%zu", i);
    const char *folder = tiny_folder("qwen2", name, cases[i].options);
    snprintf(gguf, sizeof gguf, "%s/tiny_qwen2.gguf", scratch);
    Model *a = load_ok(gguf), *b = load_ok(folder);
    Difference d = compare_models(a, b, cases[i].bound);
    printf("tiny qwen2 GGUF vs HF %s: max relative diff %g (bound %g)\n", cases[i].options,
           d.max_rel, cases[i].bound);
    ck_assert(d.max_rel > 0); /* the conversion really rounded */
    model_free(a);
    model_free(b);
  }
}
END_TEST

/* Writes folder/config.json: the tiny llama config with the fields of extra
 * ("\"name\": value," ...) replacing or added to its own; extra that is not
 * JSON members is written in front of them as given. */
static const char *config_folder(const char *name, const char *extra) {
  static char folder[4300];
  make_scratch();
  snprintf(folder, sizeof folder, "%s/%s", scratch, name);
  ck_assert_int_eq(obc_make_dirs(folder), 0);
  char path[4400];
  snprintf(path, sizeof path, "%s/config.json", folder);
  static const char base[] =
      "\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
      "\"hidden_size\": 16,"
      " \"intermediate_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
      " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-5, \"max_position_embeddings\": 64,"
      " \"vocab_size\": 40, \"rope_theta\": 10000.0, \"hidden_act\": \"silu\"";
  char text[4096];
  snprintf(text, sizeof text, "{%s}", base);
  cJSON *config = cJSON_Parse(text);
  ck_assert_ptr_nonnull(config);
  snprintf(text, sizeof text, "{%s", extra);
  char *comma = strrchr(text, ',');
  if (comma && !comma[1]) *comma = '\0';
  strcat(text, "}");
  cJSON *fields = cJSON_Parse(text);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  if (fields) {
    while (fields->child) {
      cJSON *item = cJSON_DetachItemViaPointer(fields, fields->child);
      cJSON_DeleteItemFromObjectCaseSensitive(config, item->string);
      cJSON_AddItemToObject(config, item->string, item);
    }
    char *printed = cJSON_Print(config);
    fputs(printed, fp);
    free(printed);
  } else {
    fprintf(fp, "{%s%s}", extra, base);
  }
  cJSON_Delete(fields);
  cJSON_Delete(config);
  fclose(fp);
  return folder;
}

START_TEST(unsupported_configs_are_refused_naming_the_field) {
  static const struct {
    const char *extra, *fragment;
    int code;
  } cases[] = {
      {"\"model_type\": \"mistral\",", "model_type: \"mistral\" is not supported",
       OBC_EUNSUPPORTED},
      /* Each family the runtime lacks: named, with the supported list. */
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", "
       "\"num_experts\": 128,",
       "model_type: \"qwen3_moe\" is not supported (supported: llama, qwen2, qwen3)",
       OBC_EUNSUPPORTED},
      {"\"architectures\": [\"Gemma2ForCausalLM\"], \"model_type\": \"gemma2\",",
       "model_type: \"gemma2\" is not supported (supported: llama, qwen2, qwen3)",
       OBC_EUNSUPPORTED},
      {"\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": \"phi3\",",
       "model_type: \"phi3\" is not supported (supported: llama, qwen2, qwen3)", OBC_EUNSUPPORTED},
      {"\"architectures\": [\"MistralForCausalLM\"], \"model_type\": \"mistral\", "
       "\"sliding_window\": 4096,",
       "model_type: \"mistral\" is not supported (supported: llama, qwen2, qwen3)",
       OBC_EUNSUPPORTED},
      /* Mistral weights under model_type llama still carry their window. */
      {"\"sliding_window\": 4096,", "sliding_window: sliding-window attention", OBC_EUNSUPPORTED},
      {"\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
       "\"layer_types\": [\"full_attention\", \"sliding_attention\"],",
       "layer_types", OBC_EUNSUPPORTED},
      {"\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
       "\"attention_bias\": true,",
       "attention_bias: biases on the attention projections of a qwen3 model", OBC_EUNSUPPORTED},
      {"\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3\",",
       "architectures: \"Qwen3MoeForCausalLM\" is not supported", OBC_EUNSUPPORTED},
      {"\"architectures\": [\"GemmaForCausalLM\"],", "architectures", OBC_EUNSUPPORTED},
      {"\"num_local_experts\": 8,", "num_local_experts", OBC_EUNSUPPORTED},
      {"\"use_sliding_window\": true,", "use_sliding_window", OBC_EUNSUPPORTED},
      {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0},", "rope_scaling.rope_type",
       OBC_EUNSUPPORTED},
      {"\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0},", "\"dynamic\"",
       OBC_EUNSUPPORTED},
      {"\"hidden_act\": \"gelu\",", "hidden_act", OBC_EUNSUPPORTED},
      {"\"attention_bias\": true,", "attention_bias", OBC_EUNSUPPORTED},
      {"\"mlp_bias\": true,", "mlp_bias", OBC_EUNSUPPORTED},
      {"\"hidden_size\": -16,", "hidden_size must be a positive integer", OBC_EFORMAT},
      {"\"num_key_value_heads\": 3,", "not a multiple of 3 KV heads", OBC_EUNSUPPORTED},
      {"\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0},",
       "low_freq_factor is missing", OBC_EFORMAT},
      {"\"rms_norm_eps\": \"small\",", "rms_norm_eps", OBC_EFORMAT},
      /* transformers 5's rope_parameters: refused like rope_scaling */
      {"\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6},",
       "rope_parameters.rope_type: type \"yarn\" is not supported", OBC_EUNSUPPORTED},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "config%zu", i);
    const char *folder = config_folder(name, cases[i].extra);
    Model *m = NULL;
    int rc = model_load(folder, &m);
    ck_assert_msg(rc == cases[i].code, "%s: rc %d (%s)", cases[i].extra, rc, obc_error_message());
    ck_assert_ptr_null(m);
    assert_message_names("config.json", cases[i].fragment);
  }
  printf("config refusal, e.g.: %s\n", obc_error_message());
  const char *folder = config_folder("nojson", "oops");
  Model *m = NULL;
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names("config.json", "invalid JSON");
  /* JSON leaves a repeated key's meaning open: refused, not read as the first. */
  folder = config_folder("twice", "oops");
  char path[4400];
  snprintf(path, sizeof path, "%s/config.json", folder);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  fputs(
      "{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"linear\", "
      "\"factor\": 2, \"factor\": 1}}",
      fp);
  fclose(fp);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names("config.json", "the key \"factor\" appears twice in one object");
  folder = config_folder("noweights", "");
  ck_assert_int_eq(model_load(folder, &m), OBC_ENOTFOUND);
  assert_message_names(folder, "no model.safetensors");
}
END_TEST

/* Writes folder NAME/config.json with exactly TEXT and reads it. */
static int read_config_text(const char *name, const char *text, ModelConfig *config) {
  char folder[4300], path[4400];
  make_scratch();
  snprintf(folder, sizeof folder, "%s/%s", scratch, name);
  ck_assert_int_eq(obc_make_dirs(folder), 0);
  snprintf(path, sizeof path, "%s/config.json", folder);
  FILE *fp = fopen(path, "w");
  ck_assert_ptr_nonnull(fp);
  fputs(text, fp);
  fclose(fp);
  return hf_config_read(folder, config);
}

/* A Qwen3-8B config.json as published (rope_theta at the top level), and as
 * transformers 5 saves it (rope_theta inside rope_parameters); without
 * head_dim, Qwen3Config's default 128, not hidden_size / heads. */
START_TEST(qwen3_config_reads_head_dim_and_rope_theta_either_way) {
  const char *published =
      "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
      "\"attention_bias\": false, \"head_dim\": 128, \"hidden_act\": \"silu\", "
      "\"hidden_size\": 4096, \"intermediate_size\": 12288, \"max_position_embeddings\": "
      "40960, \"max_window_layers\": 36, \"num_attention_heads\": 32, \"num_hidden_layers\": "
      "36, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, \"rope_scaling\": null, "
      "\"rope_theta\": 1000000, \"sliding_window\": null, \"tie_word_embeddings\": false, "
      "\"use_sliding_window\": false, \"vocab_size\": 151936}";
  ModelConfig c;
  ck_assert_msg(read_config_text("qwen3_8b", published, &c) == 0, "%s", obc_error_message());
  ck_assert_str_eq(c.architecture, "qwen3");
  ck_assert(c.qk_norm && !c.qkv_bias && !c.rope_interleaved && !c.tied_embeddings);
  ck_assert_uint_eq(c.head_dim, 128);
  ck_assert(c.rope_theta == 1e6 && c.rope_scaling == OBC_ROPE_NONE && c.norm_eps == 1e-6);
  const char *saved =
      "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
      "\"hidden_size\": 1024, \"intermediate_size\": 3072, \"max_position_embeddings\": "
      "40960, \"num_attention_heads\": 16, \"num_hidden_layers\": 28, "
      "\"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, \"rope_parameters\": "
      "{\"rope_theta\": 1000000, \"rope_type\": \"default\"}, \"layer_types\": "
      "[\"full_attention\", \"full_attention\"], \"vocab_size\": 151936}";
  ck_assert_msg(read_config_text("qwen3_saved", saved, &c) == 0, "%s", obc_error_message());
  ck_assert_uint_eq(c.head_dim, 128); /* not 1024 / 16 */
  ck_assert(c.rope_theta == 1e6);
  const char *per_type =
      "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
      "\"hidden_size\": 1024, \"intermediate_size\": 3072, \"max_position_embeddings\": "
      "40960, \"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"rope_parameters\": "
      "{\"full_attention\": {\"rope_theta\": 1000000}}, \"vocab_size\": 151936}";
  ck_assert_int_eq(read_config_text("qwen3_per_type", per_type, &c), OBC_EFORMAT);
  assert_message_names("config.json", "field rope_theta is missing");
}
END_TEST

/* transformers' _compute_llama3_parameters, restated: scale inv_freq, then the
 * divisor is the ratio. */
static double llama3_divisor(double theta, size_t head_dim, size_t i, double factor, double low,
                             double high, double original) {
  double inv = pow(theta, -(double)(2 * i) / (double)head_dim);
  double wavelen = 2 * M_PI / inv;
  double scaled = wavelen > original / low ? inv / factor : inv;
  double smooth = (original / wavelen - low) / (high - low);
  bool medium = !(wavelen < original / high) && !(wavelen > original / low);
  if (medium) scaled = (1 - smooth) * scaled / factor + smooth * scaled;
  return inv / scaled;
}

START_TEST(llama3_rope_scaling_follows_transformers) {
  /* Llama-3.1-8B's values. */
  ModelConfig c = {.head_dim = 128,
                   .rope_theta = 500000.0,
                   .rope_scaling = OBC_ROPE_LLAMA3,
                   .rope_factor = 8.0,
                   .rope_low_freq_factor = 1.0,
                   .rope_high_freq_factor = 4.0,
                   .rope_original_context = 8192};
  float factors[64];
  model_llama3_freq_factors(&c, factors);
  double max_diff = 0;
  size_t medium = 0;
  for (size_t i = 0; i < 64; i++) {
    double want = llama3_divisor(c.rope_theta, 128, i, 8.0, 1.0, 4.0, 8192.0);
    max_diff = fmax(max_diff, fabs(factors[i] - want) / want);
    if (factors[i] > 1.0f && factors[i] < 8.0f) medium++;
    if (i > 0) ck_assert(factors[i] >= factors[i - 1]);
  }
  printf("llama3 rope factors: %zu of 64 blended, max relative diff to the restatement %g\n",
         medium, max_diff);
  ck_assert(max_diff < 1e-6);
  ck_assert(factors[0] == 1.0f && factors[63] == 8.0f && medium > 0);

  /* Through model_load: a tiny folder whose config asks for llama3 scaling. */
  const char *folder = tiny_folder("llama", "llama3", "--dtype f32");
  char path[4400];
  snprintf(path, sizeof path, "%s/config.json", folder);
  cJSON *root = NULL;
  FILE *fp = fopen(path, "r");
  char text[8192] = "";
  ck_assert_ptr_nonnull(fp);
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  root = cJSON_Parse(text);
  ck_assert_ptr_nonnull(root);
  cJSON_DeleteItemFromObject(root, "rope_scaling");
  cJSON *scaling = cJSON_AddObjectToObject(root, "rope_scaling");
  cJSON_AddStringToObject(scaling, "rope_type", "llama3");
  cJSON_AddNumberToObject(scaling, "factor", 8.0);
  cJSON_AddNumberToObject(scaling, "low_freq_factor", 1.0);
  cJSON_AddNumberToObject(scaling, "high_freq_factor", 4.0);
  cJSON_AddNumberToObject(scaling, "original_max_position_embeddings", 64);
  char *out = cJSON_Print(root);
  fp = fopen(path, "w");
  fputs(out, fp);
  fclose(fp);
  free(out);
  cJSON_Delete(root);
  Model *m = load_ok(folder);
  ck_assert(m->config.rope_scaling == OBC_ROPE_LLAMA3);
  ck_assert_ptr_nonnull(m->weights.rope_freq_factors);
  double inv_freq[2];
  model_rope_inv_freq(m, inv_freq);
  /* wavelengths 2*pi (< 64/4: unscaled) and 200*pi (> 64/1: divided by 8) */
  ck_assert(inv_freq[0] == 1.0);
  ck_assert(fabs(inv_freq[1] - 0.01 / 8) < 1e-12);
  model_free(m);
}
END_TEST

/* ---- damaged safetensors ---- */

/* Rewrites the JSON header of a safetensors file in place, keeping its length
 * (padded with spaces) so the data offsets stay valid. */
static void edit_header(const char *path, const char *tensor, const char *dtype, const int *shape,
                        bool drop) {
  FILE *fp = fopen(path, "r+b");
  ck_assert_ptr_nonnull(fp);
  uint64_t length;
  ck_assert_uint_eq(fread(&length, 8, 1, fp), 1);
  char *text = calloc(length + 1, 1);
  ck_assert_uint_eq(fread(text, 1, length, fp), length);
  cJSON *root = cJSON_Parse(text);
  ck_assert_ptr_nonnull(root);
  cJSON *entry = cJSON_GetObjectItemCaseSensitive(root, tensor);
  ck_assert_ptr_nonnull(entry);
  if (drop) cJSON_DeleteItemFromObjectCaseSensitive(root, tensor);
  if (dtype) cJSON_ReplaceItemInObjectCaseSensitive(entry, "dtype", cJSON_CreateString(dtype));
  if (shape) cJSON_ReplaceItemInObjectCaseSensitive(entry, "shape", cJSON_CreateIntArray(shape, 2));
  char *out = cJSON_PrintUnformatted(root);
  ck_assert_uint_le(strlen(out), length);
  memset(text, ' ', length);
  memcpy(text, out, strlen(out));
  ck_assert_int_eq(fseek(fp, 8, SEEK_SET), 0);
  ck_assert_uint_eq(fwrite(text, 1, length, fp), length);
  fclose(fp);
  free(out);
  free(text);
  cJSON_Delete(root);
}

/* Rewrites the header of a safetensors file with the first tensor's "shape"
 * key renamed "dtype" (as long), so that its entry holds "dtype" twice. */
static void repeat_dtype(const char *path) {
  FILE *fp = fopen(path, "r+b");
  ck_assert_ptr_nonnull(fp);
  uint64_t length;
  ck_assert_uint_eq(fread(&length, 8, 1, fp), 1);
  char *text = calloc(length + 1, 1);
  ck_assert_uint_eq(fread(text, 1, length, fp), length);
  char *at = strstr(text, "\"shape\"");
  ck_assert_ptr_nonnull(at);
  memcpy(at, "\"dtype\"", 7);
  ck_assert_int_eq(fseek(fp, 8, SEEK_SET), 0);
  ck_assert_uint_eq(fwrite(text, 1, length, fp), length);
  fclose(fp);
  free(text);
}

START_TEST(damaged_safetensors_fail_naming_file_and_tensor) {
  const char *folder = tiny_folder("llama", "damaged", "--dtype f32");
  char file[4400], backup[4400], command[9000];
  snprintf(file, sizeof file, "%s/model.safetensors", folder);
  snprintf(backup, sizeof backup, "%s/model.safetensors.orig", folder);
  snprintf(command, sizeof command, "cp '%s' '%s'", file, backup);
  ck_assert_int_eq(system(command), 0);
  snprintf(command, sizeof command, "cp '%s' '%s'", backup, file);
  struct stat st;
  ck_assert_int_eq(stat(file, &st), 0);
  Model *m = NULL;

  size_t refused = 0;
  for (off_t length = st.st_size - 1; length >= 0; length -= (length > 4096 ? 509 : 7)) {
    ck_assert_int_eq(truncate(file, length), 0);
    ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
    ck_assert_ptr_null(m);
    assert_message_names(file, "truncated at offset");
    refused++;
  }
  printf("safetensors truncation: %zu prefixes refused, e.g. %s\n", refused, obc_error_message());

  ck_assert_int_eq(system(command), 0);
  edit_header(file, "model.layers.1.mlp.up_proj.weight", "I32", NULL, false);
  ck_assert_int_eq(model_load(folder, &m), OBC_EUNSUPPORTED);
  assert_message_names(file, "tensor model.layers.1.mlp.up_proj.weight has unsupported dtype I32");

  ck_assert_int_eq(system(command), 0);
  int shape[2] = {4, 32};
  edit_header(file, "model.layers.0.self_attn.k_proj.weight", NULL, shape, false);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(
      file, "tensor model.layers.0.self_attn.k_proj.weight has shape [4, 32], expected [8, 16]");

  ck_assert_int_eq(system(command), 0);
  int wrong_size[2] = {8, 17};
  edit_header(file, "model.layers.0.self_attn.k_proj.weight", NULL, wrong_size, false);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(file, "data bytes");

  ck_assert_int_eq(system(command), 0);
  repeat_dtype(file);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(file, "the header holds the key \"dtype\" twice in one object");

  ck_assert_int_eq(system(command), 0);
  edit_header(file, "model.norm.weight", NULL, NULL, true);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(folder, "tensor model.norm.weight is missing");

  ck_assert_int_eq(system(command), 0);
  FILE *fp = fopen(file, "r+b");
  ck_assert_int_eq(fseek(fp, 8, SEEK_SET), 0);
  fputc('x', fp); /* the header no longer parses */
  fclose(fp);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(file, "not a JSON object");

  ck_assert_int_eq(system(command), 0);
  fp = fopen(file, "r+b");
  uint64_t huge = 1ull << 40;
  fwrite(&huge, 8, 1, fp);
  fclose(fp);
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(file, "header length");
}
END_TEST

START_TEST(damaged_index_fails_naming_the_shard) {
  const char *folder = tiny_folder("llama", "index", "--dtype f32 --shards 2");
  char index[4400], text[65536];
  snprintf(index, sizeof index, "%s/model.safetensors.index.json", folder);
  FILE *fp = fopen(index, "r");
  size_t n = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[n] = '\0';
  cJSON *root = cJSON_Parse(text);
  cJSON *map = cJSON_GetObjectItem(root, "weight_map");
  /* one tensor claimed by the other shard */
  cJSON *entry = cJSON_GetObjectItem(map, "model.norm.weight");
  const char *other = strstr(entry->valuestring, "00001-of") ? "model-00002-of-00002.safetensors"
                                                             : "model-00001-of-00002.safetensors";
  cJSON_ReplaceItemInObject(map, "model.norm.weight", cJSON_CreateString(other));
  char *out = cJSON_Print(root);
  fp = fopen(index, "w");
  fputs(out, fp);
  fclose(fp);
  free(out);
  Model *m = NULL;
  ck_assert_int_eq(model_load(folder, &m), OBC_EFORMAT);
  assert_message_names(index, "tensor model.norm.weight is listed in");
  /* a shard that does not exist */
  cJSON_ReplaceItemInObject(map, "model.norm.weight",
                            cJSON_CreateString("model-00009-of-00009.safetensors"));
  out = cJSON_Print(root);
  fp = fopen(index, "w");
  fputs(out, fp);
  fclose(fp);
  free(out);
  ck_assert_int_eq(model_load(folder, &m), OBC_ENOTFOUND);
  assert_message_names("model-00009-of-00009.safetensors", "cannot open");
  cJSON_Delete(root);
}
END_TEST

static Suite *model_load_suite(void) {
  Suite *s = suite_create("model_load");
  TCase *real = tcase_create("real_model");
  tcase_set_timeout(real, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(real, smollm2_gguf_and_converted_f32_folder_hold_identical_weights);
  tcase_add_test(real, smollm2_bf16_shards_match_gguf_within_bf16_rounding);
  suite_add_tcase(s, real);
  TCase *tiny = tcase_create("tiny");
  tcase_set_timeout(tiny, TEST_TIMEOUT_S); /* tests/test_env.h */
  tcase_add_test(tiny, sharded_index_loads_exactly_as_a_single_file);
  tcase_add_test(tiny, qwen3_config_reads_head_dim_and_rope_theta_either_way);
  tcase_add_test(tiny, f16_and_bf16_folders_match_within_their_rounding);
  tcase_add_test(tiny, unsupported_configs_are_refused_naming_the_field);
  tcase_add_test(tiny, llama3_rope_scaling_follows_transformers);
  tcase_add_test(tiny, damaged_safetensors_fail_naming_file_and_tensor);
  tcase_add_test(tiny, damaged_index_fails_naming_the_shard);
  suite_add_tcase(s, tiny);
  return s;
}

int main(int argc, char **argv) {
  obc_startup_defaults(argv); /* the BLAS kernels users get (CONTRIBUTING.md, "Test") */
  test_scratch_begin("model_load");
  SRunner *runner = srunner_create(model_load_suite());
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return test_scratch_end(failed);
}
