"""The engines by name: the one place an engine's name is turned into the engine.

The planner, pinning and the fleet look engines up here and call them
through :class:`~explorer.engines.interface.Engine`; none of them compares
an engine's name. The faces (the command line's ``--engine``, the app's
engine menu, ``explorer check``) list :func:`engine_labels`.

Engines from other packages register here too (:func:`register_engine`):
the edges hand the registry how to load the ``explorer.engines`` entry-point
group (:func:`use_discovery` with :func:`explorer.sources.engine_plugins.load_engine_plugins`),
so a third party adds an engine without changing explorer. Loading entry points
costs tens of milliseconds a start, so the registry loads them only when they
can matter: a name that is not built in (:func:`engine_named`), or the whole
list (:func:`engine_names`, :func:`engine_labels`, :func:`log_readers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from explorer.engines import sglang, vllm
from explorer.engines.interface import Engine, LogReader, SplitEngine
from explorer.engines.llamacpp import engine as llamacpp
from explorer.engines.names import ENGINE_LABELS, engine_label
from explorer.errors import PlanError
from explorer.model.artifacts import Artifact

#: the methods an engine must have (:class:`~explorer.engines.interface.Engine`)
ENGINE_METHODS = ("walk", "recheck", "footprint", "serves", "pin", "fleet_command")
#: the methods that make it a split engine (:class:`~explorer.engines.interface.SplitEngine`)
SPLIT_METHODS = ("decompositions", "make_layout", "refusals", "host_claim", "usable_share", "evaluate")

#: every engine, in the order plans list them: the built-ins (:data:`explorer.engines.names.ENGINES`), then those
#: registered
ENGINES_BY_NAME: dict[str, Engine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE, llamacpp.ENGINE)}
#: the engines that split a replica tensor × pipeline over cards: those pinning can check
SPLIT_ENGINES: dict[str, SplitEngine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE)}
#: the engine whose accounting ``explorer place`` sizes a fleet's models by, unless told
FLEET_ENGINE: Engine = vllm.ENGINE
#: the engine that runs a model on a host without discrete GPUs (a CPU host's RAM)
CPU_ENGINE: Engine = llamacpp.ENGINE
#: how the engines of other packages are found (:func:`use_discovery`): none until an edge says
_DISCOVERY: list[Callable[[], object]] = []


def use_discovery(discover: Callable[[], object]) -> None:
    """Find the engines of other packages with ``discover`` (which registers each), at the first moment they can
    matter: a name that is not built in, or the whole list. Idempotent: ``discover`` may be called many times."""
    _DISCOVERY[:] = [discover]


def _discover() -> None:
    for discover in _DISCOVERY:
        discover()


def engine_names() -> tuple[str, ...]:
    """Every engine's name, in plan order: the built-ins, then those of other packages (found now if not yet)."""
    _discover()
    return tuple(ENGINES_BY_NAME)


def register_engine(engine: object) -> Engine:
    """Add an engine from another package (after the built-ins, in the order registered), with its ``label`` (else
    its name) as the records of a plan show it; returns it.

    Raises:
        PlanError: it is not an engine (no ``name``, or a method of :data:`ENGINE_METHODS` missing), or its name
            is taken by another engine.
    """
    name = getattr(engine, "name", None)
    missing = [m for m in ENGINE_METHODS if not callable(getattr(engine, m, None))]
    if not isinstance(name, str) or not name.isidentifier() or missing:
        raise PlanError(
            f"{engine!r} is not an engine: " + (f"it lacks {', '.join(missing)}" if missing else "no name"),
            hint="an engine implements explorer.engines.interface.Engine",
        )
    known = ENGINES_BY_NAME.get(name)
    if known is not None and known is not engine:
        raise PlanError(f"an engine named {name!r} is registered already", hint="give the new engine its own name")
    ENGINES_BY_NAME[name] = engine  # type: ignore[assignment]
    ENGINE_LABELS[name] = getattr(engine, "label", name)
    if all(callable(getattr(engine, m, None)) for m in SPLIT_METHODS):
        SPLIT_ENGINES[name] = engine  # type: ignore[assignment]
    return engine  # type: ignore[return-value]


def engine_labels() -> Mapping[str, str]:
    """Every engine's name -> its label as people write it (``vllm`` -> ``vLLM``), in plan order."""
    return {name: engine_label(name) for name in engine_names()}


def engine_named(name: str) -> Engine:
    """The engine of this name.

    Raises:
        PlanError: no engine has the name.
    """
    engine = ENGINES_BY_NAME.get(name)
    if engine is None:
        names = engine_names()  # not built in: perhaps another package's
        engine = ENGINES_BY_NAME.get(name)
        if engine is None:
            raise PlanError(f"unknown engine {name!r}", hint=f"engines: {', '.join(names)}")
    return engine


def engine_serving(artifact: Artifact) -> Engine:
    """The first engine, in plan order, that serves ``artifact`` (safetensors: vLLM; a GGUF: llama.cpp)."""
    return next(e for e in ENGINES_BY_NAME.values() if e.serves(artifact))


def log_readers() -> tuple[LogReader, ...]:
    """The start-up log readers engines bring (:attr:`explorer.engines.interface.Engine.log_reader`), in plan order;
    the built-in engines' logs are read by :mod:`explorer.engines.logs`, so these are other packages'."""
    readers = (getattr(ENGINES_BY_NAME[name], "log_reader", None) for name in engine_names())
    return tuple(r for r in readers if isinstance(r, LogReader))


def engines_named(names: Iterable[str]) -> list[Engine]:
    """The engines of these names, in the order given (see :func:`engine_named`)."""
    return [engine_named(name) for name in names]
