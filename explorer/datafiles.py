"""Where the shipped data files live, in a checkout or installed.

A checkout (a plain clone or an editable install) reads the repository's
``data/`` folder, so a refreshed snapshot is seen at once; a built wheel
carries ``data/`` as the package ``explorer_data``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_CHECKOUT_DATA = _ROOT / "data"


def data_path(name: str) -> Path:
    """The path of a file shipped in ``data/``."""
    if (_ROOT / "pyproject.toml").is_file() and _CHECKOUT_DATA.is_dir():
        return _CHECKOUT_DATA / name
    return Path(str(resources.files("explorer_data").joinpath(name)))
