/* Hugging Face config.json -> ModelConfig, for LlamaForCausalLM,
 * Qwen2ForCausalLM and Qwen3ForCausalLM checkpoints. Anything the runtime
 * cannot run faithfully (other model types such as qwen3_moe, gemma, phi3 or
 * mistral, mixture of experts, sliding-window attention, rope
 * scaling other than llama3/linear, biases on o_proj or the MLP, activations
 * other than SiLU) is refused with an error naming config.json and the field. */
#ifndef OBC_HF_CONFIG_H
#define OBC_HF_CONFIG_H

#include "model/model.h"

/* Reads <folder>/config.json into *config (name = the folder's last component,
 * rope_interleaved = false: Hugging Face weights use the half-split layout). */
int hf_config_read(const char *folder, ModelConfig *config);

#endif
