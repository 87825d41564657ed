"""Inference engines: each engine's memory accounting, and how it lays a replica over cards.

- ``interface``: the :class:`~explorer.engines.interface.Engine` protocol; ``registry``: the engines by name;
- ``vllm``, ``sglang``, ``llamacpp/``: the engines;
- ``split_walk``: the tensor × pipeline walk vLLM and SGLang share; ``collect``: where a walk writes
  the ways that fit and the refusals;
- ``request``: what the user asks for; ``names``: the engines' names and labels; ``layouts``: a replica over
  cards; ``evaluation``: an engine's per-card memory records for a layout; ``stage_kv``: a pipeline stage's KV
  bytes; ``serve_command``: the parts of a launch command the engines share; ``options``: the records a plan
  returns;
  ``parallel_rules``, ``fit_search``: divisibility rules and the largest-fit search the engines share.
"""
