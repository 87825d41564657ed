"""Whether an engine has kernels for a precision's weights on a card (issue 23 §3).

A precision names its weight formats (:func:`~explorer.artifacts.weight_formats.weight_formats`: ``fp8-block`` for DeepSeek's 128 × 128 fp8,
``nvfp4``, ``awq``…); each catalogue class carries, for its architecture, how each engine runs each format
(:meth:`~explorer.hardware.catalogue.GPUClass.runs`, from ``data/weight_support.csv``). A format that does not
run is a refusal (:data:`RULE`) before any layout is tried; one that runs weight-only (Marlin) is said on the
option. The engine asks with its own name, so the walk itself never compares engine names.
"""

from __future__ import annotations

from explorer.artifacts.weight_formats import weight_formats
from explorer.hardware.catalogue import GPUClass
from explorer.model.precision import Precision

#: the refusal rule of weights an engine cannot run on a card
RULE = "weights-unsupported"


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
