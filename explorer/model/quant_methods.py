"""The engines' quantisation methods beyond the five families every checkpoint hub shows.

vLLM's ``QuantizationMethods`` and SGLang's ``QUANTIZATION_METHODS`` list about thirty
``quant_method`` names. :mod:`explorer.model.quant_config` parses the common ones (fp8, GPTQ, AWQ,
bitsandbytes, compressed-tensors, ModelOpt, MXFP4); this module parses the rest into a
:class:`~explorer.model.precision.Precision`, and names those explorer cannot size, so that no
checkpoint is ever sized as bf16 by default. docs/notes/quant_formats.md has the table and the
engine source each layout was read from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from explorer.errors import UnknownPrecisionError
from explorer.model.dtypes import ElementType
from explorer.model.precision import Precision, SchemeGroup, WeightFormat

#: fp8 weights with one fp32 scale per output row (vLLM fbgemm_fp8.py, ptpc_fp8.py; SGLang w8a8_fp8.py)
FP8_CHANNEL = WeightFormat(kind="fp8", bits=8, fp8_scale="channel")
#: int8 weights with one fp32 scale per output row (SGLang w8a8_int8.py; vLLM experts_int8.py)
INT8_CHANNEL = WeightFormat(kind="int", bits=8, packing="plain", zero_points=False, scale_bytes=4)
#: an msModelSlim (Ascend) W8A8 checkpoint: int8 weights, an fp32 weight_scale and weight_offset per output row
#: (SGLang modelslim ``ModelSlimW8A8Int8.create_weights``: both ``(output_size, 1)``)
INT8_CHANNEL_OFFSET = WeightFormat(kind="int", bits=8, packing="plain", zero_points=True, scale_bytes=4)
#: fp8 weights with one e8m0 scale per 32 inputs (OCP MX; ModelOpt MXFP8)
MXFP8 = WeightFormat(kind="mxfp8", bits=8, group_size=32)

#: methods in the engines' lists whose stored layout explorer does not model, with what to do instead
UNSIZED_METHODS: dict[str, str] = {
    "aqlm": "AQLM codebooks (additive vector quantisation)",
    "gptq_marlin_24": "GPTQ 2:4 sparse (Marlin 24)",
    "qqq": "QQQ (W4A8 with per-channel and per-group scales)",
    "deepspeedfp": "DeepSpeed FP6/FP8 (quantised at load)",
    "tpu_int8": "TPU int8 (quantised at load on TPU)",
    "neuron_quant": "AWS Neuron quantisation",
    "ipex": "Intel IPEX (CPU/XPU)",
    "torchao": "torchao tensor subclasses (their layout depends on the config class)",
    "qoq": "QoQ (W4A8KV4)",
    "w4afp8": "W4A-FP8 (int4 experts, fp8 activations)",
    "fp_quant": "FP-Quant (Hadamard-rotated MXFP4/NVFP4)",
    "inc": "Intel Neural Compressor",
    "rtn": "round-to-nearest at load",
    "gguf": "GGUF inside a config (plan the .gguf file itself: its tensors are sized exactly)",
}


def module_names(value: Any) -> tuple[str, ...]:
    """The module names a quantization_config lists (one name or a list of them; anything else names none)."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value if isinstance(v, str))
    return ()


def _positive_int(value: Any, default: int) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else default


def _linear(name: str, method: str, base: ElementType, fmt: WeightFormat, skip: tuple[str, ...]) -> Precision:
    return Precision(
        name=name, method=method, base=base, groups=(SchemeGroup(targets=("Linear",), fmt=fmt),), skip=skip
    )


