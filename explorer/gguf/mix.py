"""Which type ``llama-quantize`` gives each tensor of a quant mix (Q3_K_S … Q8_0), and the bytes that makes.

A GGUF "Q4_K_M" is not every weight at Q4_K: llama.cpp keeps some tensors in
more bits. The rules, from ``src/llama-quant.cpp`` (``llama_tensor_get_type_impl``
and ``tensor_type_fallback``, llama.cpp commit 0c1e57098), for a dense decoder
quantised without an importance matrix:

- 1-D tensors (norms, biases) are not quantised: F32;
- ``output.weight`` (and ``token_embd`` when the head reuses it) is Q6_K, or
  Q8_0 for a Q8_0 mix or when its rows are not whole blocks of the mix's type;
- ``attn_v`` and ``ffn_down`` get Q6_K in the "more bits" layers of Q4_K_M and
  Q5_K_M: the first and last eighth and every third layer between
  (``use_more_bits``); Q4_K_S gives the first four ``attn_v`` and the first eighth
  of ``ffn_down`` Q5_K; Q3_K_M gives ``attn_v`` Q5_K in the first two layers
  (Q4_K after), ``ffn_down`` Q5_K in the first sixteenth (Q4_K after) and
  ``attn_output`` Q4_K; Q3_K_L gives all three Q5_K; a fused ``attn_qkv`` is one
  step up (Q4_K_M → Q5_K);
- an 80-layer GQA model (llama.cpp's ``LLM_TYPE_70B``) gets ``attn_v`` Q5_K where
  the rules above leave Q3_K or Q4_K;
- fallback: a tensor whose rows (``ne[0]``, the input features) are not whole
  blocks of its type drops to a 32-block type: Q4_K → Q5_0, Q5_K → Q5_1,
  Q6_K → Q8_0, Q3_K → Q4_0;
- a mixture of experts: every ``ffn_down`` (dense, shared and routed experts) takes
  its layer from its name, so the "more bits" layers are counted over the layers,
  not over the tensors; with 8 experts (Mixtral) ``attn_v`` and ``attn_k`` are Q8_0
  and ``attn_output`` Q5_K for the Q3_K/Q4_K mixes; routers (``ffn_gate_inp``) and
  Gemma's ``per_layer_model_proj`` are not quantised (F32 and F16 as converted);
  Gemma's per-layer token table is quantised as ``token_embd``.

Summed over Meta-Llama-3.1-8B this gives 4,912,898,048 bytes of tensors at
Q4_K_M; the published file (lmstudio-community) is 4,920,739,168 bytes, the
difference being the header (its tokenizer). Falcon has rules of its own and
is refused. The planner sizes a dense what-if GGUF at the mix's average bits
(:data:`explorer.model.quant_config.GGUF_MIX_BITS`), a mixture of experts' by
this mix (:mod:`explorer.engines.llamacpp.whatif`); this module says where the
bits go.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import GGUFError, UnknownPrecisionError
from explorer.gguf.constants import GGML_QUANT_SIZES
from explorer.model.tensors import Tensor

__all__ = ["MIX_BASE_TYPES", "PUBLISHED_FILES", "MixTensor", "gguf_mix", "more_bits"]

#: a mix's base type: what every quantised matrix gets unless a rule says otherwise (llama.cpp's default_type)
MIX_BASE_TYPES: dict[str, str] = {
    "Q8_0": "Q8_0",
    "Q6_K": "Q6_K",
    "Q5_K_M": "Q5_K",
    "Q5_K_S": "Q5_K",
    "Q4_K_M": "Q4_K",
    "Q4_K_S": "Q4_K",
    "Q4_0": "Q4_0",
    "Q3_K_L": "Q3_K",
    "Q3_K_M": "Q3_K",
    "Q3_K_S": "Q3_K",
}
# fmt: off
#: GGUF files as their publishers list them: (the config's repo, mix, file, bytes). Sizes from Hub listings
#: at the revision named (tests/gguf/test_mix.py checks the mix within each file's header, a few MB).
PUBLISHED_FILES: tuple[tuple[str, str, str, int], ...] = (
    ("meta-llama/Meta-Llama-3.1-8B",      "Q4_K_M", "lmstudio-community/Meta-Llama-3.1-8B-Instruct-GGUF Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",      4_920_739_168),
    ("Qwen/Qwen2.5-7B",                   "Q4_K_M", "bartowski/Qwen2.5-7B-Instruct-GGUF@8911e8a Qwen2.5-7B-Instruct-Q4_K_M.gguf",                    4_683_074_240),
    ("Qwen/Qwen3-8B",                     "Q5_K_M", "Qwen/Qwen3-8B-GGUF@7c41481 Qwen3-8B-Q5_K_M.gguf",                                               5_851_112_224),
    ("mistralai/Mistral-7B-v0.1",         "Q4_K_M", "TheBloke/Mistral-7B-v0.1-GGUF mistral-7b-v0.1.Q4_K_M.gguf",                                      4_368_438_912),
    ("google/gemma-2-9b-it",              "Q4_K_M", "bartowski/gemma-2-9b-it-GGUF gemma-2-9b-it-Q4_K_M.gguf",                                          5_761_057_728),
    ("meta-llama/Llama-2-7b-hf",          "Q4_K_M", "TheBloke/Llama-2-7B-Chat-GGUF@191239b llama-2-7b-chat.Q4_K_M.gguf",                               4_081_004_224),
    ("meta-llama/Llama-3.3-70B-Instruct", "Q4_K_M", "bartowski/Llama-3.3-70B-Instruct-GGUF@b6c5c9f Llama-3.3-70B-Instruct-Q4_K_M.gguf",                42_520_398_816),
    ("Qwen/Qwen2.5-72B",                  "Q4_K_M", "bartowski/Qwen2.5-72B-Instruct-GGUF@d43fd97 Qwen2.5-72B-Instruct-Q4_K_M.gguf",                  47_415_715_488),
    ("Qwen/Qwen2.5-32B",                  "Q3_K_M", "bartowski/Qwen2.5-32B-Instruct-GGUF@2116cbb Qwen2.5-32B-Instruct-Q3_K_M.gguf",                  15_935_048_576),
    ("Qwen/Qwen3-0.6B",                   "Q8_0",   "Qwen/Qwen3-0.6B-GGUF Qwen3-0.6B-Q8_0.gguf",                                                         639_446_688),
)
# fmt: on
#: the 32-block type a 256-block type falls back to when a row is not whole blocks (tensor_type_fallback)
FALLBACK: dict[str, str] = {"Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
#: (weights per block, bytes per block) by type name; Q4_K: (256, 144) = 4.5 bits a weight
_SIZES: dict[str, tuple[int, int]] = {t.name: v for t, v in GGML_QUANT_SIZES.items()}
#: module names' last part → llama.cpp's tensor category, for attention and MLP tensors
_ATTENTION = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output"}
_FUSED_QKV = ("qkv_proj", "query_key_value", "c_attn", "Wqkv")
#: Gemma's per-layer token table (quantised as ``token_embd``) and its projection (kept as converted, F16)
_PER_LAYER_TABLE = "embed_tokens_per_layer"
_KEPT_F16 = "per_layer_model_projection"
#: model types llama.cpp reads as LLM_ARCH_FALCON (its own mix rules)
_FALCON = ("falcon", "RefinedWeb", "RefinedWebModel")


@dataclass(frozen=True, slots=True, kw_only=True)
class MixTensor:
    """One tensor (group) of the model as the mix stores it.

    Attributes:
        name: llama.cpp's name: ``blk.7.attn_v.weight``, ``output.weight``…
        layer: the decoder layer, or None for embeddings and the head.
        category: llama.cpp's tensor category (``attn_v``, ``ffn_down``, ``output``, ``norm``…).
        type_name: the ggml type it is stored in (``Q6_K``).
        elements: weights in it.
        bytes: bytes it takes: elements / block × bytes a block.
        why: the rule that chose the type, in a few words.
    """

    name: str
    layer: int | None
    category: str
    type_name: str
    elements: int
    bytes: int
    why: str

    @property
    def bits_per_weight(self) -> float:
        """Bits a weight, scales included: ``bytes × 8 / elements`` (Q4_K: 4.5, Q6_K: 6.5625)."""
        return self.bytes * 8 / self.elements


def more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's ``use_more_bits``: the first and last eighth of the layers, and every third between.

    32 layers: 0–3, 6, 9, 12, 15, 18, 21, 24, 27 and 28–31 (16 of 32).
    """
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def _category(t: Tensor) -> str:
    last = t.module.rsplit(".", 1)[-1]
    if t.cols <= 1 or t.role in ("norm", "router", "position") or last == "conv1d":
        return "norm" if t.role == "norm" else "other"
    if t.role == "embedding":
        return "token_embd"
    if t.role == "lm_head":
        return "output"
    if t.role == "attention":
        return "attn_qkv" if last in _FUSED_QKV else _ATTENTION.get(last, "attn_output")
    if t.role in ("mlp", "shared_expert", "expert"):
        return "ffn_down" if ("down" in last or last in ("fc2", "w2")) else ("ffn_gate" if "gate" in last else "ffn_up")
    return "other"


