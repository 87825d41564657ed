"""The cluster's text form: ``2x8xh100-80g@ib0 + 1x4xl40s-48g``.

Grammar (the full reference, with examples, is ``docs/cluster_spec.md``)::

    spec    := term ( "+" term )*                  spaces around "+" allowed
    term    := NODES "x" body [ "@" FABRIC ] ( "," option )*
    body    := GPUS "x" CLASS | "cpu-" RAM | "uma-" RAM
    option  := "ram=" RAM | "free=" INT | "free=" FRACTION | "free=" SIZE | "cpu=" CPU | "bw=" BANDWIDTH

CPU is a feature level (avx2, avx512, amx) or a CPU of the CPU table handed
in (``cpu=epyc-9654``); BANDWIDTH is the host's memory bandwidth in GB/s
(``bw=200``, ``bw=1.2t`` for TB/s), overriding the table's.

Every malformed spec raises :class:`ClusterSpecError` naming the term.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NoReturn

from explorer.errors import ClusterSpecError
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.hardware.cluster import GRAMMAR, MAX_GPUS, MAX_RAM_BYTES, Cluster, GPUGroup, Node, default_host_ram_bytes
from explorer.hardware.host_cpu import DEFAULT_CPU, CPUTable, cpu_from_label, parse_bandwidth, with_bandwidth
from explorer.units import GiB, TiB, parse_size

_SPLIT = re.compile(r"\s*\+(?!\s*[A-Za-z])\s*", re.A)  # "+me" in a MIG profile does not split
_TERM = re.compile(
    r"^(?P<nodes>\d{1,9})\s*[x×]\s*(?P<body>[^@,]*?)\s*(?:@(?P<fabric>[^,]*?))?\s*(?P<opts>,.*)?$", re.I | re.A
)
_GPUS = re.compile(r"^(?P<gpus>\d{1,9})\s*[x×]\s*(?P<cls>\S.*)$", re.I | re.A)
_HOST = re.compile(r"^(?P<kind>cpu|uma)-(?P<ram>\S+)$", re.I | re.A)
FABRIC_NAME = re.compile(r"^[A-Za-z0-9_.-]+$", re.A)
_FRACTION = re.compile(r"^[01]?\.\d{1,9}$", re.A)
_RAM = re.compile(r"^(?P<n>\d{1,9}(?:\.\d{1,6})?)\s*(?P<u>[gt])$", re.I | re.A)


def ram_bytes(text: str) -> int | None:
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


def split_terms(text: str) -> list[str]:
    """The terms of a spec as written (``"2x8xh100-80g@ib0 + 1xcpu-256g"`` -> two terms); a MIG ``+me`` stays whole."""
    return _SPLIT.split(text.strip())


def parse_cluster_spec(text: str, catalogue: Catalogue, cpus: CPUTable | None = None) -> Cluster:
    """Parse the text form (grammar in the module docstring) into a cluster, with classes from ``catalogue``
    and named CPUs from ``cpus`` (None: feature levels only).

    Raises:
        ClusterSpecError: the text is not a valid spec; the message names the bad term.
    """
    if not isinstance(text, str) or not text.strip():
        raise ClusterSpecError("empty cluster spec", hint=GRAMMAR)
    counters: dict[str, int] = {"#gpus": 0, "#nodes": 0}
    nodes: list[Node] = []
    for index, term in enumerate(split_terms(text)):
        nodes.extend(_parse_term(term, index, counters, catalogue, cpus))
    return Cluster(nodes=tuple(nodes))


def _parse_term(
    term: str, index: int, counters: dict[str, int], catalogue: Catalogue, cpus: CPUTable | None
) -> list[Node]:
    def fail(problem: str, cls: type[ClusterSpecError] = ClusterSpecError) -> NoReturn:
        raise cls(f"cluster spec term {index + 1} {term!r}: {problem}", hint=GRAMMAR)

    m = _TERM.match(term)
    if not term:
        fail("empty term (two '+' in a row, or one at an end)")
    if m is None:
        fail(
            "must start with the node count and 'x', as in 2x8xh100-80g"
            if re.match(r"^\d", term)
            else "must start with the node count, as in 2x8xh100-80g"
        )
    assert m is not None
    count, fabric, body = int(m["nodes"]), m["fabric"], m["body"]
    if count < 1:
        fail("the node count must be at least 1")
    if fabric is not None and not FABRIC_NAME.match(fabric):
        fail(f"fabric {fabric!r} must be letters, digits, '_', '.' or '-'")
    ram, free_n, free_mem, cpu, bandwidth = None, None, None, DEFAULT_CPU, None
    for opt in (m["opts"] or "").split(",")[1:]:
        key, _, value = (part.strip() for part in opt.partition("="))
        if key.lower() not in ("ram", "free", "cpu", "bw") or not value:
            fail(f"option {opt.strip()!r} is not ram=RAM, free=N|FRACTION|SIZE, cpu=CPU or bw=GB/s")
        if key.lower() in ("cpu", "bw"):
            try:
                if key.lower() == "cpu":
                    cpu = cpu_from_label(value, cpus)
                else:
                    bandwidth = parse_bandwidth(value)
            except ClusterSpecError as e:
                fail(e.message)
        elif key.lower() == "ram":
            if ram is not None or (ram := ram_bytes(value)) is None:
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
        elif (free_mem := ram_bytes(value)) is None:
            fail(f"free={value} is not a GPU count, a fraction (0.75) or a size (60GiB)")
    if bandwidth is not None:
        cpu = with_bandwidth(cpu, bandwidth)
    host = _HOST.match(body)
    gpus_m = None if host else _GPUS.match(body)
    if host is None and gpus_m is None and _names_unified_chip(body, catalogue):
        gpus_m = _GPUS.match(f"1x{body}")  # 1xm4-max-128g: a Mac is one device a node
    if host is None and gpus_m is None:
        fail(
            "missing 'x' between the GPU count and the class"
            if re.match(r"\d+[^\dx×]", body, re.I | re.A)
            else "after the node count comes GPUSxCLASS, cpu-RAM or uma-RAM"
            if body
            else "no GPUs or class after 'x'"
        )
    gpus = 1 if host else int(gpus_m["gpus"])  # type: ignore[index]
    if gpus < 1:
        fail("the GPU count must be at least 1 (write NODESxcpu-RAM for nodes without GPUs)")
    counters["#nodes"] += count
    counters["#gpus"] += 0 if host and host["kind"].lower() == "cpu" else count * gpus
    if counters["#gpus"] > MAX_GPUS or counters["#nodes"] > MAX_GPUS:
        fail(f"more than {MAX_GPUS:,} GPUs or nodes in all; that is not a cluster explorer plans for")
    gpu: GPUClass | None = None
    if host:
        if (host_ram := ram_bytes(host["ram"])) is None:
            fail(f"{host['ram']!r} is not a RAM size (write 256g, 2t or 256GiB)")
        if ram is not None:
            fail(f"a {host['kind'].lower()} term states its RAM in the term, not with ram=")
        label = f"{host['kind'].lower()}-{_ram_text(host_ram)}"
        if host["kind"].lower() == "uma":
            gpu = catalogue.resolve(label if host_ram % GiB == 0 else f"uma:{host_ram}B")
    else:
        try:
            gpu = catalogue.resolve(gpus_m["cls"])  # type: ignore[index]
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
    return [
        Node(
            name=f"{base}#{first + i}",
            fabric=fabric,
            gpus=groups,
            host_ram_bytes=host_ram,
            host_free_bytes=host_free,
            unified=bool(gpu and gpu.metal),  # a CUDA unified-memory chip (GB10) is planned as a card
            host_ram_assumed=assumed,
            cpu=cpu,
        )
        for i in range(count)
    ]


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
            raise ClusterSpecError(
                f"node {n.name} has several GPU classes; the text form cannot say that",
                hint="use a JSON or TOML cluster file",
            )
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
        if n.cpu.name != DEFAULT_CPU.name:
            opts.append(f"cpu={n.cpu.name}")
        if n.cpu.bandwidth_stated and n.cpu.memory_bandwidth_bytes_per_s:
            opts.append(f"bw={n.cpu.memory_bandwidth_bytes_per_s / 1e9:g}")
        text = body + (f"@{n.fabric}" if n.fabric else "") + "".join("," + o for o in opts)
        if terms and terms[-1][1] == text:
            terms[-1][0] += 1
        else:
            terms.append([1, text])
    return " + ".join(f"{k}x{text}" for k, text in terms)


def uniform_cluster(gpu: GPUClass, nodes: int, width: int, fabric: str | None = None) -> Cluster:
    """``nodes`` alike nodes of ``width`` cards of ``gpu`` (on ``fabric`` when several), as the text
    ``{nodes}x{width}x{gpu}[@fabric]`` would give: host RAM assumed, every card free.

    A unified-memory class is one device a node, its RAM the class's memory.
    """
    if nodes < 1 or width < 1 or nodes * width > MAX_GPUS:
        raise ClusterSpecError(f"{nodes} × {width} {gpu.name} is not a cluster explorer plans for")
    width = 1 if gpu.unified else width
    ram = gpu.memory_bytes if gpu.unified else default_host_ram_bytes(width * gpu.memory_bytes)
    fabric = fabric if nodes > 1 else None
    base = f"{gpu.name}@{fabric}" if fabric else gpu.name
    group = GPUGroup(gpu=gpu, count=width, free_count=width)
    return Cluster(
        nodes=tuple(
            Node(
                name=f"{base}#{i}",
                fabric=fabric,
                gpus=(group,),
                host_ram_bytes=ram,
                host_free_bytes=ram,
                unified=gpu.metal,
                host_ram_assumed=not gpu.unified,
            )
            for i in range(nodes)
        )
    )


def _names_unified_chip(body: str, catalogue: Catalogue) -> bool:
    """Whether a term's body after the node count is a unified-memory class alone (``m4-max-128g``)."""
    try:
        return catalogue.resolve(body).unified
    except ClusterSpecError:
        return False
