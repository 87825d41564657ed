"""The engines' names, in the order plans list them, and how each is written for people.

The built-ins are named here; an engine from another package adds its label when it registers
(:func:`explorer.engines.registry.register_engine`), so the records a plan returns (:mod:`explorer.engines.options`)
show its own label. The engines themselves are in :mod:`explorer.engines.registry`.
"""

from __future__ import annotations

from typing import Literal

EngineName = Literal["vllm", "sglang", "llamacpp"]
#: every engine's name, in the order plans list them (the engines themselves: :mod:`explorer.engines.registry`)
ENGINES: tuple[EngineName, ...] = ("vllm", "sglang", "llamacpp")
#: how each engine's name is written for people: the built-ins', then each registered engine's own
ENGINE_LABELS: dict[str, str] = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp"}


def engine_label(name: str) -> str:
    """How the engine of this name is written for people (``llamacpp`` -> ``llama.cpp``); an unknown name as given."""
    return ENGINE_LABELS.get(name, name)
