"""explorer: will a large language model fit, on which cards, with which engine, at what context?

The planner core (shapes, precisions, KV cache, clusters, engines, options,
ranking, placement, speed) takes plain data and returns plain data. The edges
(Hub client, DuckDB cache, CLI, notebooks, widgets) are clients of the core.
"""

__version__ = "0.1.0"
