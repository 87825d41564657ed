"""FACES: helpers for the notebooks and widgets: plan rows, fleet rows, the KV lesson, presets, charts."""
