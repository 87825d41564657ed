"""Whether an engine has kernels for a precision's weights on a card (issue 23 §3).

A precision names its weight formats (:func:`weight_formats`: ``fp8-block`` for DeepSeek's 128 × 128 fp8,
``nvfp4``, ``awq``…); each catalogue class carries, for its architecture, how each engine runs each format
(:meth:`~explorer.hardware.catalogue.GPUClass.runs`, from ``data/weight_support.csv``). A format that does not
run is a refusal (:data:`RULE`) before any layout is tried; one that runs weight-only (Marlin) is said on the
option. The engine asks with its own name, so the walk itself never compares engine names.
"""

from __future__ import annotations

from explorer.hardware.catalogue import GPUClass
from explorer.model.precision import Precision, WeightFormat

#: the refusal rule of weights an engine cannot run on a card
RULE = "weights-unsupported"


def _format_name(fmt: WeightFormat) -> str | None:
    """The weight-support table's name of one stored format; None for formats the table does not check."""
    if fmt.kind == "fp8":
        return "fp8-block" if fmt.block else "fp8"
    if fmt.kind in ("nvfp4", "mxfp4"):
        return fmt.kind
    if fmt.kind in ("bnb4", "bnb8"):
        return "bnb"
    if fmt.kind == "int":
        if fmt.packing in ("awq", "gptq"):
            return fmt.packing
        if int(fmt.bits) == 8 and not fmt.group_size and fmt.packing in ("plain", "compressed"):
            return "int8"  # W8A8 int8 per channel (or per block)
        return "w4a16"  # compressed-tensors and HQQ int weight-only: Marlin
    return None


def weight_formats(precision: Precision) -> tuple[str, ...]:
    """The weight-support formats a precision stores (``("fp8-block",)`` for DeepSeek-R1; empty for bf16 and GGUF)."""
    if precision.method == "gguf":
        return ()
    names = (_format_name(group.fmt) for group in precision.groups)
    return tuple(dict.fromkeys(n for n in names if n is not None))


def weights_refusal(engine: str, precision: Precision, gpu: GPUClass) -> str | None:
    """Why ``engine`` cannot run ``precision``'s weights on ``gpu``, or None when it can (or the table is silent)."""
    for fmt in weight_formats(precision):
        if gpu.runs(engine, fmt) == "no":
            return (
                f"{engine} has no {fmt} kernel for {gpu.architecture} cards ({gpu.name}): the {precision.name} "
                "weights do not load there; a bf16, int8 or int4 checkpoint runs (data/weight_support.md)"
            )
    return None


def weight_only_note(engine: str, precision: Precision, gpu: GPUClass) -> str:
    """A note when ``engine`` runs the weights weight-only on ``gpu`` (Marlin: 16-bit compute), else ``""``."""
    slow = [fmt for fmt in weight_formats(precision) if gpu.runs(engine, fmt) == "weight-only"]
    if not slow:
        return ""
    return (
        f"{', '.join(slow)} weights run weight-only on {gpu.architecture} ({gpu.name}): {engine} dequantises them "
        "in a Marlin kernel, so memory is as planned but the compute is 16-bit"
    )
