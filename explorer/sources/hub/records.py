"""What the Hub says about a repo, as small frozen records (no I/O here).

:class:`RepoListing` (files, sizes, resolved sha), :class:`SafetensorsParams`
(parameter counts from the weight headers) and :class:`FetchStats` are made
by the fetchers of :mod:`explorer.sources.hub.client` and
:mod:`explorer.sources.hub.weights`, and stored and read back by the cache,
which needs nothing else of the Hub package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "COMPANION_FILES",
    "CONFIG_FILE",
    "SAFETENSORS_INDEX",
    "SAFETENSORS_SINGLE",
    "FetchStats",
    "Progress",
    "RepoFile",
    "RepoListing",
    "SafetensorsParams",
    "frozen",
]

CONFIG_FILE = "config.json"
#: quantisation companions read next to config.json when the repo lists them
COMPANION_FILES = ("hf_quant_config.json", "quantization_config.json")
SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"

#: progress callback: (stage, done, total)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoFile:
    """One file of a repo at a commit.

    Attributes:
        path: path inside the repo, ``/``-separated.
        size_bytes: file size in bytes (for LFS files, the real size, not the pointer's).
        lfs: whether the Hub stores it in LFS (weights usually are).
    """

    path: str
    size_bytes: int
    lfs: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoListing:
    """A repo's files at one resolved commit.

    Attributes:
        repo_id: ``org/name``.
        revision: the revision asked for (``main`` when none was given).
        sha: the 40-hex commit it resolved to.
        gated: whether downloads need an accepted licence and a token.
        private: whether the repo is private.
        files: every file, in the Hub's order.
    """

    repo_id: str
    revision: str
    sha: str
    gated: bool = False
    private: bool = False
    files: tuple[RepoFile, ...] = ()

    def file(self, path: str) -> RepoFile | None:
        """The file at ``path``, or None."""
        return next((f for f in self.files if f.path == path), None)

    def has(self, path: str) -> bool:
        return self.file(path) is not None

    @property
    def gguf_files(self) -> tuple[RepoFile, ...]:
        return tuple(f for f in self.files if f.path.lower().endswith(".gguf"))

    @property
    def total_size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)


@dataclass(frozen=True, slots=True, kw_only=True)
class SafetensorsParams:
    """Parameter counts read from the safetensors headers of a checkpoint.

    Attributes:
        total_params: parameters over all tensors (a count, not bytes).
        params_by_dtype: parameters per safetensors dtype name (``BF16``, ``F8_E4M3``...).
        files: each weight file read -> its size in bytes.
    """

    total_params: int
    params_by_dtype: Mapping[str, int]
    files: Mapping[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchStats:
    """What one read moved over the network.

    Attributes:
        bytes_read: body bytes received.
        requests: HTTP requests made.
    """

    bytes_read: int
    requests: int


def frozen(d: dict) -> Mapping:
    """A read-only view, for records."""
    return MappingProxyType(dict(d))
