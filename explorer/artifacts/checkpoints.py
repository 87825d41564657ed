"""Published checkpoints of a model at another precision: the repo a what-if precision really loads.

A what-if ("this 70B at AWQ int4") is only a plan a user can run when
someone has published the model at that precision, or when the engine can
quantise it while loading (vLLM's ``--quantization fp8``). A
:class:`PublishedCheckpoint` is one such repository, found in the Hub's model
tree (``base_model:quantized:ORG/NAME``), in the cache, or in the shipped
list (``data/checkpoints.json``). :func:`checkpoint_for` picks the one that
matches a precision; :func:`placeholder_ref` is what a launch command says
when none is known, so no command ever loads the original weights by mistake.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from explorer.model.conversion import CONVERTER_TYPES
from explorer.model.quant_config import PUBLISHED_FP8, published_fp8_name

CheckpointFormat = Literal["awq", "gptq", "fp8", "compressed-tensors", "gguf", "bnb", "nvfp4", "mxfp4", "int8", "bf16"]
Verified = Literal["config", "files", "card", "name-only", "hub"]

#: every format a checkpoint may have (``int8``: W8A8 int8 outside compressed-tensors, SGLang's ``w8a8_int8`` and
#: ``blockwise_int8``; ``bf16``: an unquantised conversion of an fp8 original, for cards without fp8 kernels)
FORMATS: frozenset[str] = frozenset(
    {"awq", "gptq", "fp8", "compressed-tensors", "gguf", "bnb", "nvfp4", "mxfp4", "int8", "bf16"}
)

#: how a what-if precision's method is published (explorer.model.quant_config methods → checkpoint formats)
FORMATS_FOR_METHOD: dict[str, tuple[str, ...]] = {
    "awq": ("awq",),
    "gptq": ("gptq",),
    "fp8": ("fp8",),
    "compressed-tensors": ("compressed-tensors", "int8"),  # int8 w8a8 / w8a16 what-ifs
    "bitsandbytes": ("bnb",),
    "modelopt": ("nvfp4",),
    "mxfp4": ("mxfp4",),
    "gguf": ("gguf",),
    "none": ("bf16",),  # a bf16 what-if of an fp8 original: its published conversion
}

#: publishers whose quants engines document and test, first choices after the model's own organisation
KNOWN_PUBLISHERS: tuple[str, ...] = (
    "hugging-quants", "redhatai", "neuralmagic", "nvidia", "bartowski", "ggml-org", "unsloth",
    "lmstudio-community", "thebloke",
)  # fmt: skip

#: the fp8 schemes a checkpoint may state (``scheme``): ``block`` (128 × 128, the default) or one of
#: :data:`~explorer.model.quant_config.PUBLISHED_FP8` (``tensor-modelopt``, ``channel-fbgemm``…)
FP8_SCHEMES: tuple[str, ...] = ("block", *PUBLISHED_FP8)

#: verification levels, strongest first: a checkpoint seen in the Hub's listing beats one only named somewhere
VERIFIED_ORDER: tuple[str, ...] = ("hub", "config", "files", "card", "name-only")


@dataclass(frozen=True, slots=True, kw_only=True)
class GGUFFile:
    """One model file of a GGUF repository.

    Attributes:
        name: the file's path in the repository (the first part of a split set).
        quant: its quantisation (``Q4_K_M``).
        size_bytes: bytes on disk, all parts of a split set (None: unknown).
    """

    name: str
    quant: str
    size_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedCheckpoint:
    """A repository that publishes a model at another precision.

    Attributes:
        repo: the repository id (``hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4``).
        base_model: the model it quantises (``meta-llama/Meta-Llama-3.1-70B-Instruct``).
        format: how it is stored (``awq``, ``gptq``, ``fp8``, ``compressed-tensors``, ``gguf``…).
        bits: weight bits where the format says (4 for AWQ int4), else None.
        size_bytes: the safetensors checkpoint's bytes on disk when known.
        files: a GGUF repository's model files, one per quant.
        stands_in: True when it quantises the Instruct/chat model standing in for a base id
            (the same shapes, other weights): said wherever it is offered.
        verified: how it is known: ``hub`` (the Hub's model tree), ``config`` (its quantization_config
            was read), ``files`` (its file list with sizes), ``card``, ``name-only``.
        source: where explorer found it: ``hub``, ``cache`` or ``shipped``.
        scheme: an fp8 checkpoint's scale layout (:data:`FP8_SCHEMES`): ``block`` (128 × 128, DeepSeek's and
            Qwen's), ``tensor-modelopt`` (NVIDIA), ``tensor-quark`` (AMD), ``channel-fbgemm`` (Meta's 405B),
            ``channel-dynamic`` (compressed-tensors FP8-dynamic); ``block`` for every other format.
    """

    repo: str
    base_model: str
    format: CheckpointFormat
    bits: int | None = None
    size_bytes: int | None = None
    files: tuple[GGUFFile, ...] = ()
    stands_in: bool = False
    verified: Verified = "name-only"
    source: str = "shipped"
    scheme: str = "block"

    @property
    def what_if_name(self) -> str | None:
        """The what-if precision this checkpoint is sized and labelled as, when its format's default is not
        it (an fp8 checkpoint of another scheme than 128 × 128 blocks: ``fp8-tensor-modelopt``); else None."""
        return published_fp8_name(self.scheme) if self.format == "fp8" and self.scheme != "block" else None

    def gguf_file(self, quant: str) -> GGUFFile | None:
        """The repository's file of a GGUF quant (``Q4_K_M``), or None."""
        want = quant.upper()
        return next((f for f in self.files if f.quant.upper() == want), None)