def _block_name(t: Tensor, layer: int, category: str) -> str:
    """A decoder tensor's GGUF-like name: ``blk.3.ffn_down_exps.weight`` (routed), ``…_shexp`` (shared)."""
    last = t.module.rsplit(".", 1)[-1]
    if t.role == "router" and t.cols > 1:
        return f"blk.{layer}.ffn_gate_inp.{t.param}"
    if last == "{i}":  # a parameter of the block itself (Gemma 4's layer_scalar)
        return f"blk.{layer}.{t.param}"
    if category in ("norm", "other") or last.startswith("per_layer"):
        return f"blk.{layer}.{last}.{t.param}"
    suffix = {"expert": "_exps", "shared_expert": "_shexp"}.get(t.role, "")
    return f"blk.{layer}.{category}{suffix}.{t.param}"


def _eight_experts(quant: str, category: str, rule: tuple[str, str]) -> tuple[str, str]:
    """llama-quant's rules for an 8-expert model (Mixtral): attn_v and attn_k Q8_0, attn_output Q5_K."""
    if category in ("attn_v", "attn_qkv", "attn_k"):
        return "Q8_0", "8 experts: attn_v and attn_k at Q8_0"
    if category == "attn_output" and quant in ("Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M"):
        return "Q5_K", "8 experts: attn_output at Q5_K"
    return rule


