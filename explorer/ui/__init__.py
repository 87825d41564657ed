"""FACES: helpers for the notebooks and widgets: plan rows, fleet rows, the KV lesson, presets, charts.

Importing the package tells the registry how to find the engines other packages add (the ``explorer.engines``
entry points): every menu, label and settings group built here lists them, loaded when first listed.
"""

from explorer.engines.registry import use_discovery
from explorer.sources.engine_plugins import load_engine_plugins

use_discovery(load_engine_plugins)
