"""What each GPU architecture runs, by engine and weight format: the table of ``data/weight_support.csv``.

An engine loads a checkpoint's weights only where it has kernels for their format on that card: vLLM runs
fp8 natively from Ada (sm89) and weight-only through FP8 Marlin on Ampere, but block-scaled fp8 (DeepSeek's)
not at all there; SGLang's docs send A100 users to a BF16 conversion; NVFP4 computes natively only on
Blackwell. The table (its sources in ``data/weight_support.md``) is parsed from text handed in, like the GPU
catalogue, and each catalogue class carries its architecture's rows (:attr:`GPUClass.weight_support`).

Support levels: ``native`` (the format's own kernels), ``weight-only`` (the weights stay in the format and are
dequantised in the kernel: Marlin; activations stay 16-bit), ``no`` (the engine refuses or fails to load).
A format without a row for an architecture is not checked.
"""

from __future__ import annotations

import csv
import io

from explorer.errors import CatalogueError

#: GPU generations, as the engines' kernels tell them apart (compute capability in the comment)
ARCHITECTURES: tuple[str, ...] = (
    "volta",  # sm70
    "turing",  # sm75
    "ampere",  # sm80, sm86
    "ada",  # sm89
    "hopper",  # sm90
    "blackwell",  # sm100, sm103 (B200, B300, GB200)
    "blackwell-rtx",  # sm120 (RTX 5090, RTX PRO 6000)
    "cdna2",  # MI210, MI250X (gfx90a)
    "cdna3",  # MI300X, MI325X (gfx942)
    "cdna4",  # MI355X (gfx950)
    "apple",  # M-series (Metal; llama.cpp only)
)

#: weight formats the table names (:func:`explorer.artifacts.weight_formats.weight_formats` maps a precision to them)
WEIGHT_FORMATS: tuple[str, ...] = ("fp8", "fp8-block", "int8", "awq", "gptq", "w4a16", "nvfp4", "mxfp4", "bnb")

#: how an engine runs a format on an architecture
SUPPORT_LEVELS: tuple[str, ...] = ("native", "weight-only", "no")

#: the columns of data/weight_support.csv
COLUMNS = ("engine", "format", "architecture", "support", "source")


def parse_weight_support(text: str, *, source: str = "weight_support.csv") -> tuple[tuple[str, str, str, str], ...]:
    """(engine, format, architecture, support) rows of the table, each value checked.

    Raises:
        CatalogueError: a missing column, an unknown architecture, format or support level, or a
            (engine, format, architecture) given twice.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise CatalogueError(f"{source} lacks columns: {', '.join(missing)}")
    rows: list[tuple[str, str, str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    for line, row in enumerate(reader, start=2):
        engine, fmt, arch, level = (str(row.get(k) or "").strip() for k in COLUMNS[:4])
        for value, allowed, what in (
            (arch, ARCHITECTURES, "architecture"),
            (fmt, WEIGHT_FORMATS, "format"),
            (level, SUPPORT_LEVELS, "support"),
        ):
            if value not in allowed:
                raise CatalogueError(f"{source} line {line}: {what} {value!r} is not one of {', '.join(allowed)}")
        if not engine:
            raise CatalogueError(f"{source} line {line}: no engine")
        if (engine, fmt, arch) in seen:
            raise CatalogueError(f"{source} line {line}: {engine} {fmt} on {arch} is given twice")
        seen.add((engine, fmt, arch))
        rows.append((engine, fmt, arch, level))
    return tuple(rows)


def rows_for(rows: tuple[tuple[str, str, str, str], ...], architecture: str) -> tuple[tuple[str, str, str], ...]:
    """The (engine, format, support) rows of one architecture."""
    return tuple((engine, fmt, level) for engine, fmt, arch, level in rows if arch == architecture)
