"""Engines from other packages: the ``explorer.engines`` entry-point group, registered at start-up.

A package that adds an engine (TensorRT-LLM, LMDeploy…) declares in its
``pyproject.toml``::

    [project.entry-points."explorer.engines"]
    tensorrt = "explorer_trt:ENGINE"

where ``ENGINE`` is an object implementing
:class:`~explorer.engines.interface.Engine` (or a callable returning one).
:func:`load_engine_plugins` loads each and hands it to
:func:`explorer.engines.registry.register_engine`; from then on the planner,
the command line's ``--engine`` and the app's engine menu list it. The core
never imports ``importlib``: the edges (the CLI, the app, the widget) hand it to
:func:`explorer.engines.registry.use_discovery`, which calls it the first time a
name is not built in or the whole list is asked for.
"""

from __future__ import annotations

from explorer.engines.registry import register_engine
from explorer.errors import PlanError
from explorer.memo import memo

__all__ = ["ENTRY_POINT_GROUP", "load_engine_plugins"]

#: the entry-point group third-party engines register under
ENTRY_POINT_GROUP = "explorer.engines"


@memo(1, keyed_on="nothing: the entry points are read once a process")
def load_engine_plugins() -> tuple[str, ...]:
    """Register every engine of the ``explorer.engines`` entry points; the names registered, in order.

    Raises:
        PlanError: an entry point does not load (naming it and its package), or what it names is not an engine.
    """
    from importlib.metadata import entry_points  # tens of milliseconds: only once an engine is looked for

    names = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as e:  # a third party's import error: name the entry point, never crash the CLI
            where = point.dist.name if point.dist is not None else "an installed package"
            raise PlanError(
                f"the engine entry point {point.name} = {point.value} (from {where}) does not load: {e}",
                hint="fix or uninstall that package",
            ) from None
        engine = loaded() if callable(loaded) and not hasattr(loaded, "walk") else loaded
        names.append(register_engine(engine).name)
    return tuple(names)
