"""The app's cluster controls and the typed spec as one source of truth.

The spec text is the state. The simple controls (nodes, GPUs per node, GPU
class, fabric, free share of each card, host RAM) *show* its first GPU term
(:func:`first_gpu_term`) and, when moved, *edit only that part of that term*
(:func:`edit_first_gpu_term`): every other term, option and space the user typed
stays as typed. So ``1x4xl40s-48g`` with Nodes set to 2 becomes
``2x4xl40s-48g``, never a preset's spec. :func:`describe_cluster` says what
the parsed cluster is, host RAM marked *assumed* where the spec does not state
it. Pure text and records: no marimo.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

from explorer.hardware.cluster import Cluster, Node
from explorer.hardware.cluster_dict import cluster_data_from_text
from explorer.hardware.cluster_text import ram_bytes, split_terms
from explorer.units import GiB

__all__ = [
    "GPUS_PER_NODE_RANGE",
    "NODE_RANGE",
    "GpuTerm",
    "cluster_file_json",
    "controls_refusal",
    "describe_cluster",
    "edit_first_gpu_term",
    "first_gpu_term",
    "host_ram_note",
]

_GPU_TERM = re.compile(
    r"^(?P<nodes>\d{1,9})(?P<x1>\s*[xX×]\s*)(?P<gpus>\d{1,9})(?P<x2>\s*[xX×]\s*)(?P<cls>[^@,\s][^@,]*?)"
    r"(?:\s*@(?P<fabric>[^,]*?))?\s*(?P<opts>,.*)?$",
    re.A,
)
_FREE_FRACTION = re.compile(r"^\s*free\s*=\s*[01]?\.\d+\s*$", re.I | re.A)
_RAM = re.compile(r"^\s*ram\s*=\s*(?P<value>\S+)\s*$", re.I | re.A)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuTerm:
    """What the simple controls show: the spec's first ``NODESxGPUSxCLASS`` term.

    Attributes:
        index: its position among the spec's terms (0 first).
        nodes: the node count.
        gpus_per_node: GPUs on each node.
        gpu_class: the class as typed.
        fabric: the fabric as typed, None without one.
        free_fraction: the free share of each card's memory (1.0 when no ``free=0.x`` is given).
        ram_gib: host RAM a node in whole GiB when ``ram=`` is given, else None (assumed).
        ram_text: the ``ram=`` value as typed, None when not given.
    """

    index: int
    nodes: int
    gpus_per_node: int
    gpu_class: str
    fabric: str | None
    free_fraction: float
    ram_gib: int | None
    ram_text: str | None


def _options(opts: str | None) -> list[str]:
    return [o.strip() for o in (opts or "").split(",")[1:]]


def first_gpu_term(spec: str) -> GpuTerm | None:
    """The spec's first GPU term as the controls show it, or None when it has none."""
    for index, term in enumerate(split_terms(spec)):
        m = _GPU_TERM.match(term)
        if m is None:
            continue
        free, ram = 1.0, None
        for opt in _options(m["opts"]):
            if _FREE_FRACTION.match(opt):
                free = float(opt.split("=", 1)[1])
            elif r := _RAM.match(opt):
                ram = r["value"]
        ram_size = ram_bytes(ram) if ram else None
        return GpuTerm(
            index=index,
            nodes=int(m["nodes"]),
            gpus_per_node=int(m["gpus"]),
            gpu_class=m["cls"].strip(),
            fabric=m["fabric"].strip() if m["fabric"] else None,
            free_fraction=free,
            ram_gib=ram_size // GiB if ram_size else None,
            ram_text=ram,
        )
    return None


#: the counts the simple controls can show (inclusive): a term outside them is edited as text only
NODE_RANGE = (1, 100_000)
GPUS_PER_NODE_RANGE = (1, 4096)


def controls_refusal(term: GpuTerm) -> str | None:
    """Why the simple controls cannot show ``term`` (a count outside :data:`NODE_RANGE` or
    :data:`GPUS_PER_NODE_RANGE`, as a ``?cluster=`` link may carry), or None when they can.

    Issue 25: a control built with a value past its range raised, and the whole cluster sidebar vanished.
    """
    for what, value, (low, high) in (
        ("node count", term.nodes, NODE_RANGE),
        ("GPUs a node", term.gpus_per_node, GPUS_PER_NODE_RANGE),
    ):
        if not low <= value <= high:
            return (
                f"The spec's {what} is {value:,}; the controls show {low:,} to {high:,}. "
                "Edit the spec text above (or pick a preset)."
            )
    return None


