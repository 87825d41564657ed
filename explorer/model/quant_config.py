"""Read a checkpoint's precision from its config, or build a what-if precision by name.

Configs say how weights are stored in ``quantization_config`` (top level, or
inside ``text_config``), or in a ModelOpt companion ``hf_quant_config.json``.
Each method spells it its own way; :func:`precision_from_config` turns all of
them into one :class:`~explorer.model.precision.Precision`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.errors import UnknownPrecisionError
from explorer.model.config_reader import ConfigView, whole_number
from explorer.model.dtypes import ElementType, element_type, model_dtype_name
from explorer.model.precision import Precision, SchemeGroup, WeightFormat, dense
from explorer.model.quant_methods import FP8_CHANNEL, PARSERS, module_names, unsized

FP8_BLOCK = WeightFormat(kind="fp8", bits=8, block=(128, 128))
#: fp8 with one fp32 scale a weight matrix: what vLLM's ``--quantization fp8`` makes of 16-bit weights while loading
#: (``Fp8OnlineLinearMethod``: ``weight_block_size = None``, ``ops.scaled_fp8_quant(weight)`` with no scale given, so
#: one dynamic scale a tensor; activations are scaled dynamically at run time and store nothing)
FP8_TENSOR = WeightFormat(kind="fp8", bits=8, fp8_scale="tensor")
NVFP4 = WeightFormat(kind="nvfp4", bits=4, group_size=16)
MXFP4 = WeightFormat(kind="mxfp4", bits=4, group_size=32)

# Average bits per weight of llama.cpp's quant mixes, scales and the
# mix's higher-precision tensors included (llama.cpp tools/quantize's
# table; measured on Llama-class models). Only for what-ifs without a
# GGUF header: a real GGUF file's tensors are sized exactly.
GGUF_MIX_BITS: dict[str, float] = {
    "F32": 32.0,
    "F16": 16.0,
    "BF16": 16.0,
    "Q8_0": 8.5,
    "Q6_K": 6.5625,
    "Q5_K_M": 5.69,
    "Q5_K_S": 5.54,
    "Q5_1": 6.0,
    "Q5_0": 5.5,
    "Q4_K_M": 4.89,
    "Q4_K_S": 4.58,
    "Q4_1": 5.0,
    "Q4_0": 4.5,
    "IQ4_NL": 4.5,
    "IQ4_XS": 4.25,
    "Q3_K_L": 4.27,
    "Q3_K_M": 3.91,
    "Q3_K_S": 3.5,
    "IQ3_M": 3.66,
    "IQ3_S": 3.44,
    "IQ3_XS": 3.3,
    "IQ3_XXS": 3.06,
    "Q2_K": 3.35,
    "Q2_K_S": 2.97,
    "IQ2_M": 2.7,
    "IQ2_S": 2.5,
    "IQ2_XS": 2.31,
    "IQ2_XXS": 2.06,
    "IQ1_M": 1.75,
    "IQ1_S": 1.56,
    "TQ2_0": 2.06,
    "TQ1_0": 1.69,
}

# llama.cpp's per-tensor type fallback (src/llama-quant.cpp, tensor_type_fallback): a tensor whose rows
# (ne[0], the input width) are not a multiple of a type's 256-weight block is quantised to a 32-block type
# instead: Q2_K, Q3_K, TQ1_0, TQ2_0 → Q4_0; Q4_K → Q5_0; Q5_K → Q5_1; Q6_K → Q8_0; the IQ types → IQ4_NL;
# and to F16 when 32 does not divide the row either. A mix's fallback keeps its share of wider types and moves
# its base type's bits to the fallback's: fallback bits = mix bits + (fallback type − base type). Qwen2.5-72B's
# ffn_down rows are 29,568 wide (not a multiple of 256): at Q4_K_M they take 5.89 bits, not 4.89.
#: base type bits → fallback type bits
_FALLBACK_BITS = {2.625: 4.5, 3.4375: 4.5, 4.5: 5.5, 5.5: 6.0, 6.5625: 8.5}
#: a 256-block mix → its base type's bits (IQ and TQ mixes fall back to 4.5 bits whatever their base)
# fmt: off
GGUF_MIX_BASE: dict[str, float] = {
    "Q2_K":   2.625,  "Q2_K_S": 2.625,  "Q3_K_S": 3.4375, "Q3_K_M": 3.4375, "Q3_K_L": 3.4375,
    "Q4_K_S": 4.5,    "Q4_K_M": 4.5,    "Q5_K_S": 5.5,    "Q5_K_M": 5.5,    "Q6_K":   6.5625,
}
# fmt: on
_IQ_FALLBACK_BITS = 4.5  # IQ4_NL and Q4_0


def gguf_fallback_bits(mix: str) -> float:
    """The bits a tensor of a 256-block GGUF mix takes when its rows are not a multiple of 256 (0: no fallback)."""
    bits = GGUF_MIX_BITS[mix]
    if mix in GGUF_MIX_BASE:
        base = GGUF_MIX_BASE[mix]
        return round(bits + _FALLBACK_BITS[base] - base, 4)
    if mix.startswith(("IQ", "TQ")) and mix != "IQ4_NL":
        return max(bits, _IQ_FALLBACK_BITS)
    return 0.0


#: what-if precisions a user can pick for original weights, by name
WHAT_IF_NAMES = ("bf16", "fp16", "fp32", "fp8", "int8", "int4-awq", "int4-gptq", "nf4", "nvfp4", "mxfp4")
#: the what-if an engine's online ``--quantization fp8`` makes when no fp8 checkpoint of the model is published
#: (:data:`FP8_TENSOR`); ``fp8`` names the published checkpoints' usual 128 × 128 blocks
ONLINE_FP8 = "fp8-online"
#: the fp8 schemes published checkpoints store besides the 128 × 128 blocks (``data/checkpoints.json``
#: ``scheme``), each a what-if name ``fp8-SCHEME`` (:func:`published_fp8_name`) → its label, weight format and the
#: modules it leaves in the model dtype (with ``lm_head``):
#:
#: - ``tensor-modelopt``: NVIDIA ModelOpt ``quant_algo: FP8``, one fp32 ``weight_scale`` a matrix (vLLM
#:   ``modelopt.py`` ``ModelOptFp8LinearMethod``; its one fp32 ``input_scale`` a matrix is not counted);
#: - ``tensor-quark``: AMD Quark fp8, the same per-tensor layout (vLLM ``quark_w8a8_fp8.py``);
#: - ``channel-fbgemm``: Meta's ``fbgemm_fp8`` Llama-3.1-405B checkpoints, one fp32 scale a row (vLLM
#:   ``fbgemm_fp8.py``), every attention projection and layers 0 and 125's MLPs kept bf16 (their
#:   ``modules_to_not_convert``; layer 125 is the 405B's last, the only model Meta published so; named layers
#:   make explorer.model.weights size each layer on its own);
#: - ``channel-dynamic``: compressed-tensors ``FP8_DYNAMIC`` (RedHatAI ``*-FP8-dynamic``), one scale a row, the
#:   activations scaled per token at run time (vLLM ``compressed_tensors_w8a8_fp8.py``).
PUBLISHED_FP8: dict[str, tuple[str, WeightFormat, tuple[str, ...]]] = {
    "tensor-modelopt": ("fp8 per-tensor (ModelOpt)", FP8_TENSOR, ()),
    "tensor-quark": ("fp8 per-tensor (Quark)", FP8_TENSOR, ()),
    "channel-fbgemm": (
        "fp8 per-channel (FBGEMM)",
        FP8_CHANNEL,
        ("self_attn", "model.layers.0.mlp", "model.layers.125.mlp"),
    ),
    "channel-dynamic": ("fp8 per-channel, dynamic activations", FP8_CHANNEL, ()),
}


def published_fp8_name(scheme: str) -> str:
    """The what-if name of a published fp8 checkpoint's ``scheme`` (:data:`PUBLISHED_FP8`; ``block``: ``fp8``)."""
    return "fp8" if scheme == "block" else f"fp8-{scheme}"


