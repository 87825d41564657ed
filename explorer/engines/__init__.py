"""Inference engines: each engine's memory accounting, and how it lays a replica over cards.

- ``interface``: the :class:`~explorer.engines.interface.Engine` protocol; ``registry``: the engines by name;
- ``vllm``, ``sglang``, ``llamacpp/``: the engines;
- ``split_walk``: the tensor × pipeline walk vLLM and SGLang share; ``collect``: where a walk writes
  the ways that fit and the refusals;
- ``common``: the request, layouts and per-card memory; ``options``: the records a plan returns;
  ``parallel_rules``, ``fit_search``: divisibility rules and the largest-fit search the engines share.
"""
