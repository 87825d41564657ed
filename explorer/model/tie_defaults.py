"""Whether the LM head is tied to the token embeddings when a config does not say.

transformers fills an absent ``tie_word_embeddings`` from the model's config class, and the default
differs by architecture: ``LlamaConfig`` and ``Qwen3Config`` untie (False), ``Gemma3TextConfig``,
``MiniCPM3Config`` and ``SmolLM3Config`` tie (True). Before this table explorer untied every config that
did not say (MiniCPM3-4B: +4.6 % parameters, a second 73,448 × 2,560 matrix).

Source: the class defaults of ``transformers/models/*/configuration_*.py`` in transformers 5.24.0 (PyPI
wheel), read with ``ast``: the ``tie_word_embeddings`` field or ``__init__`` default of each class with a
``model_type``. Classes that declare none (composite and vision configs) are absent: their builder's
default stands.
"""

from __future__ import annotations

# fmt: off
#: model types whose config class ties the LM head to the embeddings by default
TIED_BY_DEFAULT: frozenset[str] = frozenset({
    "albert", "aya_vision", "bart", "bert", "bert-generation", "big_bird", "bigbird_pegasus", "biogpt",
    "blenderbot", "blenderbot-small", "blip", "blip_text_model", "bloom", "camembert", "canary", "cohere",
    "cohere2", "cohere2_moe", "cohere2_vision", "cohere_compass_text", "convbert", "cpmant", "ctrl", "d_fine",
    "dab-detr", "data2vec-text", "deberta", "deberta-v2", "deepseek_vl", "deepseek_vl_hybrid", "deformable_detr",
    "deimv2", "diffusion_gemma", "diffusion_gemma_text", "distilbert", "electra", "ernie", "ernie4_5",
    "ernie4_5_moe", "ernie4_5_vl_moe", "ernie4_5_vl_moe_text", "esm", "falcon", "falcon_mamba", "fine_acoustics",
    "flaubert", "flava", "florence2", "fnet", "fun_asr_nano", "funnel", "gemma", "gemma2", "gemma3", "gemma3_text",
    "gemma3n", "gemma3n_text", "gemma4", "gemma4_assistant", "gemma4_text", "gemma4_unified",
    "gemma4_unified_assistant", "gemma4_unified_text", "glmasr", "got_ocr2", "gpt2", "gpt_bigcode", "gpt_neo",
    "gpt_neox_japanese", "granite_docling", "granite_docling_text", "granite_speech", "granite_speech5_ctc",
    "granite_speech_plus", "granite_swa", "grounding-dino", "gte", "hunyuan_vl", "hunyuan_vl_text",
    "hyperclovax_vision_v2", "ibert", "internvl", "janus", "jetmoe", "jina_embeddings_v3", "kimi_k25", "kosmos-2",
    "kosmos-2.5", "kosmos_2_5_text_model", "kosmos_2_text_model", "lara_mini", "layoutlm", "led", "lfm2",
    "lfm2_moe", "lfm2_vl", "lfm3", "lfm3_vl", "lighton_ocr", "longformer", "longt5", "luke", "lxmert", "m2m_100",
    "mamba", "marian", "mbart", "megatron-bert", "mimi", "minicpm3", "minicpm_ocr", "mistral3", "mm-grounding-dino",
    "mobilebert", "modernbert", "modernbert-decoder", "moonshine", "moss_transcribe_diarize", "mpnet", "mpt", "mra",
    "mt5", "mvp", "neomme", "nllb-moe", "nystromformer", "openai-gpt", "opt", "ovis2", "paddleocr_vl",
    "paddleocr_vl_text", "paligemma", "pe_audio_video", "pegasus", "pegasus_x", "plbart", "pop2piano",
    "pp_chart2table", "pp_doclayout_v3", "pp_doclayout_v4", "prophetnet", "qwen2_5_omni_text", "qwen3_asr",
    "qwen3_vl_moe_text", "recurrent_gemma", "roberta", "roberta-prelayernorm", "roc_bert", "roformer", "rt_detr_v2",
    "sam", "sam_hq", "seamless_m4t", "seamless_m4t_v2", "smollm3", "speech_to_text", "speecht5", "squeezebert",
    "starcoder2", "switch_transformers", "t5_gemma_module", "t5gemma", "t5gemma2", "t5gemma2_decoder",
    "t5gemma2_encoder", "t5gemma2_text", "tapas", "trocr", "udop", "vaultgemma", "vilt", "visual_bert",
    "voxtral_realtime", "whisper", "xglm", "xlm", "xlm-roberta", "xlm-roberta-xl", "xlnet", "xmod", "yoso", "youtu",
    "zamba", "zamba2", "zaya",
})