def base_dtype(view: ConfigView) -> ElementType:
    """The dtype of the unquantised tensors (``torch_dtype``/``dtype``; bf16 if unsaid)."""
    return element_type(model_dtype_name(view.raw("torch_dtype", "dtype")))


#: where messages say a quantisation value was read
_WHERE = "quantization_config"


def _block(value: Any, key: str) -> tuple[int, int] | None:
    """An FP8 scale block ``[rows, cols]``, each a whole number from 1 to its plausible maximum; None when the
    config gives no list of two (a per-tensor scale).

    Raises:
        InvalidConfigValueError: an entry is not a whole number, below 1 or past the maximum.
    """
    if not isinstance(value, list) or len(value) != 2:
        return None
    rows, cols = (whole_number(v, f"{key}[{i}]", where=_WHERE, minimum=1) for i, v in enumerate(value))
    return rows, cols


def _count(qc: Mapping[str, Any], key: str, default: int, *, minimum: int = 0) -> int:
    """A count of a quantisation block (``bits``, ``group_size``), through :func:`whole_number`; ``default``
    when absent."""
    value = qc.get(key)
    return default if value is None else whole_number(value, key, where=_WHERE, minimum=minimum)


def _fp8(qc: Mapping[str, Any], base: ElementType) -> Precision:
    block = _block(qc.get("weight_block_size"), "weight_block_size")
    if block is not None:
        fmt = WeightFormat(kind="fp8", bits=8, block=block)
        name = f"fp8 block {block[0]}×{block[1]}"
    else:
        fmt = WeightFormat(kind="fp8", bits=8, fp8_scale="tensor")
        name = "fp8 per-tensor"
    return Precision(
        name=name,
        method="fp8",
        base=base,
        groups=(SchemeGroup(targets=("Linear",), fmt=fmt),),
        skip=module_names(qc.get("modules_to_not_convert")) + ("lm_head",),
    )


