"""The GPU catalogue: one record per GPU class, read from ``data/gpus.csv``.

A *GPU class* is a kind of device a model is placed on: a whole card
(``h100-80g``), a MIG slice of one (``a100-80g-mig-1g.10gb``), or the unified
memory of an Apple machine (``m2-ultra-192g``). The table and the sources of
its numbers are described in ``data/gpus.md``.

:meth:`Catalogue.resolve` turns what a person types into a class:

- a catalogue name, any case, ``_`` or ``-``: ``H100_80G`` → ``h100-80g``;
- an alias, a name without its memory suffix when that is unambiguous
  (``h100`` → ``h100-80g``, ``4090`` → ``rtx4090-24g``, ``mi300x``);
- an unknown label with a memory suffix: ``foo-80g`` (or ``foo-80gb``) is
  80 GiB; a MIG label ``foo-mig-3g.40gb`` is 40 GiB;
- ``CLASS:SIZE`` stating the memory exactly: ``x:81559MiB``.

Unknown classes come back with ``known=False``, vendor ``"unknown"`` and
bandwidth and TFLOPs of 0, which means *unknown*: callers must never divide
by them or rank on them as if they were measured.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from explorer.errors import CatalogueError, UnknownGPUClassError
from explorer.hardware.weight_support import ARCHITECTURES, parse_weight_support, rows_for
from explorer.units import GiB, MiB, TiB, parse_size

#: the columns of data/gpus.csv, in order
COLUMNS = (
    "name",
    "vendor",
    "architecture",
    "memory_bytes",
    "memory_source",
    "torch_memory_bytes",
    "bandwidth_bytes_per_s",
    "bf16_tflops",
    "fp8_tflops",
    "interconnect_bytes_per_s",
    "unified",
    "mig_parent",
    "mig_profile",
    "notes",
)

#: labels larger than this are typing mistakes, not devices
MAX_DEVICE_BYTES = 64 * TiB
#: the least memory a device may be given (the smallest MIG slice is 5 GB; a stated 0 MiB divided by zero)
MIN_DEVICE_BYTES = MiB

_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]*$", re.A)
_SUFFIX = re.compile(r"^(?P<base>[a-z0-9][a-z0-9.+-]*?)-(?P<n>\d{1,7}(?:\.\d{1,3})?)g$", re.A)
#: a label named as an Apple chip: ``m3-pro-36g``, ``m4-36g`` (its unified memory is not a discrete card's)
_APPLE_CHIP = re.compile(r"^m\d{1,2}(?:-(?:pro|max|ultra))?-", re.A)
_MIG = re.compile(r"^(?P<parent>[a-z0-9][a-z0-9.+-]*?)-mig-(?P<profile>\d{1,2}g\.(?P<gb>\d{1,5})gb(?:\+me)?)$", re.A)
_VENDOR_WORDS = re.compile(r"^(nvidia|amd|apple|geforce|tesla|instinct|radeon)-")


def metal_working_set_bytes(ram_bytes: int) -> int:
    """How much of an Apple machine's unified memory the GPU may use.

    Metal reports ``recommendedMaxWorkingSetSize``; on the machines llama.cpp
    users logged it is two thirds of RAM up to 36 GiB and three quarters above
    (16 GiB → 10,922.67 MiB; 32 GiB → 21,845.33 MiB; 96 GiB → 73,728 MiB).
    Newer macOS releases report more (about 84 % of 128 GiB on macOS 26), and
    ``sysctl iogpu.wired_limit_mb`` raises it, so this is the conservative
    default. Sources are cited in data/gpus.md.
    """
    if ram_bytes <= 36 * GiB:
        return ram_bytes * 2 // 3
    return ram_bytes * 3 // 4


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUClass:
    """One kind of GPU device, as a planner sees it.

    Attributes:
        name: lowercase label with the memory suffix: ``h100-80g``.
        vendor: ``nvidia``, ``amd``, ``apple`` or ``unknown``.
        architecture: the GPU generation the engines' kernels check (:data:`ARCHITECTURES`: ``ampere``,
            ``hopper``…); ``""`` when unknown (a class inferred from a label).
        memory_bytes: total memory as the driver reports it (Apple: RAM size).
        memory_source: where ``memory_bytes`` came from.
        torch_memory_bytes: total memory as CUDA/ROCm shows it to a process (``cudaMemGetInfo``,
            torch's ``total_memory``), a little below the driver's figure; None where no log showed it.
        bandwidth_bytes_per_s: peak memory bandwidth; 0 means unknown.
        bf16_tflops: dense bf16 tensor TFLOPs (fp16 on cards without bf16); 0 means unknown.
        fp8_tflops: dense fp8 TFLOPs, or None where the device has no fp8.
        interconnect_bytes_per_s: per-GPU NVLink/Infinity Fabric, else PCIe x16,
            bidirectional as vendors quote it; None where it does not apply or is unknown.
        unified: memory is the host's RAM (Apple M-series, ``uma-*`` hosts).
        mig_parent: for a MIG slice, the class of the whole card.
        mig_profile: for a MIG slice, its profile: ``1g.10gb``.
        notes: free text from the table.
        known: False when the class was inferred from a label, not the table.
        weight_support: (engine, weight format, support) for this card's architecture, from the weight
            support table (``data/weight_support.csv``) handed to :meth:`Catalogue.from_csv_text`.
    """

    name: str
    vendor: str
    memory_bytes: int
    architecture: str = ""
    memory_source: str = ""
    torch_memory_bytes: int | None = None
    bandwidth_bytes_per_s: int = 0
    bf16_tflops: float = 0.0
    fp8_tflops: float | None = None
    interconnect_bytes_per_s: int | None = None
    unified: bool = False
    mig_parent: str | None = None
    mig_profile: str | None = None
    notes: str = ""
    known: bool = True
    weight_support: tuple[tuple[str, str, str], ...] = ()

    def runs(self, engine: str, weight_format: str) -> str | None:
        """How ``engine`` runs weights of ``weight_format`` on this card (:mod:`explorer.hardware.weight_support`):
        ``native``, ``weight-only`` or ``no``; None when the table says nothing."""
        return next((level for e, f, level in self.weight_support if e == engine and f == weight_format), None)

    @property
    def assumed(self) -> str | None:
        """What a plan assumes of a class the catalogue lacks, said plainly; None for a known class.

        ``m3-pro-36g:36GiB is not in the catalogue: planned as a discrete card of 36.0 GiB (stated in the
        label …), of unknown memory bandwidth and TFLOPs (no speed estimate)``
        """
        if self.known:
            return None
        kind = "a unified-memory host" if self.unified else "a MIG slice" if self.is_mig else "a discrete card"
        return (
            f"{self.name} is not in the catalogue: planned as {kind} of {self.memory_bytes / GiB:,.1f} GiB "
            f"({self.memory_source}), of unknown memory bandwidth and TFLOPs (no speed estimate)"
        )

    @property
    def is_mig(self) -> bool:
        """True for a MIG slice: a replica runs on one slice, never a group of them."""
        return self.mig_profile is not None

    @property
    def visible_memory_bytes(self) -> int:
        """The total an engine measures its budget from: torch's ``total_memory`` where known, else the driver's.

        vLLM asks for ``gpu_memory_utilization`` × this; SGLang starts from what is free of it.
        """
        return self.torch_memory_bytes or self.memory_bytes

    @property
    def metal(self) -> bool:
        """Whether the GPU reaches its unified memory through Metal's working set (an Apple chip, an unnamed
        ``uma-`` host); a CUDA unified-memory chip (GB10) gives its engines torch's whole total instead."""
        return self.unified and self.vendor != "nvidia"

    @property
    def usable_memory_bytes(self) -> int:
        """Memory a GPU workload may count on: all of a card, the Metal working set of Metal unified memory."""
        return metal_working_set_bytes(self.memory_bytes) if self.metal else self.memory_bytes


