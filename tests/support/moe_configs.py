"""Published MoE checkpoints' config.json fields that issue 23's layouts are tested on, kept out of the config corpus
(tests/data/configs feeds the shipped snapshot, and MiniMax-M2's architecture is read as a generic decoder there).

Each holds the fields explorer reads, as the repository publishes them:

- ``moonshotai/Kimi-K2-Instruct``: ai-dynamo/aiconfigurator ``src/aiconfigurator/model_configs/
  moonshotai--Kimi-K2-Instruct_config.json`` (821eb9a), plus the checkpoint's ``quantization_config`` (fp8 e4m3,
  dynamic activations, ``weight_block_size`` [128, 128]; 959 GB of safetensors);
- ``Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8``: the published config.json (62 layers, 96 heads / 8 KV heads, 160
  experts of 2,560); its ``modules_to_not_convert`` names ``lm_head`` and every layer's norms and router gate, which
  are never quantised by explorer's rules either, so only ``lm_head`` is kept here;
- ``MiniMaxAI/MiniMax-M2``: the published config.json (62 layers, 48 heads / 8 KV heads of 128, 256 experts of
  1,536, ``max_position_embeddings`` 196,608; fp8 block 128 × 128).
"""

from __future__ import annotations

from functools import cache

FP8_BLOCK = {"activation_scheme": "dynamic", "quant_method": "fp8", "weight_block_size": [128, 128]}

KIMI_K2 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "kimi_k2",
    "num_hidden_layers": 61,
    "hidden_size": 7168,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "intermediate_size": 18432,
    "vocab_size": 163840,
    "max_position_embeddings": 131072,
    "n_routed_experts": 384,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "routed_scaling_factor": 2.827,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "quantization_config": {**FP8_BLOCK, "fmt": "e4m3"},
}

QWEN3_CODER_480B_FP8 = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "num_hidden_layers": 62,
    "hidden_size": 6144,
    "intermediate_size": 8192,
    "moe_intermediate_size": 2560,
    "num_experts": 160,
    "num_experts_per_tok": 8,
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "norm_topk_prob": True,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "quantization_config": {**FP8_BLOCK, "fmt": "e4m3", "modules_to_not_convert": ["lm_head"]},
}

MINIMAX_M2 = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "model_type": "minimax_m2",
    "vocab_size": 200064,
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rotary_dim": 64,
    "num_local_experts": 256,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 196608,
    "shared_intermediate_size": 0,
    "scoring_func": "sigmoid",
    "use_qk_norm": True,
    "use_routing_bias": True,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-06,
    "rope_theta": 5000000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        **FP8_BLOCK,
        "fmt": "float8_e4m3fn",
        "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"],
    },
}

CONFIGS = {
    "moonshotai/Kimi-K2-Instruct": KIMI_K2,
    "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8": QWEN3_CODER_480B_FP8,
    "MiniMaxAI/MiniMax-M2": MINIMAX_M2,
}


@cache
def moe_shape(repo: str):
    """The (cached) ModelShape of one of :data:`CONFIGS`."""
    from explorer.model.shapes import shape_from_config

    return shape_from_config(CONFIGS[repo], name=repo)
