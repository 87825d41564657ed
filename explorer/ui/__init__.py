"""FACES: helpers for the notebooks and widgets: plan rows, fleet rows, the KV lesson, presets, charts.

Importing the package registers the engines other packages add (the ``explorer.engines`` entry points), so
every menu, label and settings group built here lists them.
"""

from explorer.sources.engine_plugins import load_engine_plugins

load_engine_plugins()
