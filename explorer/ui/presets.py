"""Presets for the notebooks and widgets: common machines as cluster specs, and the app's starting point.

Pure data. Each cluster preset is a cluster spec in the text form of
``docs/cluster_spec.md`` plus the values the notebook's simple controls
(nodes, GPUs per node, GPU class, free-memory fraction) start from. The spec
is the source of truth: the controls only compose a spec
(:func:`compose_spec`), which the user may edit further. :class:`AppDefaults`
is what the app opens with, overridable by CLI arguments or URL query
parameters (:func:`app_defaults`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "DEFAULT_PRESET",
    "PRESETS",
    "AppDefaults",
    "Preset",
    "app_defaults",
    "compose_spec",
    "preset_by_name",
    "preset_from_spec",
    "spec_for",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Preset:
    """A named cluster.

    Attributes:
        name: what the menu shows.
        spec: the cluster in the text form (``2x8xh100-80g@ib0``).
        description: one sentence on what it is.
        nodes: the node count the controls start from.
        gpus_per_node: the GPUs per node the controls start from.
        gpu_class: the catalogue class the controls start from.
        fabric: the fabric joining the nodes (None: nodes stand alone).
        free_fraction: the free share of each card's memory (1.0: all free).
    """

    name: str
    spec: str
    description: str
    nodes: int
    gpus_per_node: int
    gpu_class: str
    fabric: str | None = None
    free_fraction: float = 1.0

    @property
    def controls(self) -> tuple[int, int, str, float]:
        """(nodes, GPUs per node, class, free fraction): the simple controls' values."""
        return self.nodes, self.gpus_per_node, self.gpu_class, self.free_fraction


PRESETS: tuple[Preset, ...] = (
    Preset(
        name="One RTX 4090",
        spec="1x1xrtx4090-24g",
        nodes=1,
        gpus_per_node=1,
        gpu_class="rtx4090-24g",
        description="A single 24 GB desktop card.",
    ),
    Preset(
        name="One 8×H100 node",
        spec="1x8xh100-80g",
        nodes=1,
        gpus_per_node=8,
        gpu_class="h100-80g",
        description="One HGX H100 server: eight 80 GB cards on NVLink.",
    ),
    Preset(
        name="Two 8×H100 nodes over InfiniBand",
        spec="2x8xh100-80g@ib0",
        nodes=2,
        gpus_per_node=8,
        gpu_class="h100-80g",
        fabric="ib0",
        description="Two HGX H100 servers a replica may span over InfiniBand (fabric ib0).",
    ),
    Preset(
        name="Eight 8×H100 nodes (64 GPUs)",
        spec="8x8xh100-80g@ib0",
        nodes=8,
        gpus_per_node=8,
        gpu_class="h100-80g",
        fabric="ib0",
        description="A 64-GPU pod on one InfiniBand fabric.",
    ),
    Preset(
        name="A100 MIG box",
        spec="1x16xa100-80g-mig-3g.40gb",
        nodes=1,
        gpus_per_node=16,
        gpu_class="a100-80g-mig-3g.40gb",
        description="Eight A100 80 GB cards, each split into two 3g.40gb MIG slices; a replica takes one slice.",
    ),
    Preset(
        name="Mac with 128 GB unified memory",
        spec="1x1xm4-max-128g",
        nodes=1,
        gpus_per_node=1,
        gpu_class="m4-max-128g",
        description="An Apple M4 Max with 128 GB of unified memory; the GPU may use Metal's working set of it.",
    ),
    Preset(
        name="A mixed fleet",
        spec="2x8xh100-80g@ib0 + 1x4xl40s-48g + 1x2xrtx4090-24g,free=0.5 + 1xcpu-512g",
        nodes=2,
        gpus_per_node=8,
        gpu_class="h100-80g",
        fabric="ib0",
        description="Two H100 nodes on InfiniBand, an L40S box, a half-busy pair of 4090s and a CPU server.",
    ),
)

#: the preset the notebook opens with
DEFAULT_PRESET = PRESETS[1]


def preset_by_name(name: str) -> Preset:
    """The preset called ``name``; the default preset when there is none of that name."""
    return next((p for p in PRESETS if p.name == name), DEFAULT_PRESET)