def _int_gptq_awq(qc: Mapping[str, Any], base: ElementType, method: str) -> Precision:
    bits = _count({"bits": qc.get("bits", qc.get("w_bit"))}, "bits", 4, minimum=1)
    # -1 (or 0): one scale a row, no groups; a group_size of inf was an OverflowError (config fuzz seed 30)
    group = max(0, _count({"group_size": qc.get("group_size", qc.get("q_group_size"))}, "group_size", 128, minimum=-1))
    fmt = WeightFormat(
        kind="int", bits=bits, group_size=group, packing=method, zero_points=True, g_idx=method == "gptq"
    )
    label = f"int{bits} {method.upper()}" + (f" g{group}" if group else "")
    return Precision(
        name=label,
        method=method,
        base=base,
        groups=(SchemeGroup(targets=("Linear",), fmt=fmt),),
        skip=module_names(qc.get("modules_to_not_convert")) + ("lm_head",),
    )


def _bnb(qc: Mapping[str, Any], base: ElementType) -> Precision:
    skip = module_names(qc.get("llm_int8_skip_modules")) + ("lm_head",)
    if qc.get("load_in_4bit") or qc.get("_load_in_4bit"):
        kind = str(qc.get("bnb_4bit_quant_type") or "nf4")
        nested = bool(qc.get("bnb_4bit_use_double_quant"))
        fmt = WeightFormat(kind="bnb4", bits=4, group_size=64, double_quant=nested)
        return Precision(
            name=f"bnb {kind}" + (" double-quant" if nested else ""),
            method="bitsandbytes",
            base=base,
            groups=(SchemeGroup(targets=("Linear",), fmt=fmt),),
            skip=skip,
        )
    fmt = WeightFormat(kind="bnb8", bits=8)
    return Precision(
        name="bnb int8",
        method="bitsandbytes",
        base=base,
        groups=(SchemeGroup(targets=("Linear",), fmt=fmt),),
        skip=skip,
    )


def _ct_format(weights: Mapping[str, Any]) -> WeightFormat | None:
    bits = weights.get("num_bits")
    if not isinstance(bits, int) or bits <= 0:
        return None
    kind = weights.get("type", "int")
    strategy = weights.get("strategy", "group")
    group = max(0, _count(weights, "group_size", 0, minimum=-1))  # -1: per channel, no groups
    if kind == "float" and bits == 4:
        return NVFP4 if (group or 16) == 16 else MXFP4
    if kind == "float" and bits == 8:
        block = _block(weights.get("block_structure"), "weights.block_structure")
        if block is not None:
            return WeightFormat(kind="fp8", bits=8, block=block)
        return WeightFormat(kind="fp8", bits=8, fp8_scale="tensor" if strategy == "tensor" else "channel")
    return WeightFormat(
        kind="int",
        bits=bits,
        group_size=group if strategy == "group" else 0,
        packing="compressed",
        zero_points=not weights.get("symmetric", True),
        g_idx=weights.get("actorder") == "group",
    )