def fbgemm_fp8(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """FBGEMM fp8 (Meta's Llama-3.1-405B-Instruct-FP8): fp8 per output channel, fp32 scales.

    vLLM ``fbgemm_fp8.py`` (and SGLang ``fpgemm_fp8.py``): ``weight_scale`` is ``(output_size, 1)``
    float32; ``modules_to_not_convert`` stay in the model dtype (Meta keeps every attention
    projection and the first and last layers' MLPs in bf16).
    """
    skip = module_names(qc.get("modules_to_not_convert")) + ("lm_head",)
    return _linear("fp8 per-channel (FBGEMM)", "fbgemm_fp8", base, FP8_CHANNEL, skip)


def channel_fp8(qc: Mapping[str, Any], base: ElementType, method: str) -> Precision:
    """fp8 per output channel with fp32 scales: SGLang ``w8a8_fp8``, vLLM ``ptpc_fp8`` (quantised at load)."""
    skip = module_names(qc.get("ignored_layers") or qc.get("modules_to_not_convert")) + ("lm_head",)
    return _linear("fp8 per-channel", method, base, FP8_CHANNEL, skip)


def w8a8_int8(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """SGLang ``w8a8_int8``: int8 per output channel, fp32 scale a row (``w8a8_int8.py``); ``ignore`` and the
    weights ``quant_description`` marks ``FLOAT`` stay in the model dtype.

    A ``quant_description`` is msModelSlim's (Ascend) ``quant_model_description.json``: its checkpoints store an
    fp32 ``weight_offset`` beside each row's ``weight_scale`` (SGLang modelslim ``ModelSlimW8A8Int8``).
    """
    described = qc.get("quant_description") if isinstance(qc.get("quant_description"), Mapping) else {}
    kept = tuple(str(k).removesuffix(".weight") for k, v in described.items() if v == "FLOAT")
    skip = module_names(qc.get("ignore") or qc.get("modules_to_not_convert")) + kept + ("lm_head",)
    fmt = INT8_CHANNEL_OFFSET if described else INT8_CHANNEL
    return _linear("int8 per-channel (W8A8)", "w8a8_int8", base, fmt, skip)


def blockwise_int8(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """SGLang ``blockwise_int8``: int8 with one fp32 scale per ``weight_block_size`` tile (128 × 128)."""
    block = qc.get("weight_block_size")
    tile = (block[0], block[1]) if isinstance(block, list) and len(block) == 2 else (128, 128)
    fmt = WeightFormat(kind="int", bits=8, packing="plain", zero_points=False, scale_bytes=4, block=tile)
    skip = module_names(qc.get("ignored_layers") or qc.get("modules_to_not_convert")) + ("lm_head",)
    return _linear(f"int8 block {tile[0]}×{tile[1]}", "blockwise_int8", base, fmt, skip)


def experts_int8(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """vLLM ``experts_int8``: a bf16 checkpoint whose experts vLLM quantises to int8 at load.

    ``experts_int8.py``: ``w13_weight`` int8 and ``w13_scale`` float32 one per output row.
    """
    return Precision(
        name="int8 experts (at load)",
        method="experts_int8",
        base=base,
        groups=(SchemeGroup(targets=("Linear",), fmt=INT8_CHANNEL),),
        roles=frozenset({"expert"}),
    )


def hqq(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """HQQ (vLLM ``hqq_marlin.py``): 4-bit weights, a float scale and a float zero per 64 inputs.

    ``W_q`` packs eight 4-bit values an int32; ``scale`` and ``zero`` are ``(rows, cols/64)`` in the
    model dtype; ``skip_modules`` stay unquantised.
    """
    params = qc.get("quant_config") if isinstance(qc.get("quant_config"), Mapping) else {}
    weights = params.get("weight_quant_params") if isinstance(params.get("weight_quant_params"), Mapping) else {}
    bits = _positive_int(weights.get("nbits"), 4)
    group = _positive_int(weights.get("group_size"), 64)
    fmt = WeightFormat(kind="int", bits=bits, group_size=group, packing="hqq")
    skip = module_names(qc.get("skip_modules")) + ("lm_head",)
    return _linear(f"int{bits} HQQ g{group}", "hqq", base, fmt, skip)


def mxfp8(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """MXFP8: fp8 weights, one e8m0 scale per 32 inputs."""
    skip = module_names(qc.get("ignored_layers") or qc.get("exclude_modules") or qc.get("ignore")) + ("lm_head",)
    return _linear("MXFP8", "mxfp8", base, MXFP8, skip)


def quark(qc: Mapping[str, Any], base: ElementType) -> Precision:
    """AMD Quark: the global weight spec (fp8 per tensor or channel, or MXFP4); ``exclude`` stays bf16."""
    spec = qc.get("global_quant_config") if isinstance(qc.get("global_quant_config"), Mapping) else {}
    weight = spec.get("weight") if isinstance(spec.get("weight"), Mapping) else {}
    dtype = str(weight.get("dtype") or "").lower()
    scheme = str(weight.get("qscheme") or "").lower()
    if dtype.startswith("fp8"):
        fmt = WeightFormat(kind="fp8", bits=8, fp8_scale="tensor" if scheme == "per_tensor" else "channel")
        label = f"fp8 {'per-tensor' if scheme == 'per_tensor' else 'per-channel'} (Quark)"
    elif dtype in ("fp4", "mx_fp4", "mxfp4"):
        fmt = WeightFormat(kind="mxfp4", bits=4, group_size=32)
        label = "mxfp4 (Quark)"
    else:
        raise UnknownPrecisionError(
            f"Quark weight dtype {dtype or '(none)'} is not sized by explorer",
            hint="plan the unquantised model with --quant, or a checkpoint in fp8, MXFP4, AWQ or GPTQ",
        )
    return _linear(label, "quark", base, fmt, module_names(qc.get("exclude")) + ("lm_head",))


#: the methods this module parses, by ``quant_method``
PARSERS: dict[str, Callable[[Mapping[str, Any], ElementType], Precision]] = {
    "fbgemm_fp8": fbgemm_fp8,
    "ptpc_fp8": lambda qc, base: channel_fp8(qc, base, "ptpc_fp8"),
    "w8a8_fp8": lambda qc, base: channel_fp8(qc, base, "w8a8_fp8"),
    "w8a8_int8": w8a8_int8,
    "blockwise_int8": blockwise_int8,
    "experts_int8": experts_int8,
    "hqq": hqq,
    "mxfp8": mxfp8,
    "quark": quark,
}


def unsized(method: str) -> UnknownPrecisionError:
    """The typed error for a ``quant_method`` explorer cannot size (never bf16 by default)."""
    what = UNSIZED_METHODS.get(method)
    described = f" ({what})" if what else ""
    return UnknownPrecisionError(
        f"quant_method {method or '(none)'}{described} is not one explorer can size",
        hint="plan the unquantised model with --quant bf16/fp8/int4-awq, or a published checkpoint in fp8, "
        "AWQ, GPTQ, compressed-tensors, bitsandbytes, NVFP4 or MXFP4; the sized formats are listed in "
        "docs/notes/quant_formats.md",
    )
