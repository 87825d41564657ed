"""What a repository offers to serve: its original weights and its GGUF files.

An :class:`Artifact` is one thing a user can deploy: the original
safetensors weights (at the checkpoint's precision, or at a what-if
precision such as fp8 or int4), or one GGUF file (a split set counts as
one). Sizes say where they came from: ``fetched`` from the Hub's file
listing, ``header`` from a GGUF header's exact tensor sizes, or
``computed`` from the model's shape, which is never passed off as fetched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Format = Literal["safetensors", "gguf"]
SizeSource = Literal["fetched", "header", "computed"]


@dataclass(frozen=True, kw_only=True)
class Artifact:
    """One deployable form of a model.

    Attributes:
        name: ``original`` for the safetensors weights, else the GGUF file
            (or split set) name.
        format: ``safetensors`` or ``gguf``.
        quant: the precision label: ``bf16``, ``fp8 block 128×128``, ``Q4_K_M``…
        size_bytes: bytes on disk (all shards / parts).
        size_source: ``fetched``, ``header`` or ``computed``.
        files: the files that make it up.
        params_by_dtype: parameters per stored dtype (safetensors headers), when known.
        gguf_header: the parsed GGUF header (``explorer.gguf.header.GGUFHeader``),
            for exact per-tensor sizes; None when only the name is known.
        projector: a multimodal projector file (``mmproj-*.gguf``) that goes with it.
        what_if: True for a precision the repository does not ship (a what-if).
        repo: the repository that publishes it, when that is not the planned model's own
            (a published quantised checkpoint of the model); None: the model's own repository,
            or, for a what-if, no published checkpoint is known.
        note: what a user should know about where it comes from (a stand-in, none published).
    """

    name: str
    format: Format
    quant: str
    size_bytes: int
    size_source: SizeSource
    files: tuple[str, ...] = ()
    params_by_dtype: Mapping[str, int] = field(default_factory=dict)
    gguf_header: Any = None
    projector: str | None = None
    what_if: bool = False
    repo: str | None = None
    note: str = ""

    @property
    def label(self) -> str:
        """A short label for tables: ``original (bf16)`` or ``Q4_K_M``."""
        if self.format == "safetensors":
            return f"{self.name} ({self.quant})"
        return self.quant or self.name


ORIGINAL = "original"