def _rule(quant: str, category: str, index: int, count: int, layers: int, seventy_b: bool) -> tuple[str, str]:
    """(type, why) for a quantised matrix of a category; ``index`` counts that category's tensors in order."""
    base = MIX_BASE_TYPES[quant]
    if category == "attn_v":
        t, why = base, "base type"
        if quant == "Q3_K_M":
            t, why = ("Q5_K", "Q3_K_M: first two attn_v") if index < 2 else ("Q4_K", "Q3_K_M: attn_v")
        elif quant == "Q3_K_L":
            t, why = "Q5_K", "Q3_K_L: attn_v"
        elif quant in ("Q4_K_M", "Q5_K_M") and more_bits(index, count):
            t, why = "Q6_K", "more bits: first/last eighth or every third layer"
        elif quant == "Q4_K_S" and index < 4:
            t, why = "Q5_K", "Q4_K_S: first four attn_v"
        if seventy_b and t in ("Q3_K", "Q4_K"):
            t, why = "Q5_K", "70B-class: attn_v is 8× smaller than attn_q, so more bits cost little"
        return t, why
    if category == "ffn_down":
        if quant == "Q3_K_M":
            return ("Q5_K", "Q3_K_M: first sixteenth") if index < layers // 16 else ("Q4_K", "Q3_K_M: ffn_down")
        if quant == "Q3_K_L":
            return "Q5_K", "Q3_K_L: ffn_down"
        if quant in ("Q4_K_M", "Q5_K_M") and more_bits(index, layers):
            return "Q6_K", "more bits: first/last eighth or every third layer"
        if quant == "Q4_K_S" and index < layers // 8:
            return "Q5_K", "Q4_K_S: first eighth"
    if category == "attn_output" and quant in ("Q3_K_M", "Q3_K_L"):
        return ("Q4_K" if quant == "Q3_K_M" else "Q5_K"), f"{quant}: attn_output"
    if category == "attn_qkv":
        step = {"Q3_K_M": "Q4_K", "Q3_K_L": "Q4_K", "Q4_K_M": "Q5_K", "Q5_K_M": "Q6_K"}.get(quant)
        if step:
            return step, f"{quant}: fused qkv"
    return base, "base type"