def _bytes_label(n: int) -> str:
    return f"{n // MiB}MiB" if n % MiB == 0 else f"{n}B"


def _squash(label: str) -> str:
    return re.sub(r"[-_ ]", "", label)


def normalize_label(label: str) -> str:
    """Lowercase, ``_`` and spaces to ``-``, vendor words dropped, ``80gb`` to ``80g`` (not for MIG profiles)."""
    text = re.sub(r"[\s_]+", "-", label.strip().lower()).strip("-")
    text = re.sub(r"-{2,}", "-", text)
    text = _VENDOR_WORDS.sub("", text)
    if not _MIG.match(text):
        text = re.sub(r"(\d)gi?b$", r"\1g", text)
    return text


class Catalogue:
    """The known GPU classes by name, with alias and label resolution."""

    def __init__(self, classes: Iterable[GPUClass]) -> None:
        self._by_name: dict[str, GPUClass] = {}
        for c in classes:
            if c.name in self._by_name:
                raise CatalogueError(f"GPU class {c.name!r} appears twice in the catalogue")
            self._by_name[c.name] = c
        self._aliases, self._ambiguous = self._build_aliases()

    def _build_aliases(self) -> tuple[dict[str, str], dict[str, list[str]]]:
        # Each whole-card name offers its squashed form and, without the memory
        # suffix, its base ("h100-80g" → "h100"), and the base without "rtx"
        # ("rtx4090" → "4090"). A base two classes share ("a100") is dropped:
        # the user must say which.
        offers: dict[str, set[str]] = {}
        for c in self._by_name.values():
            offers.setdefault(_squash(c.name), set()).add(c.name)
            if c.is_mig:
                continue
            m = _SUFFIX.match(c.name)
            if m:
                base = _squash(m["base"])
                for key in {base, base.removeprefix("rtx")}:
                    offers.setdefault(key, set()).add(c.name)
        unique = {k: next(iter(v)) for k, v in offers.items() if len(v) == 1}
        return unique, {k: sorted(v) for k, v in offers.items() if len(v) > 1}

    @classmethod
    def from_csv_text(cls, text: str, *, source: str = "gpus.csv", weight_support: str | None = None) -> Catalogue:
        """Parse a catalogue table (the columns of :data:`COLUMNS`; ``architecture`` may be left out).

        ``weight_support`` is the text of the weight support table (``data/weight_support.csv``): each class
        then carries its architecture's rows (:attr:`GPUClass.weight_support`).
        """
        reader = csv.DictReader(io.StringIO(text))
        try:
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ()) and c != "architecture"]
            if missing:
                raise CatalogueError(f"{source} lacks columns: {', '.join(missing)}")
            rows = [_parse_row(r, source, i) for i, r in enumerate(reader, start=2)]
            if weight_support is not None:
                table = parse_weight_support(weight_support)
                rows = [replace(r, weight_support=rows_for(table, r.architecture)) for r in rows]
        except csv.Error as e:
            raise CatalogueError(f"{source} is not a CSV table: {e}") from None
        names = {r.name for r in rows}
        for r in rows:
            if r.mig_parent is not None and r.mig_parent not in names:
                raise CatalogueError(f"{source}: MIG class {r.name} names parent {r.mig_parent!r}, not in the table")
        return cls(rows)

    def get(self, name: str) -> GPUClass | None:
        """The class of exactly this catalogue name, or None."""
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[GPUClass]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    @property
    def names(self) -> tuple[str, ...]:
        """Every catalogue name, in table order."""
        return tuple(self._by_name)

    def mig_profiles(self, parent: str) -> tuple[GPUClass, ...]:
        """The MIG slices the table lists for a whole-card class."""
        return tuple(c for c in self._by_name.values() if c.mig_parent == parent)

    def lookup(self, label: str) -> GPUClass | None:
        """A known class by name, alias or MIG label; None when the table has no such class."""
        text = normalize_label(label)
        found = self._by_name.get(text) or self._by_name.get(self._aliases.get(_squash(text), ""))
        if found is not None:
            return found
        m = _MIG.match(text)
        if m:
            parent = self.lookup(m["parent"])
            if parent is not None and not parent.is_mig:
                profile = m["profile"]
                found = self._by_name.get(f"{parent.name}-mig-{profile.removesuffix('+me')}")
                if found is not None and profile.endswith("+me"):  # media extensions: same memory and SMs
                    found = replace(found, name=f"{found.name}+me", mig_profile=profile)
                return found
        return None

    def resolve(self, label: str) -> GPUClass:
        """Turn a user's label into a GPU class: known, or inferred from its memory suffix.

        Raises:
            UnknownGPUClassError: the label is not known and says nothing of its memory.
        """
        if not isinstance(label, str) or not label.strip():
            raise UnknownGPUClassError("empty GPU class label", hint="name a class such as h100-80g")
        if ":" in label:
            return self._resolve_stated(label)
        known = self.lookup(label)
        if known is not None:
            return known
        text = normalize_label(label)
        m = _MIG.match(text)
        if m:
            parent = self.lookup(m["parent"])
            parent_name = parent.name if parent is not None else m["parent"]
            return _inferred(
                f"{parent_name}-mig-{m['profile']}",
                int(m["gb"]) * GiB,
                label,
                mig_parent=parent_name,
                mig_profile=m["profile"],
            )
        m = _SUFFIX.match(text)
        if m:
            memory = int(float(m["n"]) * GiB)
            if m["base"] != "uma":
                self._refuse_near_named(label, text, memory)
            return _inferred(text, memory, label, unified=m["base"] == "uma")
        if _squash(text) in self._ambiguous:
            raise UnknownGPUClassError(
                f"GPU class {label.strip()!r} is ambiguous: {', '.join(self._ambiguous[_squash(text)])}",
                hint="name one of them, with its memory suffix",
            )
        raise UnknownGPUClassError(
            f"GPU class {label.strip()!r} is not in the catalogue and its label carries no memory size"
            + self._near(text),
            hint="add the memory as a suffix (foo-80g means 80 GiB) or state it exactly (foo:81559MiB)",
        )

    def _resolve_stated(self, label: str) -> GPUClass:
        base, _, size_text = label.strip().rpartition(":")
        try:
            memory = parse_size(size_text)
        except (ValueError, OverflowError):
            raise UnknownGPUClassError(
                f"GPU class {label.strip()!r}: {size_text!r} is not a size",
                hint="write the memory with a unit, as in x:81559MiB or x:80GiB",
            ) from None
        _check_device_bytes(memory, label)  # h100:0MiB divided by zero in the planner; h100:1e30GB overflowed
        known = self.lookup(base) if base.strip() else None
        if known is not None:
            if known.memory_bytes == memory:
                return known
            return replace(
                known,
                name=f"{known.name}:{_bytes_label(memory)}",
                memory_bytes=memory,
                torch_memory_bytes=None,
                memory_source=f"stated in the label {label.strip()!r}",
            )
        text = normalize_label(base) or "gpu"
        if not _NAME.match(text):
            raise UnknownGPUClassError(
                f"GPU class {label.strip()!r}: {base!r} is not a class name",
                hint="use letters, digits, '.', '+' and '-'",
            )
        return _inferred(f"{text}:{_bytes_label(memory)}", memory, label, unified=text.startswith("uma"))

    def _refuse_near_named(self, label: str, text: str, memory: int) -> None:
        """An unknown label with a memory suffix close to the catalogue's classes of that memory, within 6 % (an
        "80 GB" card reports 79.6 GiB to 80 GiB) (``m3-pro-36g``:
        ``m3-max-36g``, ``m4-max-36g``), or one named as an Apple chip, is a did-you-mean, not a silent
        discrete card of unknown speed: it names them and ``uma-NNg`` (a unified-memory host of that size),
        and how to insist (``m3-pro-36g:36GiB``, planned with what it assumed said).

        Raises:
            UnknownGPUClassError: the label has near matches, or names an Apple chip.
        """
        apple = bool(_APPLE_CHIP.match(text))
        same = {
            _squash(g.name): g
            for g in self._by_name.values()
            if abs(g.memory_bytes - memory) * 100 <= memory * 6 and (apple or not g.unified)
        }
        near = [same[k] for k in difflib.get_close_matches(_squash(text), list(same), n=4, cutoff=0.6)]
        if not near and not apple:
            return
        if apple:  # every named chip of that memory
            near += sorted((g for g in same.values() if g.unified and g not in near), key=lambda g: g.name)
        size = _SUFFIX.match(text)["n"]  # type: ignore[index]
        names = [g.name for g in near] + ([f"uma-{size}g (a unified-memory host of {size} GiB)"] if apple else [])
        raise UnknownGPUClassError(
            f"GPU class {label.strip()!r} is not in the catalogue; did you mean {', '.join(names)}? To plan it "
            f"anyway as a discrete card of unknown speed, state its memory: {text}:{size}GiB",
            hint="name a class of the catalogue (data/gpus.csv), or state the memory as CLASS:SIZE",
        )

    def _near(self, text: str) -> str:
        pool = {**{_squash(n): n for n in self._by_name}, **self._aliases}
        near = difflib.get_close_matches(_squash(text), list(pool), n=5, cutoff=0.6)
        names = list(dict.fromkeys(pool[k] for k in near))
        return f"; near matches: {', '.join(names)}" if names else ""