def rank_checkpoint(checkpoint: PublishedCheckpoint) -> tuple[int, int, int, int]:
    """Prefer a quant of the model itself, then the best-verified, then the model's own organisation's
    or a known publisher's, then one with a known size."""
    verified = VERIFIED_ORDER.index(checkpoint.verified) if checkpoint.verified in VERIFIED_ORDER else 99
    org = checkpoint.repo.split("/", 1)[0].lower()
    if org == checkpoint.base_model.split("/", 1)[0].lower():
        publisher = -1
    else:
        publisher = KNOWN_PUBLISHERS.index(org) if org in KNOWN_PUBLISHERS else len(KNOWN_PUBLISHERS)
    return (int(checkpoint.stands_in), verified, publisher, int(checkpoint.size_bytes is None))


def checkpoint_for(
    method: str, checkpoints: Iterable[PublishedCheckpoint], *, bits: int | None = None, gguf_quant: str | None = None
) -> PublishedCheckpoint | None:
    """The best published checkpoint for a precision's ``method`` (``awq``, ``fp8``, ``gguf``…).

    ``bits`` narrows formats that come in several widths (GPTQ int4 vs int8); ``gguf_quant``
    asks for a GGUF repository holding that quant. None when nothing matches.
    """
    formats = FORMATS_FOR_METHOD.get(method, ())
    matches = [
        c
        for c in checkpoints
        if c.format in formats
        and (bits is None or c.bits is None or c.bits == bits)
        and (gguf_quant is None or c.gguf_file(gguf_quant) is not None)
    ]
    return min(matches, key=rank_checkpoint) if matches else None


#: how a launch command's placeholder for weights nobody publishes ends (:func:`placeholder_ref`)
UNPUBLISHED_MARK = ": no published checkpoint known>"
#: what a launch command's placeholder for weights that must be converted to a GGUF first says
CONVERT_MARK = " GGUF (convert_hf_to_gguf.py"


def placeholder_ref(label: str, base_repo: str) -> str:
    """What a launch command names when no checkpoint of ``label`` is known: visible, never runnable."""
    return f"<{_unbracketed(base_repo)} at {label}{UNPUBLISHED_MARK}"


def convert_ref(quant: str, base_repo: str) -> str:
    """What a llama.cpp launch names for weights it loads only once converted to a ``quant`` GGUF, with the
    steps: the converter alone for a type it writes (``F16``, ``BF16``: ``--outtype f16``), else the converter
    then ``llama-quantize`` to the type."""
    gguf_type = quant.upper().replace("FP", "F")  # a float named as explorer names it: fp16 → F16
    if gguf_type in CONVERTER_TYPES:
        steps = f" --outtype {gguf_type.lower()}"
    else:
        steps = f", then llama-quantize to {gguf_type}"
    return f"<{_unbracketed(base_repo)} converted to a {gguf_type}{CONVERT_MARK}{steps})>"


def _unbracketed(ref: str) -> str:
    """A reference that is itself a placeholder (``<the folder with …>``) without its brackets, to nest it."""
    return ref[1:-1] if ref.startswith("<") and ref.endswith(">") else ref


def loads_published_weights(command: str) -> bool:
    """Whether a launch command runs as printed: it names no weights that someone must first make
    (:func:`placeholder_ref`, :func:`convert_ref`)."""
    return UNPUBLISHED_MARK not in command and CONVERT_MARK not in command


def checkpoint_record(checkpoint: PublishedCheckpoint) -> dict:
    """A checkpoint as a plain dict (the shipped list's and the cache's form)."""
    return {
        "repo": checkpoint.repo,
        "base_model": checkpoint.base_model,
        "format": checkpoint.format,
        "bits": checkpoint.bits,
        "size_bytes": checkpoint.size_bytes,
        "files": [{"name": f.name, "quant": f.quant, "size_bytes": f.size_bytes} for f in checkpoint.files],
        "stands_in": checkpoint.stands_in,
        "verified": checkpoint.verified,
        **({"scheme": checkpoint.scheme} if checkpoint.scheme != "block" else {}),
    }


def checkpoint_from_record(record: dict, *, source: str, stands_in: bool | None = None) -> PublishedCheckpoint:
    """A checkpoint from its plain-dict form; ``stands_in`` overrides the record's own flag.

    Raises:
        ValueError: the record lacks its repo, base model or format, a size is not a whole number, or it states
            a scheme that is not one of :data:`FP8_SCHEMES` of an fp8 checkpoint.
    """
    repo, base, fmt = record.get("repo"), record.get("base_model"), record.get("format")
    if not (isinstance(repo, str) and isinstance(base, str) and fmt in FORMATS):
        raise ValueError(f"a checkpoint record needs repo, base_model and a known format: {record!r:.200}")
    scheme = record.get("scheme") or "block"
    if scheme not in FP8_SCHEMES or (scheme != "block" and fmt != "fp8"):
        raise ValueError(
            f"{repo}: scheme {scheme!r} is not an fp8 scheme ({', '.join(FP8_SCHEMES)}) of an fp8 checkpoint"
        )
    files = tuple(
        GGUFFile(name=str(f["name"]), quant=str(f["quant"]), size_bytes=_size(f.get("size_bytes")))
        for f in record.get("files") or ()
    )
    return PublishedCheckpoint(
        repo=repo,
        base_model=base,
        format=fmt,
        bits=record.get("bits") if isinstance(record.get("bits"), int) else None,
        size_bytes=_size(record.get("size_bytes")),
        files=files,
        stands_in=bool(record.get("stands_in")) if stands_in is None else stands_in,
        verified=record.get("verified") if record.get("verified") in VERIFIED_ORDER else "name-only",
        source=source,
        scheme=scheme,
    )


def _size(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"a size in bytes is a whole number >= 0, not {value!r}")
    return value or None