#: model types whose config class unties them by default
UNTIED_BY_DEFAULT: frozenset[str] = frozenset({
    "afmoe", "apertus", "apertus1p5", "apertus1p5_text", "arcee", "aria", "aria_text", "axk1", "axk2",
    "bailing_hybrid", "bamba", "beam", "bitnet", "blt", "blt_global_transformer", "blt_local_decoder",
    "blt_patcher", "bridgetower", "chameleon", "codegen", "cohere_asr", "cohere_compass", "cosmos3_edge",
    "cosmos3_edge_text", "cosmos3_omni", "cwm", "dbrx", "deepseek_ocr2", "deepseek_ocr2_encoder",
    "deepseek_ocr2_text", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "diffllama", "doge", "dory",
    "dots1", "dots3_note", "dots3_note_text", "emu3", "emu3_text_model", "esmc", "eurobert", "evolla", "exaone",
    "exaone4", "exaone4_5", "exaone_moe", "falcon_h1", "fast_vlm", "flex_olmo", "flint", "fsmt", "fuyu", "git",
    "glm", "glm4", "glm46v", "glm4_moe", "glm4_moe_lite", "glm4v", "glm4v_moe", "glm4v_moe_text", "glm5_next",
    "glm5_next_text", "glm_image", "glm_moe_dsa", "glm_ocr", "glmga", "gpt_neox", "gpt_oss", "gptj", "granite",
    "granite4_vision", "granite4_vision_text", "granitemoe", "granitemoe_swa", "granitemoehybrid",
    "granitemoeshared", "helium", "higgs_audio_v2", "hrm_text", "hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3",
    "hy_v4", "hy_v4_vl", "hy_v4_vl_text", "hyperclovax", "idefics", "idefics2", "idefics3", "imagegpt", "internlm3",
    "iquestcoder", "jais2", "jamba", "kimi_linear", "kolibri1", "kyutai_speech_to_text", "laguna", "llama",
    "llama4", "llama4_text", "llava", "llava_next", "llava_next_video", "llava_onevision", "longcat_flash",
    "mamba2", "mellum", "mimo_v2_flash", "minicpmv4_6", "minicpmv4_7", "minimax", "minimax_m2", "minimax_m3_vl",
    "minimax_m3_vl_text", "ministral", "ministral3", "mistral", "mistral4", "mistral_large4", "mistral_large4_text",
    "mixtral", "mllama_text_model", "modernvbert", "molmo2", "molmo2_text", "moonshine_streaming", "moshi",
    "moshi_depth", "muse_glimmer_text", "muse_spark_text", "musicgen_decoder", "musicgen_melody_decoder",
    "nanochat", "nemotron", "nemotron_h", "neucodec", "olmo", "olmo2", "olmo3", "olmo_hybrid", "olmoe",
    "openai_privacy_filter", "persimmon", "phi", "phi3", "phi4_multimodal", "phimoe", "pix2struct",
    "pix2struct_text_model", "pp_formulanet_text", "qianfan_ocr", "qwen2", "qwen2_5_omni_talker",
    "qwen2_5_omni_thinker", "qwen2_5_vl", "qwen2_moe", "qwen2_vl", "qwen3", "qwen3_5", "qwen3_5_moe",
    "qwen3_5_moe_text", "qwen3_5_text", "qwen3_moe", "qwen3_next", "qwen3_omni_moe_talker_code_predictor",
    "qwen3_omni_moe_talker_text", "qwen3_omni_moe_thinker", "qwen3_vl", "qwen3_vl_moe", "qwen4_exp",
    "qwen4_exp_text", "reformer", "rembert", "rwkv", "sarvam_mla", "sarvam_moe", "seed_oss", "shieldgemma2",
    "smolvlm", "solar_open", "stablelm", "step3p5", "ultrabert", "ultravbert", "unlimited_ocr",
    "unlimited_ocr_text", "video_llama_3", "video_llava", "vipllava", "xcodec2", "xlstm",
})
# fmt: on


def default_tied(model_types: tuple[str, ...], fallback: bool) -> bool:
    """transformers' default for the first of ``model_types`` (the text model's, then the wrapper's) that
    declares one; ``fallback`` (the architecture builder's own) when none does."""
    for model_type in model_types:
        if model_type in TIED_BY_DEFAULT:
            return True
        if model_type in UNTIED_BY_DEFAULT:
            return False
    return fallback