def _compressed_tensors(qc: Mapping[str, Any], base: ElementType, method: str) -> Precision:
    groups = []
    for group in (qc.get("config_groups") or {}).values():
        if not isinstance(group, Mapping) or not isinstance(group.get("weights"), Mapping):
            continue
        fmt = _ct_format(group["weights"])
        if fmt is not None:
            groups.append(SchemeGroup(targets=module_names(group.get("targets")) or ("Linear",), fmt=fmt))
    algo = str(qc.get("quant_algo") or "")
    if not groups and algo.upper() == "NVFP4":
        groups.append(SchemeGroup(targets=("Linear",), fmt=NVFP4))
    label = algo or " + ".join(sorted({_label(g.fmt) for g in groups})) or "compressed-tensors"
    kv = qc.get("kv_cache_scheme")
    hint = "fp8" if isinstance(kv, Mapping) and kv.get("num_bits") == 8 else None
    return Precision(
        name=label,
        method=method,
        base=base,
        groups=tuple(groups),
        skip=module_names(qc.get("ignore")) + ("lm_head",),
        kv_cache_hint=hint,
    )


def _label(fmt: WeightFormat) -> str:
    if fmt.kind == "int":
        return f"int{int(fmt.bits)}" + (f" g{fmt.group_size}" if fmt.group_size else "")
    return fmt.kind


#: ModelOpt ``quant_algo`` → its weight format; vLLM ``modelopt.py``, SGLang ``modelopt_quant.py``
_MODELOPT_ALGOS: dict[str, WeightFormat] = {
    "FP8": WeightFormat(kind="fp8", bits=8, fp8_scale="tensor"),
    "FP8_PER_CHANNEL_PER_TOKEN": WeightFormat(kind="fp8", bits=8, fp8_scale="channel"),
    "FP8_PB_WO": FP8_BLOCK,
    "NVFP4": NVFP4,
    "MXFP8": WeightFormat(kind="mxfp8", bits=8, group_size=32),
}


def _modelopt_format(algo: str) -> WeightFormat:
    if algo in _MODELOPT_ALGOS:
        return _MODELOPT_ALGOS[algo]
    raise UnknownPrecisionError(
        f"ModelOpt quant_algo {algo or '(none)'} is not supported",
        hint=f"explorer sizes ModelOpt {', '.join(_MODELOPT_ALGOS)} and MIXED_PRECISION of those",
    )


def _modelopt_mixed(inner: Mapping[str, Any]) -> tuple[SchemeGroup, ...]:
    """MIXED_PRECISION: ``quantized_layers`` names each module's own ``quant_algo``."""
    layers = inner.get("quantized_layers")
    if not isinstance(layers, Mapping) or not layers:
        raise UnknownPrecisionError("ModelOpt MIXED_PRECISION names no quantized_layers")
    by_algo: dict[str, list[str]] = {}
    for module, spec in layers.items():
        algo = str(spec.get("quant_algo") or "").upper() if isinstance(spec, Mapping) else ""
        by_algo.setdefault(algo, []).append(str(module))
    return tuple(SchemeGroup(targets=tuple(mods), fmt=_modelopt_format(algo)) for algo, mods in by_algo.items())


def _modelopt(qc: Mapping[str, Any], base: ElementType) -> Precision:
    if qc.get("config_groups"):
        return _compressed_tensors(qc, base, "modelopt")
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), Mapping) else qc
    algo = str(inner.get("quant_algo") or "").upper()
    skip = module_names(inner.get("exclude_modules") or inner.get("ignore")) + ("lm_head",)
    hint = "fp8" if str(inner.get("kv_cache_quant_algo") or "").upper() == "FP8" else None
    if algo == "MIXED_PRECISION":
        groups = _modelopt_mixed(inner)
    else:
        groups = (SchemeGroup(targets=("Linear",), fmt=_modelopt_format(algo)),)
    return Precision(
        name=f"{algo} (ModelOpt)", method="modelopt", base=base, groups=groups, skip=skip, kv_cache_hint=hint
    )


