/* `obcache model-info`: what a model file or folder holds — its format, the
 * tensor table (types and sizes as stored, read from the headers only), and,
 * unless --no-load, the configuration model_load derives, the fp32 weight size,
 * the stored types the matrices are held in, and the load time. Useful to check a checkpoint before a long capture. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/obc_error.h"
#include "common/obc_options.h"
#include "common/obc_time.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "formats/safetensors.h"

static const char *usage =
    "usage: obcache model-info [--model PATH] [--tensors] [--no-load]\n"
    "                          [--weights native|f32]\n"
    "\n"
    "Prints the format and tensor table of a GGUF file or Hugging Face folder, then\n"
    "loads it and prints the configuration, the fp32 weight size, the types the\n"
    "matrices are held in and the load time. --tensors lists every tensor (name,\n"
    "stored type, shape as the file writes it); --no-load stops after the table.\n";

static void print_gguf_table(const GgufFile *file, int list) {
  size_t counts[64] = {0}, other = 0, bytes = 0;
  for (size_t i = 0; i < gguf_tensor_count(file); i++) {
    const GgufTensor *t = gguf_tensor(file, i);
    if (t->type < 64)
      counts[t->type]++;
    else
      other++;
    bytes += t->n_bytes;
    if (list) {
      printf("  %-40s %-11s [", t->name, gguf_type_name(t->type));
      for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%" PRIu64, d ? ", " : "", t->dims[d]);
      printf("]\n");
    }
  }
  printf("format: GGUF v%" PRIu32 ", alignment %zu, %zu metadata keys\n", gguf_version(file),
         gguf_alignment(file), gguf_metadata_count(file));
  printf("tensors: %zu (", gguf_tensor_count(file));
  const char *sep = "";
  for (uint32_t type = 0; type < 64; type++) {
    if (!counts[type]) continue;
    if (gguf_type_block_size(type))
      printf("%s%s %zu", sep, gguf_type_name(type), counts[type]);
    else
      printf("%stype %" PRIu32 " %zu", sep, type, counts[type]);
    sep = ", ";
  }
  if (other) printf("%sother %zu", sep, other);
  printf("), %.1f MB of tensor data\n", (double)bytes / 1e6);
}

static void print_safetensors_table(const SafetensorsModel *st, int list) {
  size_t f32 = 0, f16 = 0, bf16 = 0, other = 0, bytes = 0;
  for (size_t i = 0; i < safetensors_tensor_count(st); i++) {
    const SafetensorsTensor *t = safetensors_tensor(st, i);
    f32 += t->dtype == OBC_ST_F32;
    f16 += t->dtype == OBC_ST_F16;
    bf16 += t->dtype == OBC_ST_BF16;
    other += t->dtype == OBC_ST_UNSUPPORTED;
    bytes += t->n_bytes;
    if (list) {
      printf("  %-48s %-5s [", t->name, t->dtype_name);
      for (size_t d = 0; d < t->n_dims; d++) printf("%s%" PRIu64, d ? ", " : "", t->shape[d]);
      printf("]\n");
    }
  }
  printf("format: Hugging Face folder (safetensors)\n");
  printf("tensors: %zu (F32 %zu, F16 %zu, BF16 %zu, other %zu), %.1f MB of tensor data\n",
         safetensors_tensor_count(st), f32, f16, bf16, other, (double)bytes / 1e6);
}

static void print_config(const Model *m, double seconds) {
  const ModelConfig *c = &m->config;
  static const char *scaling[] = {"none", "llama3", "linear"};
  printf("name: %s\n", c->name);
  printf(
      "config: %s, %zu layers, dim %zu, ffn %zu, heads %zu (kv %zu), head_dim %zu, vocab %zu, "
      "context %zu\n",
      c->architecture, c->n_layers, c->dim, c->ffn_dim, c->n_heads, c->n_kv_heads, c->head_dim,
      c->vocab_size, c->context_length);
  printf("        rms eps %g, rope theta %g on %s, rope scaling %s", c->norm_eps, c->rope_theta,
         c->rope_interleaved ? "interleaved pairs" : "halves", scaling[c->rope_scaling]);
  if (c->rope_scaling != OBC_ROPE_NONE && c->rope_factor > 0)
    printf(" (factor %g)", c->rope_factor);
  if (c->rope_scaling == OBC_ROPE_LLAMA3 && c->rope_factor == 0)
    printf(" (from rope_freqs.weight)");
  printf(", tied embeddings %s, qkv bias %s, q/k norm %s\n", c->tied_embeddings ? "yes" : "no",
         c->qkv_bias ? "yes" : "no", c->qk_norm ? "yes" : "no");
  size_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
  size_t per_layer = 2 * c->dim + (q + 2 * kv) * c->dim + c->dim * q + 3 * c->ffn_dim * c->dim +
                     (c->qkv_bias ? q + 2 * kv : 0) + (c->qk_norm ? 2 * c->head_dim : 0);
  size_t params =
      c->vocab_size * c->dim * (c->tied_embeddings ? 1 : 2) + c->dim + c->n_layers * per_layer;
  char held[256];
  model_weights_describe(m, held, sizeof held);
  printf("weights: %.1fM parameters, %.0f MB in fp32, loaded in %.2f s\n", (double)params / 1e6,
         (double)params * 4 / 1e6, seconds);
  printf("matrices held: %s\n", held);
  if (m->tokenizer)
    printf("tokenizer: %zu tokens, BOS %" PRId32 ", EOS %" PRId32 "\n",
           tokenizer_vocab_size(m->tokenizer), tokenizer_bos_id(m->tokenizer),
           tokenizer_eos_id(m->tokenizer));
  else
    printf("tokenizer: none\n");
}

int cmd_model_info(int argc, char **argv) {
  const char *path = NULL;
  bool list = false, no_load = false;
  ModelWeightsMode weights = MODEL_WEIGHTS_NATIVE;
  const ObcOption options[] = {
      OBC_OPT_TEXT("--model", "PATH", &path, "GGUF file or Hugging Face folder",
                   .default_text = MODEL_DEFAULT_TEXT),
      OBC_OPT_FLAG("--tensors", &list,
                   "list every tensor (name, stored type, shape as the file writes it)"),
      OBC_OPT_FLAG(
          "--no-load", &no_load,
          "stop after the table (with --weights f32, loading needs 4 bytes per parameter)"),
      MODEL_WEIGHTS_OPTION(&weights),
  };
  const ObcOptionList option_list = OBC_OPTION_LIST(options);
  ObcArguments args;
  int parsed = obc_options_parse("model-info", &option_list, 1, argc, argv, &args);
  if (parsed) return parsed;
  if (args.help) {
    obc_options_print_usage(stdout, usage, &option_list, 1);
    return 0;
  }
  if (args.n_positional)
    return obc_fail(OBC_EINVAL, "unexpected argument '%s' (try obcache model-info --help)",
                    args.positional[0]);
  if (!path) path = model_default_path();
  bool folder = false;
  int rc = model_locate(path, &folder, NULL);
  if (rc) return rc;
  printf("model: %s\n", path);
  if (folder) {
    SafetensorsModel *tensors;
    if ((rc = safetensors_open_folder(path, &tensors))) return rc;
    print_safetensors_table(tensors, list);
    safetensors_close(tensors);
  } else {
    GgufFile *file;
    if ((rc = gguf_open(path, &file))) return rc;
    print_gguf_table(file, list);
    gguf_close(file);
  }
  if (no_load) return 0;
  double start = obc_now_seconds();
  Model *model;
  if ((rc = model_load_with(path, &(ModelLoadOptions){.weights = weights}, &model))) return rc;
  print_config(model, obc_now_seconds() - start);
  model_free(model);
  return 0;
}
