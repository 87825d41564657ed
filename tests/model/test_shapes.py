"""ModelShape figures on the real config corpus, against published or hand-derived counts."""

from __future__ import annotations

import csv
import json

import pytest
from support.corpus import DATA, all_config_names, load_config, shape_of

from explorer.artifacts.offer import original_artifact, what_if_artifact
from explorer.errors import ExplorerError, MissingConfigKeysError, NotAModelConfigError
from explorer.model.shapes import shape_from_config

PUBLISHED = list(csv.DictReader((DATA / "published_params.csv").open()))


@pytest.mark.parametrize("row", PUBLISHED, ids=[r["hf_model_id"] for r in PUBLISHED])
def test_params_match_published_counts_exactly(row):
    shape = shape_of(row["fixture"].removesuffix(".json"))
    assert shape.params == int(row["published_params"])
    assert not shape.approximate


def test_llama_3_1_8b_worked_by_hand():
    s = shape_of("meta-llama__Meta-Llama-3.1-8B")
    # per layer: q 4096² + k,v 2·4096·1024 + o 4096² = 41,943,040; MLP 3·4096·14336 = 176,160,768;
    # two norms 8,192 → 218,112,000 × 32 = 6,979,584,000; embeddings and untied head 2·128256·4096
    # = 1,050,673,152; final norm 4,096 → 8,030,261,248.
    assert s.params == 32 * 218_112_000 + 2 * 128_256 * 4_096 + 4_096 == 8_030_261_248
    assert s.kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2 == 131_072
    assert s.weight_bytes() == 2 * 8_030_261_248
    assert s.attention == "GQA" and s.kv_heads == 8 and s.head_dim == 128
    assert s.max_context_tokens == 131_072


def test_qwen3_30b_a3b_active_params_by_hand():
    s = shape_of("Qwen__Qwen3-30B-A3B")
    assert s.params == 30_532_122_624
    # 128 experts, 8 active: each layer leaves 120 experts × 3·2048·768 unused.
    unused = 48 * 120 * 3 * 2048 * 768
    assert s.active_params == s.params - unused == 3_353_032_704
    assert s.moe.experts == 128 and s.moe.experts_per_token == 8 and s.moe.moe_intermediate_size == 768


def test_deepseek_v3_worked_examples():
    s = shape_of("deepseek-ai__DeepSeek-V3")
    assert s.kv_bytes_per_token() == 61 * 576 * 2 == 70_272  # MLA latent, not doubled
    assert s.attention == "MLA"
    assert s.moe.first_dense_layers == 3 and s.moe.experts == 256 and s.moe.shared_experts == 1
    # 671B in the main model, 37B activated (DeepSeek-V3 report); the Hub's "685B" adds the
    # 14B multi-token-prediction layer and the fp32 block scales (≈ 41.5M values).
    mtp = sum(t.elements for t in s.mtp)
    assert s.params - mtp == 671_026_419_200
    assert 37e9 < s.active_params < 38e9
    assert 13e9 < mtp < 14e9
    assert s.max_context_tokens == 4096 * 40  # yarn ×40 from 4,096
    # fp8 block 128×128: 1 byte a weight + a fp32 scale per block, non-Linear tensors in bf16
    assert 8.0 < s.bits_per_weight() < 8.1


def test_qwen3_235b_kv_per_token():
    s = shape_of("Qwen__Qwen3-235B-A22B")
    assert s.kv_bytes_per_token() == 94 * 2 * 4 * 128 * 2 == 192_512