#: GPTQ-layout and AWQ-layout methods: the same stored tensors, another kernel (vLLM gptq_marlin.py,
#: awq_marlin.py, marlin.py, bitblas.py, gptq_bitblas.py, moe_wna16.py, auto_round.py)
_GPTQ_LIKE = ("gptq", "gptq_marlin", "marlin", "bitblas", "gptq_bitblas")
_AWQ_LIKE = ("awq", "awq_marlin")
_AUTO_ROUND = ("auto-round", "intel/auto-round", "auto_round")


def _int_layout(qc: Mapping[str, Any], base: ElementType, method: str) -> Precision:
    """A GPTQ- or AWQ-layout checkpoint under any of the methods that load it."""
    if method == "moe_wna16":
        inner = str(qc.get("linear_quant_method") or "gptq").lower()
        return _int_gptq_awq(qc, base, "awq" if inner == "awq" else "gptq")
    if method in _AUTO_ROUND:
        packing = str(qc.get("packing_format") or qc.get("backend") or "").lower()
        layout = _int_gptq_awq(qc, base, "awq" if "awq" in packing else "gptq")
        extra = module_names(list(qc.get("extra_config") or ())) if isinstance(qc.get("extra_config"), Mapping) else ()
        return Precision(
            name=layout.name + " (AutoRound)",
            method="auto-round",
            base=base,
            groups=layout.groups,
            skip=layout.skip + extra,
        )
    return _int_gptq_awq(qc, base, "awq" if method in _AWQ_LIKE else "gptq")


def precision_from_config(
    view: ConfigView, companions: Mapping[str, Mapping[str, Any]] | None = None
) -> tuple[Precision, list[str]]:
    """The checkpoint's precision and notes on anything approximated.

    ``companions`` maps companion file names (``hf_quant_config.json``) to
    their parsed JSON.
    """
    base = base_dtype(view)
    qc = view.get_dict("quantization_config")
    companion = (companions or {}).get("hf_quant_config.json")
    if qc is None and companion is not None:
        return _modelopt(companion, base), ["precision read from hf_quant_config.json (ModelOpt)"]
    autogptq = (companions or {}).get("quantize_config.json")
    if qc is None and autogptq is not None and isinstance(autogptq.get("bits"), int):
        return _int_gptq_awq(autogptq, base, "gptq"), ["precision read from quantize_config.json (AutoGPTQ)"]
    if qc is None:
        return dense(base.name, source="config"), []
    method = str(qc.get("quant_method") or "").lower()
    notes: list[str] = []
    if method == "fp8":
        precision = _fp8(qc, base)
        if str(view.raw("expert_dtype") or "") == "fp4":
            precision = Precision(
                name=precision.name + " + fp4 experts",
                method="fp8",
                base=base,
                groups=(SchemeGroup(targets=("re:.*experts.*",), fmt=MXFP4),) + precision.groups,
                skip=precision.skip,
            )
            notes.append("experts stored as fp4 with one 8-bit scale per 32 weights (expert_dtype)")
    elif method in _GPTQ_LIKE + _AWQ_LIKE + _AUTO_ROUND + ("moe_wna16",):
        precision = _int_layout(qc, base, method)
    elif method == "bitsandbytes" or qc.get("load_in_4bit") or qc.get("load_in_8bit"):
        precision = _bnb(qc, base)
        notes.append("bitsandbytes quant-state metadata (a few bytes a tensor) not counted")
    elif method == "compressed-tensors":
        precision = _compressed_tensors(qc, base, method)
    elif method in ("modelopt", "modelopt_fp4", "modelopt_fp8", "petit_nvfp4"):
        precision = _modelopt(qc, base)
    elif method == "mxfp4":
        precision = Precision(
            name="mxfp4 experts",
            method="mxfp4",
            base=base,
            groups=(SchemeGroup(targets=("Linear",), fmt=MXFP4),),
            skip=module_names(qc.get("modules_to_not_convert")),
            roles=frozenset({"expert"}),
        )
    elif method in PARSERS:
        precision = PARSERS[method](qc, base)
    else:
        raise unsized(method)
    return precision, notes


