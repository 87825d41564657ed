"""GGUF header → ModelShape (explorer/gguf/shape.py) and llama.cpp's hparams (explorer/gguf/hparams.py).

- The seven `tests/support/llamacpp_models.py` GGUFs: params and weight bytes equal
  the tensors' elements and ``n_bytes`` exactly; caches per layer as
  llama.cpp lays them out (gemma3's pattern 6, MLA, the hybrid's recurrent
  layers); KV per token equals the config.json path's figure where both
  describe the same model.
- Real headers: open_llama_7b_v2 f16 (llama.cpp's loader dump: every tensor
  and the printed hparams) and the key/values of ollama's conversion dumps
  (no tensor shapes), compared with the fixture config.json of the same model.
- Unknown architectures give a best-effort shape; missing sizes a typed error.
"""

from __future__ import annotations

import json
import re

import gguf
import pytest
from support import llamacpp_models as models
from support.corpus import CONFIGS, DATA
from support.gguf_factory import Typed, build_gguf, data_file_size, dump_scalar_metadata, llama_like, llama_metadata
from support.llamacpp_headers import header_for

from explorer.errors import GGUFShapeError
from explorer.gguf.header import parse_gguf_header
from explorer.gguf.hparams import read_hparams
from explorer.gguf.shape import shape_from_gguf
from explorer.model.kv_cache import (
    FullAttention,
    MLAAttention,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.model.shapes import shape_from_config

DUMPS = DATA / "gguf_dumps"
VT = gguf.GGUFValueType


def parse(metadata: dict, tensors: list) -> object:
    raw = build_gguf(metadata, tensors, with_data=False)
    return parse_gguf_header(raw, file_size=data_file_size(raw, tensors), name="test.gguf")


@pytest.mark.parametrize("name", list(models.SPECS))
def test_params_and_weight_bytes_are_exact(name):
    h = header_for(name)
    shape = shape_from_gguf(h)
    assert shape.params == h.parameter_count == sum(t.n_elements for t in h.tensors)
    assert shape.weight_bytes() == h.tensor_bytes_total == sum(t.n_bytes for t in h.tensors)
    assert shape.layers == models.SPECS[name]["n_layer"] and shape.vocab_size == models.SPECS[name]["vocab"]
    assert shape.tied_embeddings == models.SPECS[name]["tied_embeddings"]
    assert not shape.approximate


def test_llama_gqa_matches_the_config_path():
    spec = models.SPECS["llama_gqa"]
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 1536,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "torch_dtype": "float16",
    }
    from_config = shape_from_config(config)
    shape = shape_from_gguf(header_for("llama_gqa"))
    assert shape.kv_bytes_per_token() == from_config.kv_bytes_per_token() == 4 * 2 * 2 * 64 * 2
    assert shape.params == from_config.params  # same tensors, whatever the storage
    assert shape.precision.name == "Q8_0" and shape.attention == "GQA"
    # the Q4_K matrices are stored at 144 bytes per 256 weights
    q = next(t for t in shape.decoder[0].tensors if t.module == "blk.0.attn_q")
    assert (q.rows, q.cols, q.role, shape.precision.tensor_bytes(q)) == (512, 512, "attention", 512 * 2 * 144)
    assert spec["types"]["attn_q"] == "Q4_K"


def test_gemma3_sliding_pattern_as_llama_cpp():
    shape = shape_from_gguf(header_for("gemma3_swa"))
    # set_swa_pattern(6): il % 6 < 5 -> layer 5 is the only global layer of 8
    assert [isinstance(c, SlidingWindowAttention) for c in shape.caches] == [True] * 5 + [False] + [True] * 2
    assert shape.caches[0].window == 300 and shape.attention == "MQA+SWA"


def test_mla_moe_and_hybrid_layers():
    mla = shape_from_gguf(header_for("deepseek2_mla"))
    assert all(isinstance(c, MLAAttention) and (c.kv_lora_rank, c.rope_dim) == (256, 32) for c in mla.caches)
    assert mla.moe.experts == 8 and mla.moe.moe_layers == 2 and mla.moe.first_dense_layers == 1
    assert mla.moe.shared_intermediate_size == 256
    exps = next(t for t in mla.decoder[1].tensors if t.module.endswith("ffn_gate_exps"))
    assert (exps.rows, exps.cols, exps.count, exps.role) == (256, 512, 8, "expert")
    hybrid = shape_from_gguf(header_for("granitehybrid_hybrid"))
    kinds = [type(c).__name__ for c in hybrid.caches]
    assert kinds == ["RecurrentState", "FullAttention", "RecurrentState", "FullAttention"]
    state = hybrid.caches[0]
    assert (state.conv_elements, state.ssm_elements) == (3 * (1024 + 2 * 64), 64 * 1024)
    assert hybrid.family == "hybrid"
    mamba = shape_from_gguf(header_for("mamba2_ssm"))
    assert all(isinstance(c, RecurrentState) for c in mamba.caches) and mamba.kv_bytes(100_000) == 4 * 68_992 * 4


