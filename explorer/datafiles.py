"""Where the shipped data files live, installed or in a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_path(name: str) -> Path:
    """The path of a file shipped in ``data/`` (the ``explorer_data`` package)."""
    return Path(str(resources.files("explorer_data").joinpath(name)))
