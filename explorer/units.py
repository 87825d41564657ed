"""Byte units: integer arithmetic everywhere, units named only where shown.

Every byte figure in explorer is an ``int`` count of bytes until it is
displayed. ``GiB`` means 1024**3 bytes and ``GB`` means 10**9 bytes; the
formatters below always write the unit out.
"""

from __future__ import annotations

import re

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_UNITS = {
    "b": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)\s*$", re.IGNORECASE)


def cdiv(a: int, b: int) -> int:
    """Integer division rounding up: ``cdiv(33, 16) == 3``."""
    return -(-a // b)


def round_up(a: int, multiple: int) -> int:
    """Round ``a`` up to a multiple: ``round_up(100, 16) == 112``."""
    return cdiv(a, multiple) * multiple


def parse_size(text: str) -> int:
    """Parse ``"81559MiB"``, ``"80GiB"``, ``"24 GB"`` into an int count of bytes.

    Raises ValueError on anything else; callers wrap it in their own typed error.
    """
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB): {text!r}")
    number, unit = m.groups()
    return round(float(number) * _UNITS[unit.lower()])


def gib(n_bytes: int, digits: int = 1) -> str:
    """Show bytes in GiB (1024**3), with the unit: ``gib(81559 * MiB) == '79.6 GiB'``."""
    return f"{n_bytes / GiB:,.{digits}f} GiB"


def mib(n_bytes: int, digits: int = 2) -> str:
    """Show bytes in MiB (1024**2), with the unit."""
    return f"{n_bytes / MiB:,.{digits}f} MiB"


def gb(n_bytes: int, digits: int = 1) -> str:
    """Show bytes in GB (10**9), with the unit."""
    return f"{n_bytes / GB:,.{digits}f} GB"


def human_count(n: int) -> str:
    """A parameter or token count for people: ``8.03B``, ``70.6B``, ``131,072``."""
    if n >= 10**12:
        return f"{n / 10**12:.2f}T"
    if n >= 10**9:
        return f"{n / 10**9:.2f}B"
    if n >= 10**6:
        return f"{n / 10**6:.1f}M"
    return f"{n:,}"