def compose_spec(
    nodes: int, gpus_per_node: int, gpu_class: str, free_fraction: float = 1.0, fabric: str | None = "ib0"
) -> str:
    """A one-term spec from the simple controls: ``2x8xh100-80g@ib0,free=0.75``.

    Several nodes get ``fabric`` (so a replica may span them); a free fraction
    below 1 is written as ``free=`` with two decimals (always with a ``.``, which
    the grammar needs to read it as a fraction).
    """
    spec = f"{int(nodes)}x{int(gpus_per_node)}x{gpu_class.strip()}"
    if int(nodes) > 1 and fabric:
        spec += f"@{fabric}"
    if free_fraction < 1:
        spec += f",free={max(0.0, float(free_fraction)):.2f}"
    return spec


def spec_for(preset: Preset, nodes: int, gpus_per_node: int, gpu_class: str, free_fraction: float = 1.0) -> str:
    """The spec the controls stand for: the preset's own while they are untouched, else :func:`compose_spec`.

    So a mixed-fleet preset keeps all its terms until a control is moved.
    """
    if (int(nodes), int(gpus_per_node), gpu_class, round(float(free_fraction), 2)) == (
        preset.nodes,
        preset.gpus_per_node,
        preset.gpu_class,
        round(preset.free_fraction, 2),
    ):
        return preset.spec
    return compose_spec(nodes, gpus_per_node, gpu_class, free_fraction, preset.fabric or "ib0")


_FIRST_TERM = re.compile(
    r"^\s*(\d{1,6})\s*[xX×]\s*(\d{1,6})\s*[xX×]\s*([A-Za-z0-9_.:+-]+?)\s*(?:@([A-Za-z0-9_.-]+))?\s*(?:,|\+|$)"
)


def preset_from_spec(spec: str, name: str = "from the link") -> Preset:
    """A preset for any spec (a ``--cluster`` argument); the controls start from its first GPU term
    (one H100 when the first term has no GPUs). The spec is not checked here: the planner's parser does that."""
    m = _FIRST_TERM.match(spec)
    if m is None:
        return Preset(
            name=name,
            spec=spec.strip(),
            description="A cluster given as a spec.",
            nodes=1,
            gpus_per_node=1,
            gpu_class="h100-80g",
        )
    return Preset(
        name=name,
        spec=spec.strip(),
        description="A cluster given as a spec.",
        nodes=int(m[1]),
        gpus_per_node=int(m[2]),
        gpu_class=m[3].lower(),
        fabric=m[4],
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AppDefaults:
    """What the app opens with (overridable by CLI args after ``--`` or URL query parameters).

    Attributes:
        model: a snapshot repo (or any Hub id or path, then fetched on demand).
        preset: a cluster preset's name (``explorer.ui.presets``).
        spec: a cluster spec that overrides the preset's.
        context_tokens: the context asked for.
        engine: a key of :data:`explorer.ui.plan_rows.ENGINE_CHOICES`.
        kv_dtype: the KV cache type.
        concurrency: sequences at once.
    """

    model: str = "meta-llama/Meta-Llama-3.1-70B"
    preset: str = "One 8×H100 node"
    spec: str | None = None
    context_tokens: int = 32768
    engine: str = "all three, side by side"
    kv_dtype: str = "auto"
    concurrency: int = 1


_ENGINE_KEYS = {
    "all": "all three, side by side",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "llamacpp": "llama.cpp",
    "llama.cpp": "llama.cpp",
}


def app_defaults(*sources: Mapping[str, Any]) -> AppDefaults:
    """Defaults from ``--model X --cluster SPEC --context N --engine vllm --kv fp8 --concurrency 4``
    (or the same as URL query parameters); later sources win; values that do not parse are ignored."""
    d = AppDefaults()
    for src in sources:
        src = {str(k): (v[0] if isinstance(v, (list, tuple)) and v else v) for k, v in dict(src or {}).items()}
        changes: dict[str, Any] = {}
        if isinstance(src.get("model"), str) and src["model"].strip():
            changes["model"] = src["model"].strip()
        if isinstance(src.get("cluster"), str) and src["cluster"].strip():
            changes["spec"] = src["cluster"].strip()
        if isinstance(src.get("preset"), str):
            changes["preset"] = src["preset"]
        for key, field in (("context", "context_tokens"), ("concurrency", "concurrency")):
            try:
                if src.get(key) is not None and int(src[key]) >= 1:
                    changes[field] = int(src[key])
            except (TypeError, ValueError):
                pass
        if str(src.get("engine", "")).lower() in _ENGINE_KEYS:
            changes["engine"] = _ENGINE_KEYS[str(src["engine"]).lower()]
        if isinstance(src.get("kv"), str):
            changes["kv_dtype"] = src["kv"]
        d = replace(d, **changes)
    return d
