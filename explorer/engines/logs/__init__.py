"""Engines' start-up logs read into records: what vLLM, SGLang and llama.cpp printed about their memory.

:func:`read_engine_log` finds the engine and reads its settings and figures
into an :class:`EngineLog`; :mod:`explorer.engines.logs.check` plans the same setup
and compares.
"""

from explorer.engines.logs.read import EXPECTED, read_engine_log
from explorer.engines.logs.record import EngineLog

__all__ = ["EXPECTED", "EngineLog", "read_engine_log"]
