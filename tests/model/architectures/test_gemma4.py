"""explorer.model.architectures.gemma4: Gemma 4's tensors and caches, worked by hand from transformers' classes.

The 26B-A4B is the published config (tests/data/configs); the E2B is its text config's fields as Google publishes
them (hidden 1,536, 35 layers, one KV head of 256 / 512, 20 KV-shared layers, per-layer embeddings of 256, a
double-wide MLP in the shared layers), written out here.
"""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.engines.llamacpp.kv import cache_layout
from explorer.engines.llamacpp.settings import LlamaCppSettings, resolve_context
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.errors import InvalidConfigValueError
from explorer.model.dtypes import element_type
from explorer.model.kv_cache import FullAttention, NoCache, SlidingWindowAttention
from explorer.model.shapes import shape_from_config
from explorer.units import GiB, MiB

MOE = "google__gemma-4-26B-A4B"
BF16 = element_type("bf16")
E2B_TEXT = {
    "model_type": "gemma4_text",
    "architectures": ["Gemma4ForCausalLM"],
    "hidden_size": 1536,
    "num_hidden_layers": 35,
    "intermediate_size": 6144,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_kv_shared_layers": 20,
    "hidden_size_per_layer_input": 256,
    "vocab_size_per_layer_input": 262144,
    "vocab_size": 262144,
    "sliding_window": 512,
    "attention_k_eq_v": False,
    "use_double_wide_mlp": True,
    "enable_moe_block": False,
    "tie_word_embeddings": True,
    "max_position_embeddings": 131072,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
    "torch_dtype": "bfloat16",
}


def test_the_26b_a4b_parameters_tensor_by_tensor():
    """Text: embeddings 262,144 × 2,816 = 738,197,504 and the final norm 2,816.
    A sliding layer: q 4,096 × 2,816, k and v 2,048 × 2,816, o 2,816 × 4,096 (34,603,008), q/k norms 2 × 256, four
    norms 11,264, the layer scalar 1, the dense MLP 3 × 2,112 × 2,816 = 17,842,176, the router 128 × 2,816 + 2,816 +
    128, the experts 128 × (1,408 + 704) × 2,816 = 761,266,176 and three more norms 8,448: 814,094,977.
    A full layer: q 8,192 × 2,816, k 1,024 × 2,816, no v (K is V), o 2,816 × 8,192 (49,020,928), norms 2 × 512, the
    rest as above: 828,513,409. 25 sliding + 5 full + embeddings = 25,233,141,790 (Google: 25.2B), and a vision
    tower of 572,794,416 beside it."""
    shape = shape_of(MOE)
    text = sum(t.elements for t in shape.embeddings + shape.head) + sum(
        t.elements for layer in shape.decoder for t in layer.tensors
    )
    assert text == 738_197_504 + 2_816 + 25 * 814_094_977 + 5 * 828_513_409 == 25_233_141_790
    assert shape.params == text + 572_794_416
    assert not shape.approximate
    # active: 8 of 128 experts a token, 3,822,530,590 (Google: 3.8B active)
    assert shape.active_params == 3_822_530_590


def test_the_26b_a4b_caches_k_as_v_and_two_head_sizes():
    """Sliding layers: 8 KV heads of 256, K and V: 8,192 bytes a token in bf16. Full layers: 2 heads of 512, K reused
    as V in the weights, but vLLM (K loaded into V's slot) and llama.cpp (V = K) both cache V: 4,096 bytes a token."""
    shape = shape_of(MOE)
    sliding, full = shape.decoder[0].cache, shape.decoder[5].cache
    assert sliding == SlidingWindowAttention(kv_heads=8, head_dim=256, v_head_dim=256, window=1024)
    assert full == FullAttention(kv_heads=2, head_dim=512, v_head_dim=512)
    assert sliding.bytes_per_token(BF16) == 8 * 256 * 2 * 2 == 8192
    assert full.bytes_per_token(BF16) == 2 * 512 * 2 * 2 == 4096
    assert not any(t.module.endswith("v_proj") for t in shape.decoder[5].tensors)


def test_llamacpp_caches_of_the_26b_a4b_as_the_published_log():
    """The RTX PRO 6000 log (tests/data/engine_logs): n_ctx 262,144, one sequence, n_ubatch 512, f16. Global cache:
    262,144 cells × 5 layers × (1,024 K + 1,024 V) × 2 bytes = 5,120 MiB; SWA cache PAD(1,024 + 512, 256) = 1,536
    cells × 25 layers × (2,048 + 2,048) × 2 = 300 MiB. The log prints both figures."""
    model = llama_model_from_shape(shape_of(MOE), "Q4_K_M")
    ctx = resolve_context(LlamaCppSettings(n_ctx=262_144, n_ubatch=512, flash_attn="on"), n_ctx_train=262_144)
    kv, swa = cache_layout(model, ctx, swa_full=False, unified=False)
    assert (kv.cells, len(kv.layers), kv.total_bytes) == (262_144, 5, 5120 * MiB)
    assert (swa.cells, len(swa.layers), swa.total_bytes) == (1536, 25, 300 * MiB)


