"""The cluster's file form: JSON or TOML with every detail (free memory, host RAM per node)."""

from __future__ import annotations

from explorer.errors import ClusterSpecError
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.cluster import MAX_GPUS, MAX_RAM_BYTES, Cluster, GPUGroup, Node, default_host_ram_bytes
from explorer.hardware.cluster_text import FABRIC_NAME, ram_bytes
from explorer.hardware.host_cpu import DEFAULT_CPU, CPUTable, cpu_from_label, parse_bandwidth, with_bandwidth
from explorer.limits import load_json, load_toml
from explorer.units import GiB

_NODE_KEYS = {
    "name",
    "fabric",
    "host_ram",
    "host_ram_bytes",
    "host_free",
    "host_free_bytes",
    "unified",
    "gpus",
    "cpu",
    "bw",
}
_GROUP_KEYS = {"class", "count", "free_count", "free_bytes", "card_free_bytes"}


def cluster_data_from_text(text: str, *, source: str = "cluster", toml_first: bool = False) -> object:
    """The parsed JSON or TOML of a cluster file (not yet checked as a cluster).

    Raises:
        ClusterSpecError: the text is neither JSON nor TOML.
    """
    errors = []
    for kind in ("toml", "json") if toml_first else ("json", "toml"):
        try:
            load = load_toml if kind == "toml" else load_json
            return load(text, where=f"cluster file {source}", error=ClusterSpecError)
        except ClusterSpecError as e:
            errors.append(f"{kind}: {e.message}")
    raise ClusterSpecError(f"cluster file {source} is neither JSON nor TOML ({errors[0]})")


def cluster_from_text(
    text: str, catalogue: Catalogue, *, source: str = "cluster", toml_first: bool = False, cpus: CPUTable | None = None
) -> Cluster:
    """A cluster from the JSON or TOML text of a cluster file (layout in docs/cluster_spec.md); named CPUs
    from ``cpus``.

    Raises:
        ClusterSpecError: the text is neither JSON nor TOML, or describes an impossible cluster.
    """
    data = cluster_data_from_text(text, source=source, toml_first=toml_first)
    return cluster_from_dict(data, catalogue, where=source, cpus=cpus)


