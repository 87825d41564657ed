"""The figures a CUDA out-of-memory error prints, whichever engine's traceback it ends: read, never guessed.

PyTorch prints two forms (figures in ``bytes``, ``KiB``, ``MiB`` or ``GiB``, by size):

- torch ≥ 2.1 (2.1 spells it "capacty"): ``CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.15 GiB of
  which 1.02 GiB is free. … Of the allocated memory 75.38 GiB is allocated by PyTorch, and 1.47 GiB is
  reserved by PyTorch but unallocated.``
- before: ``CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB
  already allocated; 3.75 MiB free; 14.58 GiB reserved in total by PyTorch)``

Each pattern starts with its own literal (``Tried to allocate ``, ``GPU ``, ``Of the allocated memory ``,
``(GPU ``) and is matched line by line (:mod:`explorer.engines.logs.record`). The first error's figures are
kept: the later ones of a multi-rank run repeat it or follow from it.
"""

from __future__ import annotations

from explorer.engines.logs.record import NUMBER, first
from explorer.units import GiB, KiB, MiB

#: lines that say a run ended out of GPU memory (a log made of a traceback alone is read from them)
SIGNATURES = (r"CUDA out of memory", r"OutOfMemoryError", r"HIP out of memory")
#: a size as PyTorch's ``format_size`` prints it
SIZE = NUMBER + r" ?(bytes|B|KiB|MiB|GiB)"
_UNITS = {"bytes": 1, "B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB}
#: the parts an out-of-memory error prints, as observed keys, with how people read them
PARTS = {
    "oom_requested_bytes": "tried to allocate",
    "oom_free_bytes": "free when it failed",
    "oom_allocated_bytes": "allocated by PyTorch",
    "oom_reserved_unallocated_bytes": "reserved by PyTorch, unallocated",
    "oom_reserved_bytes": "reserved by PyTorch in total",
}


def sized_bytes(number: str, unit: str) -> int:
    """A size as PyTorch prints it (``1.96``, ``GiB``) in bytes."""
    return round(float(number) * _UNITS[unit])


def oom_figures(text: str) -> dict[str, int]:
    """The out-of-memory error's figures (``oom_*_bytes`` and ``torch_total_bytes``), or {} when there is none."""
    out: dict[str, int] = {}
    asked = first(r"Tried to allocate " + SIZE, text)
    if asked:
        out["oom_requested_bytes"] = sized_bytes(asked[1], asked[2])
    new = first(r"GPU \d+ has a total capaci?ty of " + SIZE + " of which " + SIZE + " is free", text)
    if new:
        out["torch_total_bytes"] = sized_bytes(new[1], new[2])
        out["oom_free_bytes"] = sized_bytes(new[3], new[4])
    held = first(
        r"Of the allocated memory " + SIZE + r" is allocated by PyTorch, and " + SIZE + " is reserved by PyTorch", text
    )
    if held:
        out["oom_allocated_bytes"] = sized_bytes(held[1], held[2])
        out["oom_reserved_unallocated_bytes"] = sized_bytes(held[3], held[4])
    old = first(
        r"\(GPU \d+; "
        + "; ".join(
            (SIZE + " total capacity", SIZE + " already allocated", SIZE + " free", SIZE + " reserved in total")
        ),
        text,
    )
    if old:
        sizes = [sized_bytes(old[i], old[i + 1]) for i in range(1, 9, 2)]
        out["torch_total_bytes"], out["oom_allocated_bytes"], out["oom_free_bytes"], out["oom_reserved_bytes"] = sizes
    return out