_UNSET = object()


def edit_first_gpu_term(
    spec: str,
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    gpu_class: str | None = None,
    fabric: object = _UNSET,
    free_fraction: float | None = None,
    ram_gib: object = _UNSET,
) -> str:
    """The spec with only the given parts of its first GPU term changed; the rest stays as typed.

    ``fabric``: a name, or None/"" to drop it. ``free_fraction``: 1.0 drops the
    ``free=0.x`` option. ``ram_gib``: GiB a node, or None to drop ``ram=``
    (the RAM is then assumed). A spec without a GPU term gets one in front.
    """
    terms = split_terms(spec) if spec.strip() else []
    term = first_gpu_term(spec)
    if term is None:
        new = f"{nodes or 1}x{gpus_per_node or 1}x{gpu_class or 'h100-80g'}"
        return " + ".join([new, *terms])
    m = _GPU_TERM.match(terms[term.index])
    assert m is not None  # first_gpu_term matched it
    head = (
        f"{m['nodes'] if nodes is None else int(nodes)}{m['x1']}"
        f"{m['gpus'] if gpus_per_node is None else int(gpus_per_node)}{m['x2']}"
        f"{m['cls'].strip() if gpu_class is None else gpu_class.strip()}"
    )
    fab = term.fabric if fabric is _UNSET else (str(fabric).strip() or None if fabric is not None else None)
    if fab:
        head += f"@{fab}"
    opts = _options(m["opts"])
    if free_fraction is not None:
        opts = [o for o in opts if not _FREE_FRACTION.match(o)]
        if float(free_fraction) < 1:
            opts.append(f"free={max(0.0, float(free_fraction)):.2f}")
    if ram_gib is not _UNSET:
        opts = [o for o in opts if not _RAM.match(o)]
        if ram_gib:
            opts.append(f"ram={int(ram_gib)}g")  # type: ignore[call-overload]
    terms[term.index] = head + "".join("," + o for o in opts)
    return " + ".join(terms)


def _node_kind(node: Node) -> str:
    if node.unified:
        return f"a unified-memory host ({node.host_ram_bytes / GiB:,.0f} GiB shared)"
    if node.is_cpu_only:
        return f"a CPU server ({node.host_ram_bytes / GiB:,.0f} GiB RAM)"
    groups = " + ".join(
        f"{g.count} × {g.gpu.name} ({g.gpu.memory_bytes / GiB:,.1f} GiB)"
        + (f", {g.free_count} free" if g.free_count != g.count else "")
        for g in node.gpus
    )
    return groups + (f" on {node.fabric}" if node.fabric else "")


def describe_cluster(cluster: Cluster) -> list[str]:
    """One line per kind of node, computed from the parsed cluster: ``2 nodes: 8 × h100-80g (79.6 GiB) on ib0``."""
    kinds = Counter(_node_kind(n) for n in cluster.nodes)
    lines = [f"{n} node{'s' if n > 1 else ''}: {kind}" for kind, n in kinds.items()]
    cards = [n for n in cluster.nodes if n.gpus and not n.unified]
    if cards:
        count, total = sum(n.gpu_count for n in cards), sum(n.gpu_memory_bytes for n in cards)
        lines.append(f"{count:,} GPU{'s' if count > 1 else ''}, {total / GiB:,.1f} GiB of GPU memory in all")
    return lines


def host_ram_note(cluster: Cluster) -> str | None:
    """Host RAM a GPU node has, and whether the spec states it or it is *assumed*; None without GPU nodes."""
    nodes = [n for n in cluster.nodes if n.gpus and not n.unified]
    if not nodes:
        return None
    assumed = [n for n in nodes if n.host_ram_assumed]
    ram = sorted({n.host_ram_bytes // GiB for n in nodes})
    figures = " / ".join(f"{r:,} GiB" for r in ram)
    if len(assumed) == len(nodes):
        return f"host RAM assumed: {figures} a node (max(64 GiB, 2 × its GPU memory)); set it with RAM below or ram="
    if assumed:
        return f"host RAM {figures} a node; assumed on {len(assumed)} of {len(nodes)} GPU nodes"
    return f"host RAM {figures} a node, as given"


def cluster_file_json(text: str, name: str) -> str:
    """A cluster file's JSON or TOML text as compact JSON: the form the app's URL carries.

    Raises:
        ClusterSpecError: the text is neither JSON nor TOML.
    """
    data = cluster_data_from_text(text, source=name, toml_first=name.lower().endswith(".toml"))
    return json.dumps(data, separators=(",", ":"), default=str)
