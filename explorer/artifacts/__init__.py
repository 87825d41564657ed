"""What a model's repository offers to load: artifacts, published checkpoints, the formats their weights store.

Sits between ``gguf`` and ``engines`` in the layers: it may import ``model``, ``gguf`` and ``hardware``, and the
engines, the planner, the fleet and the sources read it (so ``fleet`` and ``sources`` need no ``plan``).
"""
