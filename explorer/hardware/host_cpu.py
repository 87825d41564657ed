"""A node's host CPU, as far as the engines care: the vector extensions llama.cpp uses, and its bandwidth.

llama.cpp's CPU backend chooses buffers by what the CPU offers: with AVX2 it
repacks some quantised weights (``CPU_REPACK``); on Sapphire Rapids and later
Xeons (AMX) it moves matmul weights to its ``AMX`` buffer instead. A node
states its CPU in the cluster spec (``cpu=amx``) or file (``"cpu": "amx"``);
unstated, it is an x86-64 CPU with AVX2, the level llama.cpp's reference
builds assume.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import ClusterSpecError

#: CPU feature levels, each implying those before it (AMX hosts have AVX-512, which implies AVX2)
FEATURE_LEVELS: tuple[str, ...] = ("avx2", "avx512", "amx")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCPU:
    """A node's CPU.

    Attributes:
        name: how the user named it (a feature level: ``avx2``, ``avx512``, ``amx``).
        features: the vector extensions it offers, lower-case (``{"avx2", "avx512", "amx"}``).
        memory_bandwidth_bytes_per_s: its memory bandwidth when known (None: the speed model's default).
    """

    name: str
    features: frozenset[str]
    memory_bandwidth_bytes_per_s: int | None = None

    @property
    def has_amx(self) -> bool:
        """Whether llama.cpp would use its AMX buffer type on this CPU."""
        return "amx" in self.features


#: a node whose CPU is not stated
DEFAULT_CPU = HostCPU(name="avx2", features=frozenset({"avx2"}))


def cpu_from_label(label: str) -> HostCPU:
    """The CPU a label names: a feature level (``avx2``, ``avx512``, ``amx``).

    Raises:
        ClusterSpecError: the label names no CPU explorer knows.
    """
    key = label.strip().lower()
    if key not in FEATURE_LEVELS:
        raise ClusterSpecError(
            f"cpu={label!r} is not a CPU explorer knows", hint=f"write one of {', '.join(FEATURE_LEVELS)}"
        )
    return HostCPU(name=key, features=frozenset(FEATURE_LEVELS[: FEATURE_LEVELS.index(key) + 1]))
