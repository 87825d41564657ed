"""Constants measured from a user's own engine log, for later plans on the same card class and engine.

``explorer check LOG --calibrate`` reads what an engine measured at start-up
(:mod:`explorer.engines.logs.check`) and stores one :class:`Calibration` per engine
and card class; a later plan hands them in with its request
(:attr:`~explorer.engines.request.PlanRequest.calibrations`), and the
engine uses the measured figure instead of its model's:

- ``torch_memory_bytes``: the total the engine's process saw (vLLM's budget
  base; SGLang's free memory counts down from it);
- ``activation_scale``: the log's activation peak over explorer's estimate
  for the log's own setup (vLLM), applied to every later estimate;
- ``non_torch_bytes``: vLLM's non-torch memory inside the budget, for plans
  alike in being tensor-parallel or not (``distributed``);
- ``graph_bytes``: vLLM's CUDA-graph pool;
- ``startup_bytes``: what was in use before SGLang's free-memory snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from explorer.errors import ImplausibleFigureError
from explorer.limits import check_figures


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Figures one log measured on one card class with one engine.

    Attributes:
        engine: ``vllm``, ``sglang`` or ``llamacpp``.
        gpu_class: the catalogue class it was measured on.
        measured_on: the day it was stored (ISO date).
        source: the log's file name.
        torch_memory_bytes: the card's total as the engine saw it.
        activation_scale: logged activation peak / explorer's estimate for the same setup.
        activation_bytes: the logged activation peak (shown, not used).
        non_torch_bytes: non-torch memory inside vLLM's budget.
        distributed: whether ``non_torch_bytes`` was measured under tensor parallelism.
        graph_bytes: the CUDA-graph pool.
        startup_bytes: memory in use before SGLang measured what is free.
    """

    engine: str
    gpu_class: str
    measured_on: str
    source: str = ""
    torch_memory_bytes: int | None = None
    activation_scale: float | None = None
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    distributed: bool = False
    graph_bytes: int | None = None
    startup_bytes: int | None = None

    def __post_init__(self) -> None:
        """Every figure finite and ≥ 0 (a hostile log or cache row is refused, not planned with)."""
        check_figures(
            f"the calibration of {self.engine} on {self.gpu_class}",
            ImplausibleFigureError,
            torch_memory_bytes=self.torch_memory_bytes,
            activation_scale=self.activation_scale,
            activation_bytes=self.activation_bytes,
            non_torch_bytes=self.non_torch_bytes,
            graph_bytes=self.graph_bytes,
            startup_bytes=self.startup_bytes,
        )

    @property
    def note(self) -> str:
        """What a plan says when it uses these figures."""
        return f"calibrated from your log of {self.measured_on}"


def calibration_for(calibrations: Iterable[Calibration], engine: str, gpu_class: str) -> Calibration | None:
    """The calibration of ``engine`` on ``gpu_class``, the last one given winning; None when there is none."""
    found = None
    for c in calibrations:
        if c.engine == engine and c.gpu_class == gpu_class:
            found = c
    return found
