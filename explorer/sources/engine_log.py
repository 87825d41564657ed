"""EDGE: an engine log's text checked against explorer, the model resolved the way every command resolves one.

:func:`check_log_text` reads the log (:func:`explorer.engines.logs.read_engine_log`),
resolves its model (``model`` when given, else the model the log names: a
Hub id from the cache, the Hub or the shipped snapshot; a local path the log
names must exist here) and plans the same setup on the shipped catalogue
(:func:`explorer.engines.logs.check.check_log`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.engines.logs import read_engine_log
from explorer.engines.logs.check import LogCheck, check_log
from explorer.engines.registry import log_readers
from explorer.errors import EngineLogError
from explorer.sources.resolve import load_model
from explorer.sources.shipped import shipped_catalogue


def check_log_text(
    text: str,
    *,
    model: str | None = None,
    card: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    **resolve: Any,
) -> LogCheck:
    """The log beside explorer's plan of it; ``resolve`` goes to :func:`explorer.sources.resolve.load_model`.

    Raises:
        EngineLogError: the log cannot be read, names no model and none is given, or names no card.
    """
    log = read_engine_log(text, more_readers=log_readers)  # other packages' engines' readers, after the built-ins
    name = model or log.model
    if not name:
        raise EngineLogError(
            f"the {log.engine} log does not name its model", hint="name it with --model, e.g. --model Qwen/Qwen3-8B"
        )
    resolved = load_model(name, **resolve)
    ref = resolved.repo or name
    return check_log(log, resolved.shape, shipped_catalogue(), card=card, overrides=overrides, model_ref=ref)
