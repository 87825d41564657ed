"""The cluster model: nodes, their GPUs by class, and how nodes may be spanned.

A cluster is written as text or as a file. The text grammar (full reference
with examples in ``docs/cluster_spec.md``)::

    spec    := term ( "+" term )*                  spaces around "+" allowed
    term    := NODES "x" body [ "@" FABRIC ] ( "," option )*
    body    := GPUS "x" CLASS                      2x8xh100-80g, 1x7xa100-80g-mig-1g.10gb, 1x1xh100:81559MiB
             | "cpu-" RAM                          1xcpu-256g: no GPUs, 256 GiB of RAM
             | "uma-" RAM                          1xuma-128g: unified memory (a Mac), 128 GiB
    option  := "ram=" RAM                          host RAM of each GPU node
             | "free=" INT                         free GPUs per node (0..GPUS)
             | "free=" FRACTION | "free=" SIZE    free memory of each card (0.75, 60GiB)
    RAM     := number "g" (GiB) | number "t" (TiB) | a size with a unit (512GiB, 500GB)
    FABRIC  := [A-Za-z0-9_.-]+                     nodes sharing a fabric may be spanned

CLASS is anything :meth:`explorer.catalogue.Catalogue.resolve` accepts. Nodes
without ``@FABRIC`` stand alone: a replica never spans them. A GPU node's
host RAM, when not stated, is assumed to be max(64 GiB, 2 × its GPU memory)
(``host_ram_assumed``). A unified host is one "GPU" of class ``uma-RAMg`` (or
an Apple class) whose memory is the RAM; the GPU may use only Metal's working
set of it (:attr:`Node.gpu_usable_limit_bytes`). Every malformed spec raises
:class:`ClusterSpecError` naming the term, never another exception.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import NoReturn

from explorer.catalogue import GPUClass, load_catalogue, metal_working_set_bytes
from explorer.errors import ClusterSpecError, capped_list
from explorer.units import GiB, TiB, parse_size

MAX_GPUS = 100_000  # a whole cluster, GPUs and nodes each
MAX_RAM_BYTES = 1024 * TiB
GRAMMAR = (
    "grammar: NODESxGPUSxCLASS[@FABRIC][,ram=RAM][,free=N|FRACTION|SIZE] joined by '+', "
    "or NODESxcpu-RAM / NODESxuma-RAM; e.g. 2x8xh100-80g@ib0 + 1x4xl40s-48g,free=2 + 1xcpu-256g"
)


def default_host_ram_bytes(gpu_memory_bytes: int) -> int:
    """Host RAM assumed for a GPU node that does not state it: max(64 GiB, 2 × its GPU memory).

    Twice the GPU memory is what a server vendor fits to stage weights through
    RAM (an 8 × H100 node: 1,274 GiB assumed, 2 TiB typical); the 1 PiB cap only
    keeps absurd nodes representable.
    """
    return min(max(64 * GiB, 2 * gpu_memory_bytes), MAX_RAM_BYTES)


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUGroup:
    """A node's devices of one class.

    Attributes:
        gpu: the class of every device in the group (a MIG slice is a class of its own).
        count: devices in the group.
        free_count: devices no workload holds now.
        free_bytes: free bytes per card when known (the least of ``card_free_bytes`` when those are given).
        card_free_bytes: free bytes of each card, when known one by one; else empty.
    """

    gpu: GPUClass
    count: int
    free_count: int
    free_bytes: int | None = None
    card_free_bytes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        name = self.gpu.name
        if self.count < 1 or not 0 <= self.free_count <= self.count:
            raise ClusterSpecError(f"{name}: {self.count} GPUs with {self.free_count} free is impossible",
                                   hint="count >= 1 and 0 <= free <= count")  # fmt: skip
        if self.card_free_bytes and len(self.card_free_bytes) != self.count:
            raise ClusterSpecError(f"{name}: {len(self.card_free_bytes)} per-card free figures for {self.count} cards")
        for free in (self.free_bytes, *self.card_free_bytes):
            if free is not None and not 0 <= free <= self.gpu.memory_bytes:
                raise ClusterSpecError(f"{name}: {free:,} bytes free on a card of {self.gpu.memory_bytes:,} bytes")

    @property
    def memory_bytes(self) -> int:
        """Total memory of the group's devices."""
        return self.count * self.gpu.memory_bytes

    @property
    def max_replica_width(self) -> int:
        """Most devices of this group one replica may use: 1 for MIG slices, else all."""
        return 1 if self.gpu.is_mig else self.count

    def free_bytes_for(self, width: int) -> int:
        """Free bytes per card a replica on ``width`` of these cards can count on (0 if it cannot have them).

        With per-card figures it is the ``width``-th largest; else ``free_bytes``,
        or the whole card when nothing is known of its use.
        """
        if not 1 <= width <= self.count:
            return 0
        if self.card_free_bytes:
            return sorted(self.card_free_bytes, reverse=True)[width - 1]
        return self.gpu.memory_bytes if self.free_bytes is None else self.free_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One machine.

    Attributes:
        name: unique in the cluster: ``h100-80g@ib0#1``.
        fabric: the network it shares with nodes a replica may span; None stands alone.
        gpus: its devices by class; empty for a CPU-only node.
        host_ram_bytes: its RAM (for a unified host, the memory the GPU shares).
        host_free_bytes: RAM no workload holds now.
        unified: GPU memory is the host RAM (Apple M-series and other UMA hosts).
        host_ram_assumed: the RAM was not stated but set by :func:`default_host_ram_bytes`.
    """

    name: str
    fabric: str | None = None
    gpus: tuple[GPUGroup, ...] = ()
    host_ram_bytes: int
    host_free_bytes: int
    unified: bool = False
    host_ram_assumed: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.host_ram_bytes <= MAX_RAM_BYTES or not 0 <= self.host_free_bytes <= self.host_ram_bytes:
            raise ClusterSpecError(f"node {self.name}: host RAM {self.host_ram_bytes:,} bytes with "
                                   f"{self.host_free_bytes:,} free is impossible")  # fmt: skip
        if len({g.gpu.name for g in self.gpus}) != len(self.gpus):
            raise ClusterSpecError(f"node {self.name}: a GPU class appears twice; give one group per class")

    @property
    def gpu_count(self) -> int:
        """Devices on the node, all classes."""
        return sum(g.count for g in self.gpus)

    @property
    def free_gpu_count(self) -> int:
        """Devices no workload holds now."""
        return sum(g.free_count for g in self.gpus)

    @property
    def is_cpu_only(self) -> bool:
        """True for a node without GPUs."""
        return not self.gpus

    @property
    def gpu_memory_bytes(self) -> int:
        """Total device memory on the node."""
        return sum(g.memory_bytes for g in self.gpus)

    @property
    def gpu_usable_limit_bytes(self) -> int:
        """Device memory a GPU workload may use in all: the Metal working set of a unified host's RAM
        (:func:`explorer.catalogue.metal_working_set_bytes`), else every card's memory."""
        if self.unified:
            return metal_working_set_bytes(self.host_ram_bytes)
        return self.gpu_memory_bytes

    def group(self, class_name: str) -> GPUGroup | None:
        """The node's devices of one class, or None."""
        return next((g for g in self.gpus if g.gpu.name == class_name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """All the nodes a plan may use.

    Attributes:
        nodes: every node, names unique.
    """

    nodes: tuple[Node, ...]

    def __post_init__(self) -> None:
        dupes = sorted(name for name, k in Counter(n.name for n in self.nodes).items() if k > 1)
        if dupes:
            raise ClusterSpecError(f"node names repeat: {capped_list(dupes)}", hint="name every node once")
        if self.total_gpus > MAX_GPUS or len(self.nodes) > MAX_GPUS:
            raise ClusterSpecError(f"{self.total_gpus:,} GPUs on {len(self.nodes):,} nodes is beyond "
                                   f"the {MAX_GPUS:,} explorer plans for")  # fmt: skip

    @property
    def total_gpus(self) -> int:
        """Devices in the cluster (a MIG slice and a unified host each count as one)."""
        return sum(n.gpu_count for n in self.nodes)

    @property
    def free_gpus(self) -> int:
        """Devices no workload holds now."""
        return sum(n.free_gpu_count for n in self.nodes)

    @property
    def gpu_classes(self) -> tuple[GPUClass, ...]:
        """The classes present, in order of first appearance."""
        seen: dict[str, GPUClass] = {}
        for n in self.nodes:
            for g in n.gpus:
                seen.setdefault(g.gpu.name, g.gpu)
        return tuple(seen.values())

    @property
    def gpu_nodes(self) -> tuple[Node, ...]:
        """Nodes with at least one device."""
        return tuple(n for n in self.nodes if n.gpus)

    @property
    def cpu_nodes(self) -> tuple[Node, ...]:
        """Nodes without GPUs."""
        return tuple(n for n in self.nodes if n.is_cpu_only)

    @property
    def unified_nodes(self) -> tuple[Node, ...]:
        """Hosts whose GPU memory is their RAM."""
        return tuple(n for n in self.nodes if n.unified)

    def node(self, name: str) -> Node | None:
        """The node of this name, or None."""
        return next((n for n in self.nodes if n.name == name), None)

    def nodes_with(self, class_name: str) -> tuple[Node, ...]:
        """Nodes holding devices of a class."""
        return tuple(n for n in self.nodes if n.group(class_name) is not None)

    def pools(self) -> dict[tuple[str, str | None], tuple[Node, ...]]:
        """Nodes per (class name, fabric), in order of appearance; fabric None gathers nodes that stand alone."""
        out: dict[tuple[str, str | None], list[Node]] = {}
        for n in self.nodes:
            for g in n.gpus:
                out.setdefault((g.gpu.name, n.fabric), []).append(n)
        return {k: tuple(v) for k, v in out.items()}

    def span_groups(self, class_name: str) -> tuple[tuple[Node, ...], ...]:
        """Sets of nodes one replica of a class may span: a fabric's nodes together, a fabric-less node alone.

        MIG slices never span: each of their nodes is a set of its own.
        """
        out: list[tuple[Node, ...]] = []
        for (cls, fabric), nodes in self.pools().items():
            if cls != class_name:
                continue
            if fabric is None or nodes[0].group(cls).gpu.is_mig:  # type: ignore[union-attr]
                out.extend((n,) for n in nodes)
            else:
                out.append(nodes)
        return tuple(out)


# --- the text form ------------------------------------------------------------------

_SPLIT = re.compile(r"\s*\+(?!\s*[A-Za-z])\s*", re.A)  # "+me" in a MIG profile does not split
_TERM = re.compile(
    r"^(?P<nodes>\d{1,9})\s*[x×]\s*(?P<body>[^@,]*?)\s*(?:@(?P<fabric>[^,]*?))?\s*(?P<opts>,.*)?$", re.I | re.A
)
_GPUS = re.compile(r"^(?P<gpus>\d{1,9})\s*[x×]\s*(?P<cls>\S.*)$", re.I | re.A)
_HOST = re.compile(r"^(?P<kind>cpu|uma)-(?P<ram>\S+)$", re.I | re.A)
_FABRIC = re.compile(r"^[A-Za-z0-9_.-]+$", re.A)
_FRACTION = re.compile(r"^[01]?\.\d{1,9}$", re.A)
_RAM = re.compile(r"^(?P<n>\d{1,9}(?:\.\d{1,6})?)\s*(?P<u>[gt])$", re.I | re.A)


def _size(text: str) -> int | None:
    """RAM or a free size: ``256g`` (GiB), ``2t`` (TiB) or a size with a unit; None when it is none."""
    m = _RAM.match(text.strip())
    try:
        n = int(Fraction(m["n"]) * (GiB if m["u"].lower() == "g" else TiB)) if m else parse_size(text)
    except (ValueError, OverflowError):
        return None
    return n if 0 < n <= MAX_RAM_BYTES else None


def _ram_text(n: int) -> str:
    return f"{n // GiB}g" if n % GiB == 0 else f"{n}B"


def _free_text(free: int, whole: int) -> str:
    for digits in range(1, 7):
        text = f"{free / whole:.{digits}f}"
        if Fraction(text) <= 1 and int(whole * Fraction(text)) == free:
            return text
    return f"{free}B"


def parse_cluster_spec(text: str) -> Cluster:
    """Parse the text form (grammar in the module docstring) into a cluster.

    Raises:
        ClusterSpecError: the text is not a valid spec; the message names the bad term.
    """
    if not isinstance(text, str) or not text.strip():
        raise ClusterSpecError("empty cluster spec", hint=GRAMMAR)
    counters: dict[str, int] = {"#gpus": 0, "#nodes": 0}
    nodes: list[Node] = []
    for index, term in enumerate(_SPLIT.split(text.strip())):
        nodes.extend(_parse_term(term, index, counters))
    return Cluster(nodes=tuple(nodes))


def _parse_term(term: str, index: int, counters: dict[str, int]) -> list[Node]:
    def fail(problem: str, cls: type[ClusterSpecError] = ClusterSpecError) -> NoReturn:
        raise cls(f"cluster spec term {index + 1} {term!r}: {problem}", hint=GRAMMAR)

    m = _TERM.match(term)
    if not term:
        fail("empty term (two '+' in a row, or one at an end)")
    if m is None:
        fail("must start with the node count and 'x', as in 2x8xh100-80g" if re.match(r"^\d", term)
             else "must start with the node count, as in 2x8xh100-80g")  # fmt: skip
    assert m is not None
    count, fabric, body = int(m["nodes"]), m["fabric"], m["body"]
    if count < 1:
        fail("the node count must be at least 1")
    if fabric is not None and not _FABRIC.match(fabric):
        fail(f"fabric {fabric!r} must be letters, digits, '_', '.' or '-'")
    ram, free_n, free_mem = None, None, None
    for opt in (m["opts"] or "").split(",")[1:]:
        key, _, value = (part.strip() for part in opt.partition("="))
        if key.lower() not in ("ram", "free") or not value:
            fail(f"option {opt.strip()!r} is not ram=RAM or free=N|FRACTION|SIZE")
        if key.lower() == "ram":
            if ram is not None or (ram := _size(value)) is None:
                fail(f"ram={value} is not a size (write 512g, 2t or 512GiB), or ram= is given twice")
        elif re.fullmatch(r"\d+", value, re.A):
            if free_n is not None or len(value) > 9:
                fail(f"free={value}: one free GPU count per term, at most 9 digits")
            free_n = int(value)
        elif free_mem is not None:
            fail("free memory is given twice")
        elif _FRACTION.match(value):
            if (free_mem := Fraction(value)) > 1:
                fail(f"free={value}: a fraction of each card's memory is at most 1.0")
        elif (free_mem := _size(value)) is None:
            fail(f"free={value} is not a GPU count, a fraction (0.75) or a size (60GiB)")
    host = _HOST.match(body)
    gpus_m = None if host else _GPUS.match(body)
    if host is None and gpus_m is None:
        fail("missing 'x' between the GPU count and the class" if re.match(r"\d+[^\dx×]", body, re.I | re.A)
             else "after the node count comes GPUSxCLASS, cpu-RAM or uma-RAM" if body
             else "no GPUs or class after 'x'")  # fmt: skip
    gpus = 1 if host else int(gpus_m["gpus"])  # type: ignore[index]
    if gpus < 1:
        fail("the GPU count must be at least 1 (write NODESxcpu-RAM for nodes without GPUs)")
    counters["#nodes"] += count
    counters["#gpus"] += 0 if host and host["kind"].lower() == "cpu" else count * gpus
    if counters["#gpus"] > MAX_GPUS or counters["#nodes"] > MAX_GPUS:
        fail(f"more than {MAX_GPUS:,} GPUs or nodes in all; that is not a cluster explorer plans for")
    gpu: GPUClass | None = None
    if host:
        if (host_ram := _size(host["ram"])) is None:
            fail(f"{host['ram']!r} is not a RAM size (write 256g, 2t or 256GiB)")
        if ram is not None:
            fail(f"a {host['kind'].lower()} term states its RAM in the term, not with ram=")
        label = f"{host['kind'].lower()}-{_ram_text(host_ram)}"
        if host["kind"].lower() == "uma":
            gpu = load_catalogue().resolve(label if host_ram % GiB == 0 else f"uma:{host_ram}B")
    else:
        try:
            gpu = load_catalogue().resolve(gpus_m["cls"])  # type: ignore[index]
        except ClusterSpecError as e:
            fail(e.message, type(e))
        assert gpu is not None
        label, host_ram = gpu.name, ram
        if gpu.unified:
            if gpus != 1 or ram is not None:
                fail(f"{gpu.name} is unified memory: one device per node, its RAM is the class's memory")
            host_ram = gpu.memory_bytes
    if gpu is None and free_n is not None:
        fail(f"free={free_n} counts free GPUs, and a cpu node has none (use free=0.5 for free RAM)")
    if free_n is not None and free_n > gpus:
        fail(f"free={free_n} but each node has {gpus} GPU{'s' if gpus > 1 else ''}")
    whole = gpu.memory_bytes if gpu is not None else host_ram
    free_bytes = int(whole * free_mem) if isinstance(free_mem, Fraction) else free_mem  # type: ignore[operator]
    if free_bytes is not None and free_bytes > whole:  # type: ignore[operator]
        fail(f"free={free_bytes:,} bytes is more than the {whole:,} bytes there are")
    groups: tuple[GPUGroup, ...] = ()
    if gpu is not None:
        groups = (GPUGroup(gpu=gpu, count=gpus, free_count=gpus if free_n is None else free_n, free_bytes=free_bytes),)
    assumed = host_ram is None
    if host_ram is None:
        host_ram = default_host_ram_bytes(gpus * gpu.memory_bytes)  # type: ignore[union-attr]
    host_free = host_ram
    if gpu is None or gpu.unified:
        host_free = host_ram if free_bytes is None else free_bytes
    base = f"{label}@{fabric}" if fabric else label
    first = counters.get(base, 0)
    counters[base] = first + count
    return [Node(name=f"{base}#{first + i}", fabric=fabric, gpus=groups, host_ram_bytes=host_ram,
                 host_free_bytes=host_free, unified=bool(gpu and gpu.unified), host_ram_assumed=assumed)
            for i in range(count)]  # fmt: skip


def format_cluster_spec(cluster: Cluster) -> str:
    """The text form of a cluster; consecutive alike nodes become one term.

    It drops what the text cannot carry: node names, per-card free figures
    (the least free card is written), a GPU node's free host RAM.

    Raises:
        ClusterSpecError: a node has devices of several classes (use the file form).
    """
    terms: list[list] = []
    for n in cluster.nodes:
        if len(n.gpus) > 1:
            raise ClusterSpecError(f"node {n.name} has several GPU classes; the text form cannot say that",
                                   hint="use a JSON or TOML cluster file")  # fmt: skip
        opts = []
        if not n.gpus:
            body = f"cpu-{_ram_text(n.host_ram_bytes)}"
            if n.host_free_bytes != n.host_ram_bytes:
                opts.append(f"free={_free_text(n.host_free_bytes, n.host_ram_bytes)}")
        else:
            g = n.gpus[0]
            uma = n.unified and g.gpu.name.startswith("uma")
            body = f"uma-{_ram_text(n.host_ram_bytes)}" if uma else f"{g.count}x{g.gpu.name}"
            if not (n.host_ram_assumed or n.unified):
                opts.append(f"ram={_ram_text(n.host_ram_bytes)}")
            if g.free_count != g.count:
                opts.append(f"free={g.free_count}")
            if g.free_bytes is not None:
                opts.append(f"free={_free_text(g.free_bytes, g.gpu.memory_bytes)}")
        text = body + (f"@{n.fabric}" if n.fabric else "") + "".join("," + o for o in opts)
        if terms and terms[-1][1] == text:
            terms[-1][0] += 1
        else:
            terms.append([1, text])
    return " + ".join(f"{k}x{text}" for k, text in terms)


# --- the file form ----------------------------------------------------------------

_NODE_KEYS = {"name", "fabric", "host_ram", "host_ram_bytes", "host_free", "host_free_bytes", "unified", "gpus"}
_GROUP_KEYS = {"class", "count", "free_count", "free_bytes", "card_free_bytes"}


def load_cluster_file(path: str | Path) -> Cluster:
    """Read a cluster from a JSON or TOML file (layout in docs/cluster_spec.md).

    Raises:
        ClusterSpecError: the file cannot be read or parsed, or describes an impossible cluster.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ClusterSpecError(f"cannot read cluster file {path}: {e}") from None
    toml_first = path.suffix.lower() == ".toml"
    errors = []
    for kind in ("toml", "json") if toml_first else ("json", "toml"):
        try:
            data = tomllib.loads(text) if kind == "toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError) as e:
            errors.append(f"{kind}: {e}")
            continue
        return cluster_from_dict(data, where=str(path))
    raise ClusterSpecError(f"cluster file {path} is neither JSON nor TOML ({errors[0]})")


def cluster_from_dict(data: object, *, where: str = "cluster") -> Cluster:
    """Build a cluster from parsed JSON/TOML: ``{"nodes": [{"name", "fabric", "host_ram", ..., "gpus": [...]}]}``.

    Sizes are ints (bytes) or text with a unit (``"512GiB"``, ``"512g"``).

    Raises:
        ClusterSpecError: a key is unknown, a value has the wrong type, or the cluster is impossible.
    """
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise ClusterSpecError(f"{where}: needs a non-empty list 'nodes'", hint="see docs/cluster_spec.md")
    extra = set(data) - {"nodes", "name", "description"}
    if extra:
        raise ClusterSpecError(f"{where}: unknown keys {', '.join(sorted(map(str, extra)))}")
    if len(data["nodes"]) > MAX_GPUS:
        raise ClusterSpecError(f"{where}: {len(data['nodes']):,} nodes is beyond the {MAX_GPUS:,} explorer plans for")
    return Cluster(nodes=tuple(_node_from_dict(d, f"{where}: nodes[{i}]", i) for i, d in enumerate(data["nodes"])))


def _check_keys(d: object, allowed: set[str], at: str) -> dict:
    if not isinstance(d, dict):
        raise ClusterSpecError(f"{at}: expected a table/object, got {type(d).__name__}")
    extra = set(d) - allowed
    if extra:
        raise ClusterSpecError(f"{at}: unknown keys {', '.join(sorted(map(str, extra)))}",
                               hint=f"allowed: {', '.join(sorted(allowed))}")  # fmt: skip
    return d


def _size_key(d: dict, key: str, at: str) -> int | None:
    if key in d and f"{key}_bytes" in d:
        raise ClusterSpecError(f"{at}: give {key} or {key}_bytes, not both")
    value = d.get(key, d.get(f"{key}_bytes"))
    return None if value is None else _size_value(value, f"{at}: {key}")


def _size_value(value: object, at: str) -> int:
    n = _size(value) if isinstance(value, str) else value if type(value) is int else None
    if n is None or not 0 <= n <= MAX_RAM_BYTES:
        raise ClusterSpecError(f"{at}: {value!r} is not a size (bytes, or text such as '512GiB' or '512g')")
    return n


def _count(value: object, at: str, *, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_GPUS:
        raise ClusterSpecError(f"{at}: {value!r} is not a count from {low} to {MAX_GPUS:,}")
    return value


def _node_from_dict(raw: object, at: str, index: int) -> Node:
    d = _check_keys(raw, _NODE_KEYS, at)
    name, fabric, unified = d.get("name", f"node{index}"), d.get("fabric"), d.get("unified", False)
    if not isinstance(name, str) or not name.strip():
        raise ClusterSpecError(f"{at}: name {name!r} is not a non-empty string")
    if fabric is not None and (not isinstance(fabric, str) or not _FABRIC.match(fabric)):
        raise ClusterSpecError(f"{at}: fabric {fabric!r} must be letters, digits, '_', '.' or '-'")
    if not isinstance(unified, bool):
        raise ClusterSpecError(f"{at}: unified {unified!r} is not true or false")
    ram, free = _size_key(d, "host_ram", at), _size_key(d, "host_free", at)
    raw_groups = d.get("gpus", [])
    if not isinstance(raw_groups, list):
        raise ClusterSpecError(f"{at}: gpus must be a list of groups")
    groups = tuple(_group_from_dict(g, f"{at}.gpus[{j}]") for j, g in enumerate(raw_groups))
    unified = unified or any(g.gpu.unified for g in groups)
    if unified and not groups:
        if ram is None:
            raise ClusterSpecError(f"{at}: a unified node needs host_ram (its GPU shares it)")
        uma = load_catalogue().resolve(f"uma-{ram // GiB}g" if ram % GiB == 0 else f"uma:{ram}B")
        groups = (GPUGroup(gpu=uma, count=1, free_count=1),)
    if unified and ram is None:
        ram = groups[0].gpu.memory_bytes
    if ram is None and not groups:
        raise ClusterSpecError(f"{at}: a node without GPUs needs host_ram")
    assumed = ram is None
    ram = default_host_ram_bytes(sum(g.memory_bytes for g in groups)) if ram is None else ram
    try:
        return Node(name=name, fabric=fabric, gpus=groups, host_ram_bytes=ram,
                    host_free_bytes=ram if free is None else free, unified=unified, host_ram_assumed=assumed)  # fmt: skip
    except ClusterSpecError as e:
        raise ClusterSpecError(f"{at}: {e.message}", hint=e.hint or None) from None


def _group_from_dict(raw: object, at: str) -> GPUGroup:
    d = _check_keys(raw, _GROUP_KEYS, at)
    label = d.get("class")
    if not isinstance(label, str):
        raise ClusterSpecError(f"{at}: 'class' must name a GPU class, as in \"h100-80g\"")
    try:
        gpu = load_catalogue().resolve(label)
    except ClusterSpecError as e:
        raise type(e)(f"{at}: {e.message}", hint=e.hint or None) from None
    count = _count(d.get("count", 1), f"{at}: count", low=1)
    cards = d.get("card_free_bytes", [])
    if not isinstance(cards, list):
        raise ClusterSpecError(f"{at}: card_free_bytes must be a list, one size per card")
    card_free = tuple(_size_value(v, f"{at}: card_free_bytes[{k}]") for k, v in enumerate(cards))
    free_bytes = None if d.get("free_bytes") is None else _size_value(d["free_bytes"], f"{at}: free_bytes")
    if free_bytes is None and card_free:
        free_bytes = min(card_free)
    try:
        free_count = _count(d.get("free_count", count), f"{at}: free_count", low=0)
        return GPUGroup(gpu=gpu, count=count, free_count=free_count, free_bytes=free_bytes, card_free_bytes=card_free)
    except ClusterSpecError as e:
        raise ClusterSpecError(f"{at}: {e.message}", hint=e.hint or None) from None
