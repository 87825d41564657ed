"""EDGE: the data shipped in ``data/`` and the user's own tables, read from disk and handed to the core.

The core never opens a file: it takes a :class:`~explorer.hardware.catalogue.Catalogue`,
a :class:`~explorer.hardware.host_cpu.CPUTable`, a :class:`~explorer.speed.prices.PriceTable`
or a cluster dict. This module reads them. The shipped tables are read once per
process (:func:`shipped_catalogue`, :func:`shipped_cpus`, :func:`shipped_prices`:
memos keyed on nothing, since the files inside an installed package do not change
while it runs).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from explorer.datafiles import data_path
from explorer.errors import CatalogueError, ClusterSpecError, ExplorerError
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.cluster import Cluster
from explorer.hardware.cluster_dict import cluster_from_text
from explorer.hardware.cluster_text import parse_cluster_spec
from explorer.hardware.host_cpu import CPUTable
from explorer.sources.regular_file import open_regular_file, read_capped
from explorer.speed.prices import PriceTable, parse_prices
from explorer.speed.published import Measurement, parse_measurements

#: the largest file of the user's read (cluster files, plans, price tables, repo lists are a few kB)
MAX_USER_FILE_BYTES = 16 * 1024 * 1024


def read_user_text(
    path: str | Path, what: str, error: type[ExplorerError], *, head_bytes: int | None = None, lossy: bool = False
) -> str:
    """The UTF-8 text of a file the user named; ``error`` saying what is wrong (missing, a folder, a pipe or a
    device, no permission, too large, not UTF-8) instead of an OSError or a UnicodeDecodeError.

    ``head_bytes``: read only the file's first bytes, however large it is (an engine's log: its start-up
    lines are at the head). ``lossy``: bytes that are not UTF-8 become U+FFFD instead of an error (a log
    holds whatever the programs it ran printed).
    """
    p = Path(path)
    if head_bytes is None:
        data = read_capped(p, MAX_USER_FILE_BYTES, what, error)
    else:
        with open_regular_file(p, what, error) as f:
            try:
                data = f.read(head_bytes)
            except OSError as e:
                raise error(f"cannot read {what} {p}: {e.strerror or e}", hint="check the path") from None
    try:
        return data.decode("utf-8-sig", errors="replace" if lossy else "strict")
    except UnicodeDecodeError as e:
        raise error(f"{what} {p} is not UTF-8 text (byte {e.start:,} is {data[e.start]:#04x})") from None


@cache
def shipped_catalogue() -> Catalogue:
    """The GPU catalogue shipped in ``data/gpus.csv`` (read once)."""
    return read_catalogue(data_path("gpus.csv"))


def read_catalogue(path: str | Path) -> Catalogue:
    """A GPU catalogue table from a file (the columns of ``data/gpus.csv``), each class with the shipped weight
    support rows of its architecture (``data/weight_support.csv``)."""
    return Catalogue.from_csv_text(
        read_user_text(path, "the GPU catalogue", CatalogueError),
        source=str(path),
        weight_support=shipped_weight_support_text(),
    )


@cache
def shipped_weight_support_text() -> str:
    """The text of ``data/weight_support.csv``: what each architecture runs, by engine and weight format."""
    return read_user_text(data_path("weight_support.csv"), "the weight support table", CatalogueError)


@cache
def shipped_cpus() -> CPUTable:
    """The CPU table shipped in ``data/cpus.csv`` (read once)."""
    return read_cpus(data_path("cpus.csv"))


def read_cpus(path: str | Path) -> CPUTable:
    """A CPU table from a file (the columns of ``data/cpus.csv``)."""
    return CPUTable.from_csv_text(read_user_text(path, "the CPU table", CatalogueError), source=str(path))


@cache
def shipped_prices() -> PriceTable:
    """The GPU rental prices shipped in ``data/prices.csv`` (read once)."""
    return read_prices(data_path("prices.csv"))


def read_prices(path: str | Path) -> PriceTable:
    """A price table from a file (the columns of ``data/prices.csv``).

    Raises:
        CatalogueError: the file cannot be read or is malformed.
    """
    return parse_prices(read_user_text(path, "the price table", CatalogueError), source=str(path))


@cache
def published_speeds() -> tuple[Measurement, ...]:
    """The published decode measurements shipped in ``data/published_speeds.csv`` (read once; sources per row)."""
    path = data_path("published_speeds.csv")
    return parse_measurements(read_user_text(path, "the published speeds", CatalogueError), source=str(path))


def parse_cluster(text: str, catalogue: Catalogue | None = None, cpus: CPUTable | None = None) -> Cluster:
    """A cluster from its text form, against ``catalogue`` and ``cpus`` (default: the shipped ones)."""
    return parse_cluster_spec(text, catalogue or shipped_catalogue(), cpus or shipped_cpus())


def load_cluster_file(path: str | Path, catalogue: Catalogue | None = None, cpus: CPUTable | None = None) -> Cluster:
    """A cluster from a JSON or TOML file (layout in docs/cluster_spec.md).

    Raises:
        ClusterSpecError: the file cannot be read or parsed, or describes an impossible cluster.
    """
    text = read_user_text(path, "cluster file", ClusterSpecError)
    return cluster_from_text(
        text,
        catalogue or shipped_catalogue(),
        source=str(path),
        toml_first=str(path).lower().endswith(".toml"),
        cpus=cpus or shipped_cpus(),
    )
