"""The built-in engines' names, in the order plans list them, and how each is written for people.

The engines themselves, and engines from other packages, are in :mod:`explorer.engines.registry`.
"""

from __future__ import annotations

from typing import Literal

EngineName = Literal["vllm", "sglang", "llamacpp"]
#: every engine's name, in the order plans list them (the engines themselves: :mod:`explorer.engines.registry`)
ENGINES: tuple[EngineName, ...] = ("vllm", "sglang", "llamacpp")
#: how each engine's name is written for people
ENGINE_LABELS: dict[EngineName, str] = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp"}