def _loader_dump():
    text = (DUMPS / "openlm-research__open_llama_7b_v2.f16.llamacpp_loader_dump.txt").read_text()
    tensors = []
    for m in re.finditer(r"- tensor\s+\d+:\s+(\S+)\s+(\w+)\s+\[([\d,\s]+)\]", text):
        dims = [int(d) for d in m.group(3).split(",")]
        while len(dims) > 1 and dims[-1] == 1:
            dims.pop()
        tensors.append((m.group(1), tuple(dims), gguf.GGMLQuantizationType[m.group(2).upper()]))
    info = dict(re.findall(r"llm_load_print_meta: (\w+)\s+= (\S+)", text))
    md = {
        "general.architecture": "llama",
        "llama.block_count": int(info["n_layer"]),
        "llama.context_length": int(info["n_ctx_train"]),
        "llama.embedding_length": int(info["n_embd"]),
        "llama.feed_forward_length": int(info["n_ff"]),
        "llama.attention.head_count": int(info["n_head"]),
        "llama.attention.head_count_kv": int(info["n_head_kv"]),
        "llama.rope.dimension_count": int(info["n_rot"]),
        "general.file_type": 1,
        "tokenizer.ggml.tokens": Typed(["t"] * int(info["n_vocab"]), VT.ARRAY, VT.STRING),
    }
    return md, tensors


def test_open_llama_loader_dump():
    md, tensors = _loader_dump()
    shape = shape_from_gguf(parse(md, tensors), name="open_llama_7b_v2.f16.gguf")
    assert shape.params == 6_738_415_616  # llama.cpp: "model params = 6.74 B"
    # f16 everywhere but the 65 f32 norms of 4096: 6,738,415,616 × 2 + 65 × 4096 × 2 bytes ("12.55 GiB")
    assert shape.weight_bytes() == 13_477_363_712 and round(shape.weight_bytes() / 1024**3, 2) == 12.55
    assert shape.precision.name == "F16" and shape.vocab_size == 32000 and shape.max_context_tokens == 2048
    assert shape.kv_bytes_per_token() == 32 * 2 * 4096 * 2


def _dump_metadata(name: str) -> dict:
    """An ollama conversion dump's scalar key/values, typed."""
    return dump_scalar_metadata(json.loads((DUMPS / name).read_text()))


@pytest.mark.parametrize(("dump", "config"), [
    ("mistralai__Mistral-7B-Instruct-v0.2.ollama_convert_expected.json", "mistralai__Mistral-7B-v0.1"),
    ("mistralai__Mixtral-8x7B-Instruct-v0.1.ollama_convert_expected.json", "mistralai__Mixtral-8x7B-v0.1"),
    ("meta-llama__Meta-Llama-3-8B-Instruct.ollama_convert_expected.json", "meta-llama__Meta-Llama-3.1-8B"),
    ("microsoft__Phi-3-mini-128k-instruct.ollama_convert_expected.json", "microsoft__Phi-3-mini-128k-instruct"),
])  # fmt: skip
def test_kv_per_token_agrees_with_the_config_path(dump, config):
    shape = shape_from_gguf(parse(_dump_metadata(dump), []), name=dump)
    from_config = shape_from_config(json.loads((CONFIGS / f"{config}.json").read_text()), name=config)
    assert shape.kv_bytes_per_token() == from_config.kv_bytes_per_token()
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (
        from_config.layers,
        from_config.kv_heads,
        from_config.head_dim,
    )


