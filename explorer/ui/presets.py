"""Cluster presets for the notebooks and widgets: common machines as cluster specs.

Pure data. Each preset is a cluster spec in the text form of
``docs/cluster_spec.md`` and a sentence on what it is. The spec is the source
of truth: the app's simple controls show and edit the spec itself
(:mod:`explorer.ui.cluster_form`), and its description is computed from the
parsed cluster; a preset's sentence only names the machine in the menu.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PRESET", "PRESETS", "Preset", "preset_by_name"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Preset:
    """A named cluster.

    Attributes:
        name: what the menu shows.
        spec: the cluster in the text form (``2x8xh100-80g@ib0``).
        description: one sentence on what it is.
    """

    name: str
    spec: str
    description: str


PRESETS: tuple[Preset, ...] = (
    Preset(
        name="One RTX 4090",
        spec="1x1xrtx4090-24g",
        description="A single 24 GB desktop card.",
    ),
    Preset(
        name="One 8×H100 node",
        spec="1x8xh100-80g",
        description="One HGX H100 server: eight 80 GB cards on NVLink.",
    ),
    Preset(
        name="Two 8×H100 nodes over InfiniBand",
        spec="2x8xh100-80g@ib0",
        description="Two HGX H100 servers a replica may span over InfiniBand (fabric ib0).",
    ),
    Preset(
        name="Eight 8×H100 nodes (64 GPUs)",
        spec="8x8xh100-80g@ib0",
        description="A 64-GPU pod on one InfiniBand fabric.",
    ),
    Preset(
        name="1,000 H100 (125 nodes)",
        spec="125x8xh100-80g@ib0",
        description="A thousand H100 cards in 125 eight-card nodes on one InfiniBand fabric.",
    ),
    Preset(
        name="A100 MIG box",
        spec="1x16xa100-80g-mig-3g.40gb",
        description="Eight A100 80 GB cards, each split into two 3g.40gb MIG slices; a replica takes one slice.",
    ),
    Preset(
        name="Mac with 128 GB unified memory",
        spec="1x1xm4-max-128g",
        description="An Apple M4 Max with 128 GB of unified memory; the GPU may use Metal's working set of it.",
    ),
    Preset(
        name="A mixed fleet",
        spec="2x8xh100-80g@ib0 + 1x4xl40s-48g + 1x2xrtx4090-24g,free=0.5 + 1xcpu-512g",
        description="Two H100 nodes on InfiniBand, an L40S box, a half-busy pair of 4090s and a CPU server.",
    ),
)

#: the preset the notebook opens with
DEFAULT_PRESET = PRESETS[1]


def preset_by_name(name: str) -> Preset:
    """The preset called ``name``; the default preset when there is none of that name."""
    return next((p for p in PRESETS if p.name == name), DEFAULT_PRESET)
