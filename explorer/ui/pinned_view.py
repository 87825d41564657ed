"""The app's "Pin GPUs": the pinned cards checked with the engine the user chose, and their launch lines.

The engine menu names one engine, or all of them; with all, the pin is laid out by the engine that serves the
first chosen weights (a GGUF: llama.cpp), as the CLI does. The answer is
:func:`explorer.plan.pinning.check_pinned`'s, over every chosen artifact (the engine takes the first it
serves), and its lines are :func:`explorer.plan.pinning.pinned_launch`'s: devices, port, a line a node.
"""

from __future__ import annotations

from collections.abc import Sequence

from explorer.engines.registry import engine_serving
from explorer.engines.request import PlanRequest
from explorer.hardware.cluster import Cluster
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape
from explorer.plan.pinning import PinnedResult, check_pinned, pinned_launch

__all__ = ["pin_engine", "pinned_answer", "pinned_launch"]


def pin_engine(engines: Sequence[str], artifacts: Sequence[Artifact]) -> str:
    """The engine a pin is laid out with: the menu's one engine; with several, the one serving the first
    chosen artifact (when the menu holds it), else the menu's first."""
    if len(engines) == 1 or not artifacts:
        return engines[0]
    serving = engine_serving(artifacts[0]).name
    return serving if serving in engines else engines[0]


def pinned_answer(
    shape: ModelShape,
    cluster: Cluster,
    pin_text: str,
    *,
    engines: Sequence[str],
    request: PlanRequest,
    artifacts: Sequence[Artifact],
    model_ref: str,
) -> PinnedResult:
    """The pinned cards (``NODE:INDEX`` or ``INDEX``, comma-separated) checked with :func:`pin_engine`'s engine.

    Raises:
        ManualSelectionError: the pin is impossible (see :func:`explorer.plan.pinning.check_pinned`).
    """
    return check_pinned(
        shape,
        cluster,
        [g.strip() for g in pin_text.split(",") if g.strip()],
        engine=pin_engine(engines, artifacts),
        request=request,
        artifacts=artifacts,
        model_ref=model_ref,
    )