@pytest.mark.parametrize(
    "name, expected",
    [
        # GPT-2 large: per layer 12h² + 13h with h = 1280, plus wte, wpe (1024 × h) and ln_f; head tied.
        ("openai-community__gpt2-large", 36 * (12 * 1280**2 + 13 * 1280) + 50257 * 1280 + 1024 * 1280 + 2 * 1280),
        # Phi-2: per layer LN 2h, q/k/v/dense with bias 4(h²+h), fc1/fc2 with bias 2·h·i + i + h;
        # embeddings, untied head with bias, final LN.
        (
            "microsoft__phi-2",
            32 * (2 * 2560 + 4 * (2560**2 + 2560) + 2 * 2560 * 10240 + 10240 + 2560)
            + 51200 * 2560 * 2
            + 51200
            + 2 * 2560,
        ),
        # Falcon-7B (old RefinedWeb): one LN, fused qkv of 71 q heads + 1 k + 1 v of 64, dense, 4h MLP, tied.
        (
            "tiiuae__falcon-7b.RefinedWeb-early",
            32 * (2 * 4544 + (71 + 2) * 64 * 4544 + 4544**2 + 8 * 4544**2) + 65024 * 4544 + 2 * 4544,
        ),
        # ChatGLM2-6B: fused qkv (32 + 2·2 groups)·128 with bias, dense, SwiGLU 2·13696, RMS norms, untied.
        (
            "THUDM__chatglm2-6b",
            28 * (2 * 4096 + (32 + 4) * 128 * (4096 + 1) + 4096**2 + 3 * 4096 * 13696) + 2 * 65024 * 4096 + 4096,
        ),
        # Qwen-72B (v1): fused c_attn with bias, c_proj, MLP of two 24,576 halves, RMS norms, untied.
        (
            "Qwen__Qwen-72B",
            80 * (2 * 8192 + 3 * 8192 * (8192 + 1) + 8192**2 + 3 * 8192 * 24576) + 2 * 152064 * 8192 + 8192,
        ),
        # GPT-NeoX (RedPajama-7B): 2 LNs, biased qkv, dense and 4h MLP, untied embed_out.
        (
            "togethercomputer__RedPajama-INCITE-7B-Base",
            32 * (4 * 4096 + 3 * 4096 * 4097 + 4096 * 4097 + 2 * 4096 * 16384 + 16384 + 4096)
            + 2 * 50432 * 4096
            + 2 * 4096,
        ),
        # Gemma-2-9B: 4 RMS norms a layer, GQA 16/8 × 256, tied: the published 9,241,705,984.
        ("google__gemma-2-9b-it", 9_241_705_984),
        # Mistral-7B-v0.1: the published 7,241,732,096.
        ("mistralai__Mistral-7B-v0.1", 7_241_732_096),
        # Phi-3-mini: the published 3,821,079,552.
        ("microsoft__Phi-3-mini-128k-instruct", 3_821_079_552),
        # Devstral-Small-2507: its safetensors index states total_parameters 23,572,403,200.
        ("mistralai__Devstral-Small-2507", 23_572_403_200),
        # Granite-3.1-1B-A400M (fp32): index total_size 5,338,513,408 bytes / 4.
        ("ibm-granite__granite-3.1-1b-a400m-instruct", 5_338_513_408 // 4),
        # Falcon-180B: index total_size / 2 bytes, less the copy of the tied head the checkpoint also stores.
        ("tiiuae__falcon-180B-chat", 359_045_130_240 // 2 - 65024 * 14848),
        # gpt-oss-20b: q/k/v/o with biases, sinks, router with bias, 32 fused biased experts, 2 norms, untied.
        (
            "openai__gpt-oss-20b",
            24
            * (
                64 * 64 * 2880 * 2
                + 2 * 8 * 64 * 2880
                + 64 * 64
                + 2 * 8 * 64
                + 2880
                + 64
                + 2 * 2880
                + 32 * 2880
                + 32
                + 32 * (2 * 2880 * 2880 + 2 * 2880 + 2880 * 2880 + 2880)
            )
            + 2 * 201088 * 2880
            + 2880,
        ),
    ],
)
def test_params_by_hand_for_other_families(name, expected):
    assert shape_of(name).params == expected


def test_nemotron_h_mamba_state_by_hand():
    s = shape_of("nvidia__Nemotron-H-56B-Base-8K")
    # 54 Mamba-2 layers: conv state (16384 + 2·8·256) × 3 values + SSM 256 heads × 64 × 256, bf16.
    per_seq = 54 * ((16384 + 2 * 8 * 256) * 3 * 2 + 256 * 64 * 256 * 2)
    assert s.kv_bytes(0) == per_seq
    # 10 attention layers grow: 2 × 8 × 128 × 2 bytes a token each.
    assert s.kv_bytes_per_token() == 10 * 2 * 8 * 128 * 2
    assert s.kv_bytes(8192) == per_seq + 8192 * 10 * 4096
    assert s.attention == "hybrid"


def test_qwen3_next_linear_attention_state_by_hand():
    s = shape_of("Qwen__Qwen3-Next-80B-A3B-Thinking")
    # 36 gated-delta-net layers: conv (2·16·128 + 32·128) × 3 and state 32 × 128 × 128, bf16.
    per_seq = 36 * ((2 * 2048 + 4096) * 3 * 2 + 32 * 128 * 128 * 2)
    assert s.kv_bytes(0) == per_seq
    assert s.kv_bytes_per_token() == 12 * 2 * 2 * 256 * 2
    assert s.kv_bytes(1000, sequences=3) == 3 * (per_seq + 1000 * 12 * 2048)


def test_sliding_window_layers_hold_their_window():
    s = shape_of("google__gemma-2-9b-it")  # 21 of 42 layers slide over 4,096 tokens
    per_layer = 2 * 8 * 256 * 2
    assert s.kv_bytes(8192) == 21 * per_layer * 8192 + 21 * per_layer * 4096
    assert s.kv_bytes(1000) == 42 * per_layer * 1000
    oss = shape_of("openai__gpt-oss-120b")  # 18 sliding (128 tokens) + 18 full layers
    assert oss.kv_bytes(131072) == 18 * 2 * 8 * 64 * 2 * (131072 + 128)


def test_medgemma_reads_text_config_and_pattern():
    s = shape_of("google__medgemma-27b-it")
    assert s.layers == 62 and s.hidden_size == 5376 and s.kv_heads == 16
    kinds = [layer.cache.kind for layer in s.decoder]
    assert kinds.count("full") == 10 and kinds.count("sliding") == 52
    assert s.vision_tower.heads == 16
    assert s.approximate  # the vision tower is sized as a standard ViT


def test_llava_sparse_text_config_filled_from_llama_defaults():
    s = shape_of("llava-hf__llava-1.5-7b-hf")
    assert s.hidden_size == 4096 and s.layers == 32 and s.vocab_size == 32064
    assert any("transformers defaults" in n for n in s.notes)


def test_quantised_checkpoints_weight_bytes():
    # Llama-2-13B GPTQ int4 g128: TheBloke's model.safetensors is 7.26 GB.
    gptq = shape_of("TheBloke__Llama-2-13B-chat-GPTQ")
    assert gptq.precision.method == "gptq"
    assert 7.2e9 < gptq.weight_bytes() < 7.3e9
    # gpt-oss-120b, MXFP4 experts: the published checkpoint is about 65 GB.
    assert 65.0e9 < shape_of("openai__gpt-oss-120b").weight_bytes() < 65.5e9
    # Qwen3-32B-FP8: everything Linear in fp8 with 128×128 scales, so about half of bf16 plus scales.
    fp8 = shape_of("Qwen__Qwen3-32B-FP8")
    assert fp8.weight_bytes("bf16") / 2 < fp8.weight_bytes() < fp8.weight_bytes("bf16") * 0.53


def test_modelopt_companion_file_sets_fp8():
    config = load_config("nvidia__Llama-3.1-70B-Instruct-FP8")
    companion = json.loads((DATA / "configs" / "nvidia__Llama-3.1-70B-Instruct-FP8.hf_quant_config.json").read_text())
    s = shape_from_config(config, companions={"hf_quant_config.json": companion})
    assert s.precision.method == "modelopt" and s.precision.kv_cache_hint == "fp8"
    # fp8 Linear weights + one fp32 scale each; embeddings, head and norms stay bf16
    embed_head = 2 * 128_256 * 8_192 * 2
    assert s.weight_bytes() < s.weight_bytes("bf16") / 2 + embed_head


@pytest.mark.parametrize("name", all_config_names())
def test_every_fixture_config_parses(name):
    s = shape_of(name)
    assert s.params > 0 and s.layers > 0 and s.kv_bytes_per_token() >= 0
    assert s.kv_bytes(4096) >= 0 and isinstance(s.kv_bytes(4096), int)
    assert s.weight_bytes() > 0 and isinstance(s.weight_bytes(), int)
    assert 0 < s.active_params <= s.params
    assert s.max_context_tokens > 0
    if s.approximate:
        assert s.notes, "an approximate shape must say why"


#: the corpus's approximate shapes and the reason each is approximate
APPROXIMATE = {
    "OpenGVLab__InternVL2-2B": "vision tower",
    "Qwen__Qwen-VL-Chat-Int4": "vision tower",
    "Qwen__Qwen2.5-VL-3B-Instruct": "vision tower",
    "Qwen__Qwen2.5-VL-7B-Instruct": "vision tower",
    "Qwen__Qwen3-VL-32B-Instruct": "vision tower",
    "Qwen__Qwen3.5-27B": "vision tower",
    "Qwen__Qwen3.5-397B-A17B": "vision tower",
    "allenai__olmOCR-7B-0225-preview": "vision tower",
    "google__medgemma-27b-it": "vision tower",
    "ibm-granite__granite-docling-258M": "vision tower",
    "llava-hf__llava-1.5-7b-hf": "vision tower",
    "meta-llama__Llama-4-Maverick-17B-128E-Instruct": "vision tower",
    "meta-llama__Llama-4-Scout-17B-16E-Instruct": "vision tower",
    "moonshotai__Kimi-K2.5": "vision tower",
    "nvidia__Kimi-K2.5-NVFP4": "vision tower",
    "deepseek-ai__DeepSeek-V4-Flash": "DeepSeek-V4 layout",
    "RedHatAI__DeepSeek-V4-Flash-NVFP4-FP8": "DeepSeek-V4 layout",
    "derived__Molmo-7B-D-bnb-nf4": "vision backbone",
}


def test_which_shapes_are_approximate_and_why():
    approximate = {n for n in all_config_names() if shape_of(n).approximate}
    assert approximate == set(APPROXIMATE)
    for name, reason in APPROXIMATE.items():
        assert any(reason in note for note in shape_of(name).notes), name


def test_unknown_architecture_is_best_effort_not_a_crash(config):
    cfg = config("meta-llama__Meta-Llama-3.1-8B")
    cfg["model_type"] = "brand_new_lm"
    cfg["architectures"] = ["BrandNewForCausalLM"]
    s = shape_from_config(cfg)
    assert s.approximate and "unknown architecture" in s.notes[0]
    assert s.params == 8_030_261_248  # read as a Llama-like decoder
    assert s.family == "generic"


def test_unknown_architectures_with_mla_keys_are_read_as_mla(config):
    # An unknown model_type whose config has kv_lora_rank and qk_rope_head_dim (MiniCPM3 and other
    # DeepSeek-style decoders; here DeepSeek-V3's own config under a new name): the latent is cached,
    # 61 layers × (512 + 64) × 2 bytes = 70,272 a token, where a Llama-like read cached 1,748,992 (25×)
    cfg = config("deepseek-ai__DeepSeek-V3")
    cfg["model_type"] = "minicpm3_like"
    cfg["architectures"] = ["NewMLAForCausalLM"]
    s, known = shape_from_config(cfg), shape_of("deepseek-ai__DeepSeek-V3")
    assert s.family == "mla" and s.approximate and "kv_lora_rank and qk_rope_head_dim" in s.notes[0]
    assert s.kv_bytes_per_token() == known.kv_bytes_per_token() == 61 * 576 * 2
    assert s.params == known.params


def test_not_a_model_config_is_refused():
    with pytest.raises(NotAModelConfigError, match="not a model config"):
        shape_from_config({"producer": {"name": "modelopt"}, "quantization": {}})
    with pytest.raises(NotAModelConfigError):
        shape_from_config([1, 2, 3])  # type: ignore[arg-type]


def test_missing_keys_are_all_named(config):
    cfg = config("Qwen__Qwen2.5-7B")
    for key in ("hidden_size", "num_hidden_layers", "vocab_size"):
        del cfg[key]
    with pytest.raises(MissingConfigKeysError) as err:
        shape_from_config(cfg, name="broken.json")
    message = str(err.value)
    assert "hidden_size" in message and "num_hidden_layers" in message and "vocab_size" in message
    assert isinstance(err.value, ExplorerError)


def test_clamp_context_holds_a_context_to_the_model_limit():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    assert shape.max_context_tokens == 131_072
    assert shape.clamp_context(4096) == 4096 and shape.clamp_context(1_000_000) == 131_072


def test_an_artifacts_precision_reads_its_label_back():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    assert shape.precision_of(original_artifact(shape)) is shape.precision
    for name in ("fp8-online", "int4-awq", "nf4", "Q4_K_M"):
        artifact = what_if_artifact(shape, name)  # labelled "fp8 per-tensor, online", "int4 AWQ g128"…
        assert artifact.what_if and shape.precision_of(artifact) == shape.resolve_precision(name)
    # fp8 with none published is what the engine's --quantization fp8 makes: per-tensor scales, not 128 × 128 blocks
    assert what_if_artifact(shape, "fp8").quant == "fp8 per-tensor, online"


@pytest.mark.parametrize(
    ("rope_scaling", "expected"),
    [
        # vLLM _get_and_verify_max_len: linear and dynamic scale the stated length (the 65,536 tokens)
        ({"type": "linear", "factor": 2.0}, 65_536),
        ({"rope_type": "dynamic", "factor": 4.0}, 131_072),
        # YaRN scales its original length: 8,192 × 4
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8_192}, 32_768),
        # YaRN without an original length scales the stated one
        ({"rope_type": "yarn", "factor": 2.0}, 65_536),
        # Llama 3 and LongRoPE configs state the extended length already
        ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8_192}, 32_768),
        ({"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}, 32_768),
        ({"rope_type": "linear", "factor": 1.0}, 32_768),
    ],
)
def test_rope_scaling_extends_the_context_as_vllm_does(rope_scaling, expected):
    config = load_config("meta-llama__Meta-Llama-3.1-8B")
    config.update(max_position_embeddings=32_768, rope_scaling=rope_scaling)
    shape = shape_from_config(config, name="rope")
    assert shape.max_position_embeddings == 32_768
    assert shape.max_context_tokens == expected
    assert shape.clamp_context(1_000_000) == expected


def test_gemma3_states_its_scaled_length_already():
    config = load_config("google__medgemma-27b-it")
    assert config["text_config"]["rope_scaling"] == {"factor": 8.0, "rope_type": "linear"}
    shape = shape_from_config(config, name="medgemma")
    assert shape.max_context_tokens == 131_072  # the stated length: linear ×8 is not applied again
