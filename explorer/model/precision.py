"""Weight precisions: what a checkpoint stores for each tensor, scales included.

A :class:`Precision` says, for every tensor of a model, which
:class:`WeightFormat` stores it: quantised formats for Linear weights that
the scheme targets, the model's own dtype for everything it leaves alone
(embeddings, norms, routers, ``lm_head`` and whatever the config's skip list
names). Each format counts its scales and zero points the way the checkpoint
lays them out (rows = output features, cols = input features):

============  ==================================================================
format        bytes for one ``rows × cols`` matrix
============  ==================================================================
dense         rows·cols·dtype
fp8 block     rows·cols + ⌈rows/128⌉·⌈cols/128⌉·4 (fp32 scale per 128×128 block)
fp8 channel   rows·cols + rows·4
fp8 tensor    rows·cols + 4 (one fp32 scale; + 4 for a static input scale)
GPTQ int b/g  rows·⌈cols·b/32⌉·4 + ⌈cols/g⌉·(rows·2 + ⌈rows·b/32⌉·4) + cols·4 (g_idx)
AWQ int b/g   the same without g_idx
CT int b/g    rows·⌈cols·b/32⌉·4 + rows·⌈cols/g⌉·2 + 16 (weight_shape), + zero points if asymmetric
bnb int8      rows·cols + rows·4 (SCB)
bnb nf4/fp4   ⌈rows·cols/2⌉ + ⌈rows·cols/64⌉·4 (fp32 absmax per 64)
bnb 4 double  ⌈rows·cols/2⌉ + ⌈rows·cols/64⌉ (uint8 absmax) + ⌈rows·cols/64/256⌉·4 (fp32 nested absmax)
int8 plain    rows·cols + rows·scale (per channel) or ⌈rows/128⌉·⌈cols/128⌉·4 (per block: SGLang blockwise_int8)
HQQ int b/g   rows·⌈cols·b/32⌉·4 + 2·rows·⌈cols/g⌉·2 (float scale and float zero per group)
NVFP4         rows·cols/2 + rows·⌈cols/16⌉ (fp8 scales) + 8 (two fp32 globals)
MXFP4         rows·cols/2 + rows·⌈cols/32⌉ (e8m0 scales)
MXFP8         rows·cols + rows·⌈cols/32⌉ (e8m0 scales)
GGUF what-if  ⌈rows·cols·bpw/8⌉ with the quant mix's average bits (approximate)
ggml          rows·cols / block · type_size (one GGUF tensor's exact type, gguf-py GGML_QUANT_SIZES)
============  ==================================================================
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from explorer.model.dtypes import ElementType, element_type
from explorer.model.tensors import Tensor
from explorer.units import cdiv

FormatKind = Literal["dense", "fp8", "int", "bnb8", "bnb4", "nvfp4", "mxfp4", "mxfp8", "gguf", "ggml"]
Source = Literal["config", "what-if", "gguf", "published"]

#: wrapper prefixes stripped before matching module names against skip lists
_PREFIXES = ("model.language_model.", "language_model.", "text_model.", "llm.")


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightFormat:
    """How one matrix is stored.

    Attributes:
        kind: the storage family.
        bits: bits per weight before scales (4, 8, 16...; GGUF: the average).
        group_size: weights sharing a scale along the input dimension (0: one per row).
        block: fp8 (or SGLang blockwise int8) block-scale tile (rows, cols), or None.
        fp8_scale: fp8 scale granularity when ``block`` is None: ``channel`` or ``tensor``.
        packing: int layout: ``gptq``, ``awq``, ``compressed`` (packed in int32 words), ``hqq`` (packed, with
            float zeros) or ``plain`` (one int8 a weight, as W8A8 int8 stores it; with ``zero_points`` a float
            offset beside each scale, as msModelSlim's ``weight_offset``).
        zero_points: whether int zero points are stored (asymmetric, or GPTQ/AWQ layout).
        g_idx: whether a per-column group index is stored (GPTQ, or act-order groups).
        scale_bytes: bytes per int scale (fp16/bf16: 2; fp32: 4).
        double_quant: bitsandbytes 4-bit with nested quantisation of its absmax (one uint8 per 64
            weights, one fp32 per 256 of those).
        dense_bytes: bytes per value for ``dense``.
        ggml_block: for ``ggml``, (weights per block, bytes per block): Q4_K (256, 144).
        block_cols: for a ``gguf`` what-if, the block its types need a row to be a multiple of (256 for
            K-quant and IQ mixes; 0: any row).
        fallback_bits: for a ``gguf`` what-if, the bits of a row that is not a multiple of ``block_cols``:
            llama.cpp quantises such a tensor to a 32-block type instead (``tensor_type_fallback``).
    """

    kind: FormatKind
    bits: float
    group_size: int = 0
    block: tuple[int, int] | None = None
    fp8_scale: str = "channel"
    packing: str = "gptq"
    zero_points: bool = True
    g_idx: bool = False
    scale_bytes: int = 2
    double_quant: bool = False
    dense_bytes: int = 2
    ggml_block: tuple[int, int] | None = None
    block_cols: int = 0
    fallback_bits: float = 0.0

    def matrix_bytes(self, rows: int, cols: int) -> int:
        """Bytes of one ``rows × cols`` weight with its scales and zero points."""
        n = rows * cols
        if self.kind == "dense":
            return n * self.dense_bytes
        if self.kind == "fp8":
            if self.block:
                return n + cdiv(rows, self.block[0]) * cdiv(cols, self.block[1]) * 4
            return n + (rows * 4 if self.fp8_scale == "channel" else 4)
        if self.kind == "int":
            return self._int_bytes(rows, cols)
        if self.kind == "bnb8":
            return n + rows * 4
        if self.kind == "bnb4" and self.double_quant:
            return cdiv(n, 2) + cdiv(n, 64) + cdiv(cdiv(n, 64), 256) * 4
        if self.kind == "bnb4":
            return cdiv(n, 2) + cdiv(n, 64) * 4
        if self.kind == "nvfp4":
            return cdiv(n, 2) + rows * cdiv(cols, 16) + 8
        if self.kind == "mxfp4":
            return cdiv(n, 2) + rows * cdiv(cols, 32)
        if self.kind == "mxfp8":
            return n + rows * cdiv(cols, 32)
        if self.kind == "ggml" and self.ggml_block:
            return n // self.ggml_block[0] * self.ggml_block[1]  # exact: rows are whole blocks
        bits = self.bits
        if self.block_cols and cols % self.block_cols:  # llama.cpp's fallback; F16 when not even 32 divides
            bits = self.fallback_bits if cols % 32 == 0 else 16.0
        return cdiv(int(n * bits * 1000), 8000)  # gguf what-if: average bits

    def _int_bytes(self, rows: int, cols: int) -> int:
        bits = int(self.bits)
        if self.packing == "plain":  # one int8 a weight; a scale (and an offset) a row, or a scale a block tile
            tiles = cdiv(rows, self.block[0]) * cdiv(cols, self.block[1]) if self.block else rows
            return rows * cdiv(cols * bits, 8) + tiles * self.scale_bytes * (2 if self.zero_points else 1)
        groups = cdiv(cols, self.group_size) if self.group_size > 0 else 1
        packed = rows * cdiv(cols * bits, 32) * 4
        scales = rows * groups * self.scale_bytes
        if self.packing == "hqq":  # zeros are floats like the scales (vLLM hqq_marlin.py)
            return packed + 2 * scales
        zeros = groups * cdiv(rows * bits, 32) * 4 if self.zero_points else 0
        extra = 16 if self.packing == "compressed" else 0
        g_idx = cols * 4 if self.g_idx else 0
        return packed + scales + zeros + extra + g_idx


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemeGroup:
    """Modules a format applies to.

    Attributes:
        targets: ``Linear`` (every Linear weight), module names, globs or ``re:`` regexes.
        fmt: the format those modules are stored in.
    """

    targets: tuple[str, ...]
    fmt: WeightFormat


@dataclass(frozen=True, kw_only=True)
class Precision:
    """A checkpoint's weight precision.

    Attributes:
        name: a short label (``bf16``, ``fp8 block 128``, ``int4 AWQ g128``, ``Q4_K_M``).
        method: the quantisation method (``none``, ``fp8``, ``awq``, ``gptq``,
            ``compressed-tensors``, ``bitsandbytes``, ``modelopt``, ``mxfp4``, ``gguf``).
        base: the dtype of every tensor the scheme leaves alone.
        groups: formats by target, first match wins.
        skip: modules left in ``base`` (globs, ``re:`` regexes or names).
        roles: when set, only tensors of these roles are quantised (MXFP4: experts).
        source: read from the checkpoint's config, a what-if, a GGUF file, or the precision of another
            repository's published checkpoint (``published``: it loads as its own config says).
        kv_cache_hint: a KV cache dtype the checkpoint ships scales for (``fp8``).
        all_matrices: quantise every 2-D tensor, embeddings and head included
            (a GGUF what-if: llama.cpp quantises ``token_embd`` and ``output`` too).
        kept: the checkpoint whose quantised tensors a conversion copies as they are: where ``kept``
            quantises a tensor, its format wins (llama.cpp's converter writes gpt-oss's MXFP4 experts
            unchanged at every file type).
    """

    name: str
    method: str
    base: ElementType
    groups: tuple[SchemeGroup, ...] = ()
    skip: tuple[str, ...] = ()
    roles: frozenset[str] | None = None
    source: Source = "config"
    kv_cache_hint: str | None = None
    all_matrices: bool = False
    kept: Precision | None = None

    def __hash__(self) -> int:
        return hash(
            (
                self.name,
                self.method,
                self.base,
                self.groups,
                self.skip,
                self.roles,
                self.source,
                self.all_matrices,
                self.kept,
            )
        )

    @property
    def nominal_bits(self) -> float:
        """Bits per weight of the main format before scales (16 for bf16, 4 for AWQ int4)."""
        return self.groups[0].fmt.bits if self.groups else self.base.bits_per_element

    @cached_property
    def _skip_matcher(self) -> _ModuleMatcher | None:
        return _compile(self.skip)

    @cached_property
    def _target_matchers(self) -> tuple[_ModuleMatcher | None, ...]:
        return tuple(None if g.targets == ("Linear",) else _compile(g.targets) for g in self.groups)

    def format_for(self, tensor: Tensor, layer: int | None) -> WeightFormat | None:
        """The quantised format storing ``tensor``, or None when it stays in ``base``."""
        if self.kept is not None and (fmt := self.kept.format_for(tensor, layer)) is not None:
            return fmt
        if not self.groups:
            return None
        if self.all_matrices:
            return self.groups[0].fmt if tensor.cols > 1 else None
        if not tensor.linear or tensor.role in ("router", "vision"):
            return None
        if self.roles is not None and tensor.role not in self.roles:
            return None
        key = (tensor.module, layer)
        memo = self._formats_by_module
        if key not in memo:  # every layer's modules are asked for again at each split and card
            memo[key] = self._format_for_module(tensor.module, layer)
        return memo[key]

    @cached_property
    def _formats_by_module(self) -> dict[tuple[str, int | None], WeightFormat | None]:
        return {}

    def _format_for_module(self, module: str, layer: int | None) -> WeightFormat | None:
        name = _normalise(module.replace("{i}", str(layer)) if layer is not None else module)
        if self._skip_matcher is not None and self._skip_matcher.matches(name):
            return None
        for group, matcher in zip(self.groups, self._target_matchers, strict=True):
            if matcher is None or matcher.matches(name):
                return group.fmt
        return None

    def tensor_bytes(self, tensor: Tensor, layer: int | None = None) -> int:
        """Bytes of the whole tensor group (all its copies)."""
        fmt = self.format_for(tensor, layer)
        if fmt is None:
            return tensor.elements * self.base.block_bytes // self.base.block_elements
        return fmt.matrix_bytes(tensor.rows, tensor.cols) * tensor.count


def _normalise(name: str) -> str:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _pattern_regex(pattern: str) -> str | None:
    """One ``re:`` or glob skip/target pattern as a regex over a module path; None for a plain name."""
    if pattern.startswith("re:"):
        return pattern[3:]
    pattern = _normalise(pattern)
    if any(ch in pattern for ch in "*?["):
        # fnmatch ends its regex with \Z up to Python 3.13 and \z from 3.14 (the browser's Pyodide runs 3.14)
        glob = fnmatch.translate(pattern).removesuffix(r"\Z").removesuffix(r"\z")
        glob = glob.removeprefix("(?s:").removesuffix(")")
        return rf"(?:^|\.)(?:{glob})(?:\.|$)"
    return None


@dataclass(frozen=True, slots=True)
class _ModuleMatcher:
    """Skip or target patterns over module paths.

    A plain name matches that module or any module under it, anywhere in the
    path: a run of whole dotted components equal to it. Plain names are kept
    in a set and looked up run by run (a checkpoint's skip list can name every
    layer's modules: Qwen3-30B-A3B-FP8 lists 336, and one regex alternation of
    them cost half a millisecond a tensor); ``re:`` and glob patterns stay a regex.
    """

    plain: frozenset[str]
    regex: re.Pattern[str] | None

    def matches(self, name: str) -> bool:
        """Whether ``name`` (a normalised module path) is matched."""
        if self.regex is not None and self.regex.search(name):
            return True
        if not self.plain:
            return False
        parts = name.split(".")
        return any(".".join(parts[i:j]) in self.plain for i in range(len(parts)) for j in range(i + 1, len(parts) + 1))


def _compile(patterns: tuple[str, ...]) -> _ModuleMatcher | None:
    if not patterns:
        return None
    regexes = [r for r in map(_pattern_regex, patterns) if r is not None]
    plain = frozenset(_normalise(p) for p in patterns if _pattern_regex(p) is None)
    return _ModuleMatcher(plain=plain, regex=re.compile("|".join(f"(?:{r})" for r in regexes)) if regexes else None)


def dense(dtype: str = "bf16", *, source: Source = "what-if") -> Precision:
    """Unquantised weights in one dtype."""
    et = element_type(dtype)
    return Precision(name=et.name, method="none", base=et, source=source)
