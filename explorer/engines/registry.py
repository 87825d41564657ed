"""The engines by name: the one place an engine's name is turned into the engine.

The planner, pinning and the fleet look engines up here and call them
through :class:`~explorer.engines.interface.Engine`; none of them compares
an engine's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from explorer.engines import sglang, vllm
from explorer.engines.interface import Engine, SplitEngine
from explorer.engines.llamacpp import engine as llamacpp
from explorer.errors import PlanError
from explorer.model.artifacts import Artifact

#: every engine, in the order plans list them (:data:`explorer.engines.common.ENGINES`)
ENGINES_BY_NAME: Mapping[str, Engine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE, llamacpp.ENGINE)}
#: the engines that split a replica tensor × pipeline over cards: those pinning can check
SPLIT_ENGINES: Mapping[str, SplitEngine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE)}
#: the engine that runs a model on a host without discrete GPUs (a CPU host's RAM)
CPU_ENGINE: Engine = llamacpp.ENGINE


def engine_named(name: str) -> Engine:
    """The engine of this name.

    Raises:
        PlanError: no engine has the name.
    """
    engine = ENGINES_BY_NAME.get(name)
    if engine is None:
        raise PlanError(f"unknown engine {name!r}", hint=f"engines: {', '.join(ENGINES_BY_NAME)}")
    return engine


def engine_serving(artifact: Artifact) -> Engine:
    """The first engine, in plan order, that serves ``artifact`` (safetensors: vLLM; a GGUF: llama.cpp)."""
    return next(e for e in ENGINES_BY_NAME.values() if e.serves(artifact))


def engines_named(names: Iterable[str]) -> list[Engine]:
    """The engines of these names, in the order given (see :func:`engine_named`)."""
    return [engine_named(name) for name in names]
