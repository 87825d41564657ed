"""A node's host CPU, as far as the engines care: the vector extensions llama.cpp uses, and its bandwidth.

llama.cpp's CPU backend chooses buffers by what the CPU offers: with AVX2 it
repacks some quantised weights (``CPU_REPACK``); on Sapphire Rapids and later
Xeons (AMX) it moves matmul weights to its ``AMX`` buffer instead. A node
states its CPU in the cluster spec (``cpu=amx``) or file (``"cpu": "amx"``)
by a feature level or by a CPU the :class:`CPUTable` names (``cpu=epyc-9654``,
``cpu=rpi5``: shipped in ``data/cpus.csv`` with each CPU's memory
bandwidth), and may state the bandwidth itself (``bw=200`` GB/s); unstated,
it is an x86-64 CPU with AVX2, the level llama.cpp's reference builds assume,
of unknown bandwidth (the speed model's default).
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from explorer.errors import CatalogueError, ClusterSpecError
from explorer.units import GB, TB

#: CPU feature levels, each implying those before it (AMX hosts have AVX-512, which implies AVX2)
FEATURE_LEVELS: tuple[str, ...] = ("avx2", "avx512", "amx")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCPU:
    """A node's CPU.

    Attributes:
        name: how the user named it (a feature level: ``avx2``, ``avx512``, ``amx``).
        features: the vector extensions it offers, lower-case (``{"avx2", "avx512", "amx"}``).
        memory_bandwidth_bytes_per_s: its memory bandwidth when known (None: the speed model's default).
        bandwidth_stated: the bandwidth was stated with ``bw=`` (not the table's).
    """

    name: str
    features: frozenset[str]
    memory_bandwidth_bytes_per_s: int | None = None
    bandwidth_stated: bool = False

    @property
    def has_amx(self) -> bool:
        """Whether llama.cpp would use its AMX buffer type on this CPU."""
        return "amx" in self.features

    @property
    def build(self) -> str:
        """The feature level a native llama.cpp build for this CPU compiles in, which picks its CPU buffers:
        the highest of :data:`FEATURE_LEVELS` it offers (``epyc-9654``, AVX-512: ``avx512``; ``xeon-8480``:
        ``amx``). An ARM CPU (``neon``: ``apple-m2-max``, ``rpi5``, ``graviton4``) offers none; it is sized as
        an ``avx2`` build: its CPU_REPACK takes other types, but a repacked weight moves from the mapped file
        to a buffer of the same size, so the host's total is the same."""
        return next((level for level in reversed(FEATURE_LEVELS) if level in self.features), FEATURE_LEVELS[0])


#: a node whose CPU is not stated
DEFAULT_CPU = HostCPU(name="avx2", features=frozenset({"avx2"}))


#: the columns of data/cpus.csv
CPU_COLUMNS = ("name", "features", "memory_bandwidth_bytes_per_s", "memory", "source")
_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]*$", re.A)
_BANDWIDTH = re.compile(r"^(?P<n>\d{1,7}(?:\.\d{1,3})?)\s*(?P<u>[gt]?)(?:b(?:/s)?)?$", re.I | re.A)


class CPUTable:
    """Named CPUs (``data/cpus.csv``, handed in by :mod:`explorer.sources.shipped`): features and bandwidth."""

    def __init__(self, cpus: Iterable[HostCPU]) -> None:
        self._by_name: dict[str, HostCPU] = {}
        for c in cpus:
            if c.name in self._by_name or c.name in FEATURE_LEVELS:
                raise CatalogueError(f"CPU {c.name!r} appears twice in the CPU table, or is a feature level")
            self._by_name[c.name] = c

    @classmethod
    def from_csv_text(cls, text: str, *, source: str = "cpus.csv") -> CPUTable:
        """Parse a CPU table (the columns of :data:`CPU_COLUMNS`).

        Raises:
            CatalogueError: a column is missing or a row is malformed.
        """
        reader = csv.DictReader(io.StringIO(text))
        try:
            missing = [c for c in CPU_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise CatalogueError(f"{source} lacks columns: {', '.join(missing)}")
            return cls(_cpu_row(r, f"{source} line {i}") for i, r in enumerate(reader, start=2))
        except csv.Error as e:
            raise CatalogueError(f"{source} is not a CSV table: {e}") from None

    def get(self, name: str) -> HostCPU | None:
        """The CPU of exactly this name (any case), or None."""
        return self._by_name.get(name.strip().lower())

    @property
    def names(self) -> tuple[str, ...]:
        """Every CPU's name, in table order."""
        return tuple(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


def _cpu_row(row: dict[str, str], where: str) -> HostCPU:
    name = (row.get("name") or "").strip().lower()
    if not _NAME.match(name):
        raise CatalogueError(f"{where}: CPU name {name!r} is not a lowercase label")
    features = frozenset((row.get("features") or "").lower().replace("|", " ").split())
    if not features:
        raise CatalogueError(f"{where}: CPU {name} lists no features")
    text = (row.get("memory_bandwidth_bytes_per_s") or "").strip()
    if not text.isdigit() or int(text) <= 0:
        raise CatalogueError(f"{where}: memory_bandwidth_bytes_per_s {text!r} is not a positive int")
    return HostCPU(name=name, features=features, memory_bandwidth_bytes_per_s=int(text))


def parse_bandwidth(text: str) -> int:
    """A memory bandwidth as people write it: ``200`` or ``200g`` or ``200GB/s`` (GB/s, 10⁹), ``1.2t`` (TB/s).

    Raises:
        ClusterSpecError: the text is not a bandwidth, or not between 1 GB/s and 100 TB/s.
    """
    m = _BANDWIDTH.match(str(text).strip())
    value = float(m["n"]) * (TB if m["u"].lower() == "t" else GB) if m else 0.0
    if not GB <= value <= 100 * TB:
        raise ClusterSpecError(
            f"bw={text!r} is not a memory bandwidth", hint="write GB/s: bw=200, bw=200g or bw=1.2t (TB/s)"
        )
    return int(value)


def with_bandwidth(cpu: HostCPU, bytes_per_s: int) -> HostCPU:
    """The CPU with a bandwidth the user stated (``bw=``)."""
    return replace(cpu, memory_bandwidth_bytes_per_s=bytes_per_s, bandwidth_stated=True)


def cpu_from_label(label: str, table: CPUTable | None = None) -> HostCPU:
    """The CPU a label names: a feature level (``avx2``, ``avx512``, ``amx``) or a CPU of ``table``.

    Raises:
        ClusterSpecError: the label names no CPU explorer knows.
    """
    key = label.strip().lower()
    if key in FEATURE_LEVELS:
        return HostCPU(name=key, features=frozenset(FEATURE_LEVELS[: FEATURE_LEVELS.index(key) + 1]))
    named = table.get(key) if table is not None else None
    if named is not None:
        return named
    near = difflib.get_close_matches(key, table.names, n=4, cutoff=0.6) if table is not None else []
    known = ", ".join(FEATURE_LEVELS) + (", or a CPU of the table (data/cpus.csv)" if table is not None else "")
    raise ClusterSpecError(
        f"cpu={label!r} is not a CPU explorer knows" + (f"; near: {', '.join(near)}" if near else ""),
        hint=f"write one of {known}",
    )