def what_if_precision(name: str, base: str = "bf16") -> Precision:
    """A precision a user asks for by name: ``bf16``, ``fp8``, ``int4-awq``, ``nf4``, ``Q4_K_M``…"""
    key = name.strip()
    low = key.lower().replace("_", "-")
    base_type = element_type(base)
    linear = ("Linear",)
    if low in ("bf16", "fp16", "fp32", "float16", "bfloat16", "float32", "f16", "f32"):
        return dense(low)
    table: dict[str, tuple[str, str, WeightFormat]] = {
        "fp8": ("fp8 block 128×128", "fp8", FP8_BLOCK),
        ONLINE_FP8: ("fp8 per-tensor, online", "fp8", FP8_TENSOR),
        "int8": (
            "int8 per-channel",
            "compressed-tensors",
            WeightFormat(kind="int", bits=8, packing="compressed", zero_points=False),
        ),
        "int4-awq": ("int4 AWQ g128", "awq", WeightFormat(kind="int", bits=4, group_size=128, packing="awq")),
        "awq": ("int4 AWQ g128", "awq", WeightFormat(kind="int", bits=4, group_size=128, packing="awq")),
        "int4": ("int4 AWQ g128", "awq", WeightFormat(kind="int", bits=4, group_size=128, packing="awq")),
        "int4-gptq": ("int4 GPTQ g128", "gptq", WeightFormat(kind="int", bits=4, group_size=128, g_idx=True)),
        "gptq": ("int4 GPTQ g128", "gptq", WeightFormat(kind="int", bits=4, group_size=128, g_idx=True)),
        "nf4": ("bnb nf4", "bitsandbytes", WeightFormat(kind="bnb4", bits=4, group_size=64)),
        "bnb-int8": ("bnb int8", "bitsandbytes", WeightFormat(kind="bnb8", bits=8)),
        "nvfp4": ("NVFP4", "modelopt", NVFP4),
        "mxfp4": ("mxfp4", "mxfp4", MXFP4),
    }
    if low in table:
        label, method, fmt = table[low]
        return _linear_what_if(label, method, base_type, fmt)
    scheme = low.removeprefix("fp8-")
    if low.startswith("fp8-") and scheme in PUBLISHED_FP8:
        label, fmt, skip = PUBLISHED_FP8[scheme]
        return _linear_what_if(label, "fp8", base_type, fmt, skip)
    upper = key.upper().replace("-", "_")
    if upper in GGUF_MIX_BITS:
        fallback = gguf_fallback_bits(upper)
        fmt = WeightFormat(
            kind="gguf", bits=GGUF_MIX_BITS[upper], block_cols=256 if fallback else 0, fallback_bits=fallback
        )
        return Precision(
            name=upper,
            method="gguf",
            base=base_type,
            groups=(SchemeGroup(targets=linear, fmt=fmt),),
            source="what-if",
            all_matrices=True,
        )
    raise UnknownPrecisionError(
        f"unknown precision {name!r}",
        hint=f"use one of {', '.join(WHAT_IF_NAMES)}, or a GGUF quant such as Q4_K_M, Q8_0, IQ4_XS",
    )


def _linear_what_if(
    label: str, method: str, base: ElementType, fmt: WeightFormat, skip: tuple[str, ...] = ()
) -> Precision:
    """A what-if storing every linear layer as ``fmt``, but ``skip`` and ``lm_head`` (left in ``base``)."""
    return Precision(
        name=label,
        method=method,
        base=base,
        groups=(SchemeGroup(targets=("Linear",), fmt=fmt),),
        skip=(*skip, "lm_head"),
        source="what-if",
    )


def precision_from_label(label: str, base: str = "bf16") -> Precision:
    """A what-if precision from its name (``fp8``) or from the label it shows (``fp8 block 128×128``)."""
    try:
        return what_if_precision(label, base=base)
    except UnknownPrecisionError:
        for name in (*WHAT_IF_NAMES, ONLINE_FP8, *map(published_fp8_name, PUBLISHED_FP8)):
            candidate = what_if_precision(name, base=base)
            if candidate.name == label:
                return candidate
        raise
