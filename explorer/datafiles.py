"""Where the shipped data files live, in a checkout or installed.

A checkout (a plain clone or an editable install) reads the repository's
``data/`` folder, so a refreshed snapshot is seen at once; a built wheel
carries ``data/`` as the package ``explorer_data``, installed unpacked.
(``importlib.resources.files`` would say the same after importing zipfile
and its kin: 30 ms of a 0.2 s command.)
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_CHECKOUT_DATA = _ROOT / "data"


def data_path(name: str) -> Path:
    """The path of a file shipped in ``data/``."""
    if (_ROOT / "pyproject.toml").is_file() and _CHECKOUT_DATA.is_dir():
        return _CHECKOUT_DATA / name
    import explorer_data  # only an installed wheel has it

    return Path(explorer_data.__file__).parent / name