def _output_type(quant: str, cols: int) -> tuple[str, str]:
    base = MIX_BASE_TYPES[quant]
    if cols % _SIZES[base][0]:
        return "Q8_0", f"output: {cols:,} columns are not whole {_SIZES[base][0]}-blocks"
    if base == "Q8_0":
        return "Q8_0", "output: Q8_0 mix"
    return "Q6_K", "output: always Q6_K"


def _stored(t: Tensor, name: str, layer: int | None, category: str, type_name: str, why: str) -> MixTensor:
    if t.cols > 1 and t.cols % _SIZES[type_name][0]:
        block = _SIZES[type_name][0]
        type_name, why = FALLBACK.get(type_name, "F16"), f"fallback: {t.cols:,} columns are not whole {block}-blocks"
    block, size = _SIZES[type_name]
    return MixTensor(
        name=name,
        layer=layer,
        category=category,
        type_name=type_name,
        elements=t.elements,
        bytes=t.elements // block * size,
        why=why,
    )


def gguf_mix(shape, quant: str) -> tuple[MixTensor, ...]:
    """Every tensor of ``shape`` as ``llama-quantize`` stores it at ``quant``, in file order.

    Raises:
        UnknownPrecisionError: ``quant`` is not one of :data:`MIX_BASE_TYPES`.
        GGUFError: the model is a Falcon (its own rules are not modelled).
    """
    quant = quant.upper().replace("-", "_")
    if quant not in MIX_BASE_TYPES:
        raise UnknownPrecisionError(
            f"no per-tensor mix for {quant}", hint=f"mixes with per-tensor rules: {', '.join(MIX_BASE_TYPES)}"
        )
    if shape.model_type in _FALCON:
        raise GGUFError(
            f"{shape.name or 'this model'}: llama.cpp's mix for Falcon is not modelled",
            hint="its size at the mix's average bits is explorer.model.quant_config.GGUF_MIX_BITS",
        )
    layers = shape.layers
    seventy_b = layers == 80 and shape.kv_heads < shape.attention_heads
    experts = shape.moe.experts if shape.moe is not None else 0
    counts = {"attn_v": sum(1 for la in shape.decoder for t in la.tensors if _category(t) == "attn_v")}
    seen: dict[str, int] = {}
    out = []
    for t in shape.embeddings:
        cat = _category(t)
        name = "per_layer_token_embd.weight" if _PER_LAYER_TABLE in t.module else "token_embd.weight"
        if _KEPT_F16 in t.module:
            out.append(_stored(t, f"{t.module}.{t.param}", None, "other", "F16", "not quantised (llama-quant)"))
        elif t.cols <= 1 or cat != "token_embd":
            out.append(_stored(t, f"{t.module}.{t.param}", None, cat, "F32", "not quantised"))
        elif shape.tied_embeddings:
            out.append(_stored(t, name, None, cat, *_output_type(quant, t.cols)))
        else:
            out.append(_stored(t, name, None, cat, MIX_BASE_TYPES[quant], "base type"))
    for i, layer in enumerate(shape.decoder):
        for t in layer.tensors:
            cat = _category(t)
            name = _block_name(t, i, cat)
            if cat in ("norm", "other") and (
                t.cols <= 1 or t.role in ("norm", "router", "position") or "conv1d" in name
            ):
                out.append(_stored(t, name, i, cat, "F32", "not quantised"))
                continue
            index = seen.get(cat, 0)
            seen[cat] = index + 1
            if experts and cat == "ffn_down":  # llama-quant reads an MoE's layer from the tensor's name
                index = i
            rule = _rule(quant, cat, index, counts.get(cat, layers), layers, seventy_b)
            out.append(_stored(t, name, i, cat, *(_eight_experts(quant, cat, rule) if experts == 8 else rule)))
    for t in shape.head:
        cat = _category(t)
        if cat == "output":
            out.append(_stored(t, "output.weight", None, cat, *_output_type(quant, t.cols)))
        else:
            out.append(_stored(t, f"{t.module}.{t.param}", None, cat, "F32", "not quantised"))
    return tuple(out)
