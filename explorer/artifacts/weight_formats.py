"""The weight formats a precision stores, as the weight-support table names them (``fp8-block``, ``awq``...).

Which engine runs which format on which card is the table's (``data/weight_support.csv``, carried by each
catalogue class); an engine's refusal of a format it cannot run is :mod:`explorer.engines.weight_kernels`.
"""

from __future__ import annotations

from explorer.model.precision import Precision, WeightFormat


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