def _check_device_bytes(memory: int, label: str) -> None:
    """Refuse a memory no device has (below :data:`MIN_DEVICE_BYTES` or past :data:`MAX_DEVICE_BYTES`)."""
    if not MIN_DEVICE_BYTES <= memory <= MAX_DEVICE_BYTES:
        raise UnknownGPUClassError(
            f"GPU class {label.strip()!r}: memory {memory:,} bytes is not a device size",
            hint="a device has between 1 MiB and 64 TiB",
        )


def _inferred(name: str, memory: int, label: str, **extra: object) -> GPUClass:
    _check_device_bytes(memory, label)
    return GPUClass(
        name=name,
        vendor="unknown",
        memory_bytes=memory,
        known=False,
        memory_source=f"inferred from the label {label.strip()!r}",
        **extra,
    )  # type: ignore[arg-type]


def _parse_row(row: dict[str, str], source: str, line: int) -> GPUClass:
    where = f"{source} line {line}"

    def number(key: str, kind: type, *, blank: bool = False) -> object:
        text = (row.get(key) or "").strip()
        if not text and blank:
            return None
        try:
            value = kind(text)
        except ValueError:
            raise CatalogueError(f"{where}: {key} {text!r} is not a {kind.__name__}") from None
        if not 0 <= value < float("inf"):
            raise CatalogueError(f"{where}: {key} {text!r} is negative or not finite")
        return value

    name = (row.get("name") or "").strip()
    if not _NAME.match(name):
        raise CatalogueError(f"{where}: name {name!r} is not a lowercase label")
    unified = (row.get("unified") or "").strip().lower()
    if unified not in ("true", "false"):
        raise CatalogueError(f"{where}: unified {unified!r} is neither true nor false")
    parent = (row.get("mig_parent") or "").strip() or None
    profile = (row.get("mig_profile") or "").strip() or None
    if (parent is None) != (profile is None):
        raise CatalogueError(f"{where}: mig_parent and mig_profile must be given together")
    memory = number("memory_bytes", int)
    if not memory:
        raise CatalogueError(f"{where}: memory_bytes must be positive")
    architecture = (row.get("architecture") or "").strip()
    if architecture and architecture not in ARCHITECTURES:
        raise CatalogueError(f"{where}: architecture {architecture!r} is not one of {', '.join(ARCHITECTURES)}")
    torch_memory = number("torch_memory_bytes", int, blank=True)
    if torch_memory is not None and not 0 < torch_memory <= memory * 1.01:  # type: ignore[operator]
        raise CatalogueError(
            f"{where}: torch_memory_bytes {torch_memory} must be positive and about memory_bytes or less"
        )
    return GPUClass(
        name=name,
        vendor=(row.get("vendor") or "").strip() or "unknown",
        architecture=architecture,
        memory_bytes=memory,  # type: ignore[arg-type]
        memory_source=(row.get("memory_source") or "").strip(),
        torch_memory_bytes=torch_memory,  # type: ignore[arg-type]
        bandwidth_bytes_per_s=number("bandwidth_bytes_per_s", int),  # type: ignore[arg-type]
        bf16_tflops=number("bf16_tflops", float),  # type: ignore[arg-type]
        fp8_tflops=number("fp8_tflops", float, blank=True),  # type: ignore[arg-type]
        interconnect_bytes_per_s=number("interconnect_bytes_per_s", int, blank=True),  # type: ignore[arg-type]
        unified=unified == "true",
        mig_parent=parent,
        mig_profile=profile,
        notes=(row.get("notes") or "").strip(),
    )