def test_window_patterns_of_real_key_values():
    gemma2 = read_hparams(parse(_dump_metadata("google__gemma-2-2b-it.ollama_convert_expected.json"), []))
    assert gemma2.swa_layers[:4] == (True, False, True, False) and gemma2.n_swa == 4096  # pattern 2, default window
    cohere = read_hparams(
        parse(_dump_metadata("CohereForAI__c4ai-command-r7b-12-2024.ollama_convert_expected.json"), [])
    )
    assert cohere.swa_layers[:8] == (True, True, True, False) * 2 and cohere.n_swa == 4096
    phi3 = read_hparams(parse(_dump_metadata("microsoft__Phi-3-mini-128k-instruct.ollama_convert_expected.json"), []))
    assert not any(phi3.swa_layers) and any("disables" in n for n in phi3.notes)
    mixtral = read_hparams(
        parse(_dump_metadata("mistralai__Mixtral-8x7B-Instruct-v0.1.ollama_convert_expected.json"), [])
    )
    assert (mixtral.n_expert, mixtral.n_expert_used) == (8, 2)


def test_per_layer_arrays_and_bool_patterns():
    md = llama_metadata(
        blocks=4,
        **{
            "general.architecture": "gemma3",
            "gemma3.block_count": 4,
            "gemma3.embedding_length": 256,
            "gemma3.attention.head_count": 8,
            "gemma3.attention.head_count_kv": Typed([2, 2, 4, 2], VT.ARRAY, VT.INT32),
            "gemma3.attention.sliding_window": 512,
            "gemma3.attention.sliding_window_pattern": [True, False, True, False],
        },
    )
    hp = read_hparams(parse(md, []))
    assert hp.swa_layers == (True, False, True, False) and hp.n_head_kv == (2, 2, 4, 2)
    bad = dict(md, **{"gemma3.attention.head_count_kv": Typed([2, 2], VT.ARRAY, VT.INT32)})
    with pytest.raises(GGUFShapeError, match="2 entries for 4 layers"):
        read_hparams(parse(bad, []))


def test_gemma4_heads_by_layer_kind_and_shared_kv_layers():
    """Gemma 4 (src/models/gemma4.cpp): sliding layers' heads are key_length_swa wide, full layers' key_length; the
    last shared_kv_layers layers reuse an earlier cache. Six layers, the sixth full, two shared: layers 0–3 cache
    8 heads of 256 (K and V: 8,192 bytes a token in f16), layers 4–5 none."""
    md = llama_metadata(
        blocks=6,
        **{
            "general.architecture": "gemma4",
            "gemma4.block_count": 6,
            "gemma4.embedding_length": 2816,
            "gemma4.attention.head_count": 16,
            "gemma4.attention.head_count_kv": Typed([8, 8, 8, 8, 8, 2], VT.ARRAY, VT.INT32),
            "gemma4.attention.key_length": 512,
            "gemma4.attention.value_length": 512,
            "gemma4.attention.key_length_swa": 256,
            "gemma4.attention.value_length_swa": 256,
            "gemma4.attention.sliding_window": 1024,
            "gemma4.attention.sliding_window_pattern": [True, True, True, True, True, False],
            "gemma4.attention.shared_kv_layers": 2,
        },
    )
    hp = read_hparams(parse(md, []))
    assert not hp.approximate and hp.n_layer_kv_from_start == 4
    assert [hp.head_k(il) for il in range(6)] == [256] * 5 + [512]
    assert [hp.has_kv(il) for il in range(6)] == [True] * 4 + [False] * 2
    shape = shape_from_gguf(parse(md, []))
    caches = [la.cache for la in shape.decoder]
    assert caches[0] == SlidingWindowAttention(kv_heads=8, head_dim=256, v_head_dim=256, window=1024)
    assert all(isinstance(c, NoCache) for c in caches[4:])


def test_unknown_architecture_is_best_effort():
    md = llama_metadata(blocks=2)
    md = {k.replace("llama.", "futurenet."): v for k, v in md.items()}
    md["general.architecture"] = "futurenet"
    tensors = [(n, s, t) for n, s, t in llama_like(blocks=2)]
    shape = shape_from_gguf(parse(md, tensors))
    assert shape.approximate and any("futurenet" in n for n in shape.notes)
    assert shape.weight_bytes() == sum(
        gguf.GGML_QUANT_SIZES[t][1] * __import__("math").prod(s) // gguf.GGML_QUANT_SIZES[t][0] for _, s, t in tensors
    )
    assert isinstance(shape.caches[0], FullAttention) and shape.caches[0].kv_heads == 2


def test_missing_sizes_are_typed_errors():
    with pytest.raises(GGUFShapeError, match="general.architecture"):
        shape_from_gguf(parse({"general.name": "x"}, []))
    with pytest.raises(GGUFShapeError, match="block_count"):
        shape_from_gguf(parse({"general.architecture": "llama"}, []))