def cluster_from_dict(
    data: object, catalogue: Catalogue, *, where: str = "cluster", cpus: CPUTable | None = None
) -> Cluster:
    """Build a cluster from parsed JSON/TOML: ``{"nodes": [{"name", "fabric", "host_ram", ..., "gpus": [...]}]}``.

    Sizes are ints (bytes) or text with a unit (``"512GiB"``, ``"512g"``); a node's ``cpu`` is a feature level
    or a CPU of ``cpus``, its ``bw`` the host's memory bandwidth in GB/s (a number, or text such as ``"200g"``).

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
    return Cluster(
        nodes=tuple(_node_from_dict(d, f"{where}: nodes[{i}]", i, catalogue, cpus) for i, d in enumerate(data["nodes"]))
    )


def _check_keys(d: object, allowed: set[str], at: str) -> dict:
    if not isinstance(d, dict):
        raise ClusterSpecError(f"{at}: expected a table/object, got {type(d).__name__}")
    extra = set(d) - allowed
    if extra:
        raise ClusterSpecError(
            f"{at}: unknown keys {', '.join(sorted(map(str, extra)))}", hint=f"allowed: {', '.join(sorted(allowed))}"
        )
    return d


def _size_key(d: dict, key: str, at: str) -> int | None:
    if key in d and f"{key}_bytes" in d:
        raise ClusterSpecError(f"{at}: give {key} or {key}_bytes, not both")
    value = d.get(key, d.get(f"{key}_bytes"))
    return None if value is None else _size_value(value, f"{at}: {key}")


def _size_value(value: object, at: str) -> int:
    n = ram_bytes(value) if isinstance(value, str) else value if type(value) is int else None
    if n is None or not 0 <= n <= MAX_RAM_BYTES:
        raise ClusterSpecError(f"{at}: {value!r} is not a size (bytes, or text such as '512GiB' or '512g')")
    return n


def _count(value: object, at: str, *, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_GPUS:
        raise ClusterSpecError(f"{at}: {value!r} is not a count from {low} to {MAX_GPUS:,}")
    return value


def _node_from_dict(raw: object, at: str, index: int, catalogue: Catalogue, cpus: CPUTable | None) -> Node:
    d = _check_keys(raw, _NODE_KEYS, at)
    name, fabric, unified = d.get("name", f"node{index}"), d.get("fabric"), d.get("unified", False)
    if not isinstance(name, str) or not name.strip():
        raise ClusterSpecError(f"{at}: name {name!r} is not a non-empty string")
    if fabric is not None and (not isinstance(fabric, str) or not FABRIC_NAME.match(fabric)):
        raise ClusterSpecError(f"{at}: fabric {fabric!r} must be letters, digits, '_', '.' or '-'")
    if not isinstance(unified, bool):
        raise ClusterSpecError(f"{at}: unified {unified!r} is not true or false")
    ram, free = _size_key(d, "host_ram", at), _size_key(d, "host_free", at)
    cpu_label = d.get("cpu", DEFAULT_CPU.name)
    if not isinstance(cpu_label, str):
        raise ClusterSpecError(f'{at}: cpu {cpu_label!r} is not a CPU name such as "amx"')
    bw = d.get("bw")
    if bw is not None and (isinstance(bw, bool) or not isinstance(bw, (str, int, float))):
        raise ClusterSpecError(f'{at}: bw {bw!r} is not a bandwidth in GB/s such as 200 or "200g"')
    try:
        cpu = cpu_from_label(cpu_label, cpus)
        if bw is not None:
            cpu = with_bandwidth(cpu, parse_bandwidth(str(bw)))
    except ClusterSpecError as e:
        raise ClusterSpecError(f"{at}: {e.message}", hint=e.hint or None) from None
    raw_groups = d.get("gpus", [])
    if not isinstance(raw_groups, list):
        raise ClusterSpecError(f"{at}: gpus must be a list of groups")
    groups = tuple(_group_from_dict(g, f"{at}.gpus[{j}]", catalogue) for j, g in enumerate(raw_groups))
    unified = unified or any(g.gpu.metal for g in groups)
    if unified and not groups:
        if ram is None:
            raise ClusterSpecError(f"{at}: a unified node needs host_ram (its GPU shares it)")
        uma = catalogue.resolve(f"uma-{ram // GiB}g" if ram % GiB == 0 else f"uma:{ram}B")
        groups = (GPUGroup(gpu=uma, count=1, free_count=1),)
    if ram is None and (unified or any(g.gpu.unified for g in groups)):
        ram = groups[0].gpu.memory_bytes  # the GPU shares the host's RAM (a CUDA one, GB10, is planned as a card)
    if ram is None and not groups:
        raise ClusterSpecError(f"{at}: a node without GPUs needs host_ram")
    assumed = ram is None
    ram = default_host_ram_bytes(sum(g.memory_bytes for g in groups)) if ram is None else ram
    try:
        return Node(
            name=name,
            fabric=fabric,
            gpus=groups,
            host_ram_bytes=ram,
            host_free_bytes=ram if free is None else free,
            unified=unified,
            host_ram_assumed=assumed,
            cpu=cpu,
        )
    except ClusterSpecError as e:
        raise ClusterSpecError(f"{at}: {e.message}", hint=e.hint or None) from None


def _group_from_dict(raw: object, at: str, catalogue: Catalogue) -> GPUGroup:
    d = _check_keys(raw, _GROUP_KEYS, at)
    label = d.get("class")
    if not isinstance(label, str):
        raise ClusterSpecError(f"{at}: 'class' must name a GPU class, as in \"h100-80g\"")
    try:
        gpu = catalogue.resolve(label)
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
