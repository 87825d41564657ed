"""What a request lets llama.cpp do with its layers: ``-ngl`` and ``--no-cpu-offload``.

``-ngl`` counts the output layer as layer ``n_layer`` (see
:mod:`explorer.engines.llamacpp.layers`), so a model of ``n_layer`` blocks has
``n_layer + 1`` offloadable layers. As a scheduler that takes ``-ngl`` from the
user reads it (gpustack's GGUF selector does the same):

- none given: every layout is tried: full offload, partial offload (some layers on
  the CPU) and CPU only; the last two only when CPU offload is allowed;
- ``-ngl 0``: CPU only;
- ``0 < N < n_layer + 1``: partial offload of exactly N layers, on the fewest cards
  that hold them; it needs CPU offload for the rest;
- ``N ≥ n_layer + 1`` (or negative, llama.cpp's "all"): full offload only.

``--no-cpu-offload`` forbids every layer on the CPU: no partial offload (one node's,
or across nodes through RPC) and no CPU-only option.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.common import PlanRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class Offload:
    """The kinds of llama.cpp layouts a request allows.

    Attributes:
        gpu: layouts with offload devices (cards, RPC servers, a Mac's GPU) may be tried.
        partial: layers may stay on the host.
        cpu: the CPU-only layout is tried.
        fixed_ngl: ``-ngl`` as the user gave it (None: as many as fit).
        conflict: why nothing can run as asked (None: something can).
    """

    gpu: bool
    partial: bool
    cpu: bool
    fixed_ngl: int | None = None
    conflict: str | None = None

    @property
    def wants_full(self) -> bool:
        """Whether only a layout holding every layer on devices is acceptable."""
        return not self.partial


def offload_for(request: PlanRequest, n_layer: int) -> Offload:
    """What ``request`` lets llama.cpp do with a model of ``n_layer`` blocks (``n_layer + 1`` with the output)."""
    total = n_layer + 1
    ngl, allowed = request.n_gpu_layers, request.cpu_offload
    if ngl is None:
        return Offload(gpu=True, partial=allowed, cpu=allowed)
    if ngl < 0 or ngl >= total:
        return Offload(gpu=True, partial=False, cpu=False, fixed_ngl=ngl)
    if ngl == 0:
        why = None if allowed else "--ngl 0 runs every layer on the CPU, which --no-cpu-offload forbids"
        return Offload(gpu=False, partial=False, cpu=True, fixed_ngl=0, conflict=why)
    why = (
        None
        if allowed
        else f"--ngl {ngl} of {total} layers leaves {total - ngl} on the CPU, which --no-cpu-offload forbids"
    )
    return Offload(gpu=True, partial=True, cpu=False, fixed_ngl=ngl, conflict=why)