def test_llamacpp_what_if_of_the_moe_is_llama_quantizes_mix():
    """A mixture of experts' what-if takes explorer.gguf.mix's per-tensor types: 16,780,191,864 bytes at Q4_K_M
    (15.63 GiB; tests/gguf/test_mix.py works the experts), every tensor once; the card holds all of it with the tied
    output's copy of token_embd (605,552,640 bytes at Q6_K) in place of the host's."""
    model = llama_model_from_shape(shape_of(MOE), "Q4_K_M")
    assert model.weight_bytes == 16_780_191_864
    assert model.token_embd_bytes == 605_552_640 and model.tied_output
    assert round(model.weight_bytes / GiB, 2) == 15.63


def test_e2b_shares_kv_and_embeds_per_layer():
    """E2B: layers 15–34 reuse layers 13 and 14's caches: 15 layers own a cache (12 sliding of 1 × 256, 3 full of
    1 × 512): 3 × 2,048 = 6,144 bytes a token of full attention in bf16, and 12 × 1,024 in the window.
    Parameters: token table 402,653,184, per-layer table 262,144 × 35 × 256 = 2,348,810,240, its projection
    1,536 × 8,960 = 13,762,560 and norm 256, final norm 1,536.
    Own sliding layer: q/o 2 × 2,048 × 1,536, k/v 2 × 256 × 1,536, q/k norms 512, four norms 6,144, scalar 1, MLP
    3 × 6,144 × 1,536 = 28,311,552, per-layer gate and projection 2 × 256 × 1,536 and a norm 1,536: 36,184,065.
    Own full layer (heads of 512): 43,262,465. Shared layers drop k, v and k_norm and double the MLP (12,288 wide):
    sliding 63,708,929, full 70,000,641. 12 + 3 own, 16 + 4 shared: 4,628,569,379 (Google: 5.1B with the vision and
    audio towers; 2.3B "effective" without the per-layer table: 2,279,759,139)."""
    shape = shape_from_config(E2B_TEXT, name="gemma-4-E2B")
    own = [la.cache for la in shape.decoder[:15]]
    assert all(isinstance(c, NoCache) for c in (la.cache for la in shape.decoder[15:]))
    assert sum(isinstance(c, SlidingWindowAttention) for c in own) == 12
    full = [c for c in own if not isinstance(c, SlidingWindowAttention)]
    assert full == [FullAttention(kv_heads=1, head_dim=512, v_head_dim=512)] * 3
    assert sum(c.bytes_per_token(BF16) for c in full) == 6144
    expected = (
        402_653_184 + 2_348_810_240 + 13_762_560 + 256 + 1_536
        + 12 * 36_184_065 + 3 * 43_262_465 + 16 * 63_708_929 + 4 * 70_000_641
    )  # fmt: skip
    assert shape.params == expected == 4_628_569_379
    assert shape.params - 2_348_810_240 == 2_279_759_139
    assert not shape.approximate


def test_e2b_per_layer_table_loads_with_the_output_in_llamacpp():
    """llama.cpp puts per_layer_token_embd (and its projection) with the output layer, on the card; only token_embd
    stays on the host. A dense model's what-if keeps the mix's average bits (Q4_K_M 4.89): the token table
    ⌈402,653,184 × 4.89 / 8⌉ = 246,121,759 bytes on the host; the per-layer table ⌈2,348,810,240 × 4.89 / 8⌉ =
    1,435,710,260, the projection 8,412,365, its norm 512 and the final norm 3,072 (bf16) with the output."""
    model = llama_model_from_shape(shape_from_config(E2B_TEXT, name="gemma-4-E2B"), "Q4_K_M")
    assert model.token_embd_bytes == 246_121_759
    assert model.output_norm_bytes == 1_435_710_260 + 8_412_365 + 512 + 3_072
    assert model.output_bytes == 0 and model.tied_output


def test_a_sparse_config_takes_transformers_defaults():
    """No layer_types: five sliding to one full, the last forced full; no global_head_dim: 512; no window: 512; no
    hidden_size_per_layer_input: 256 (Gemma4TextConfig's defaults)."""
    cfg = {k: v for k, v in E2B_TEXT.items() if k not in ("layer_types", "global_head_dim", "sliding_window")}
    cfg.update(num_hidden_layers=8, num_kv_shared_layers=0)
    shape = shape_from_config(cfg, name="sparse")
    kinds = ["full" if isinstance(la.cache, FullAttention) and not isinstance(la.cache, SlidingWindowAttention)
             else "sliding" for la in shape.decoder]  # fmt: skip
    assert kinds == ["sliding"] * 5 + ["full", "sliding", "full"]
    assert shape.decoder[5].cache.head_dim == 512 and shape.decoder[0].cache.window == 512


def test_an_audio_tower_is_named_approximate():
    shape = shape_from_config({"model_type": "gemma4", "text_config": E2B_TEXT, "audio_config": {"hidden_size": 1024}})
    assert shape.approximate and any("audio" in n for n in shape.notes)


def test_a_layer_kind_gemma_4_lacks_is_a_typed_error():
    with pytest.raises(InvalidConfigValueError, match="sliding or full"):
        shape_from_config(dict(E2B_TEXT, layer_types=["linear_attention"] * 35), name="bad")
