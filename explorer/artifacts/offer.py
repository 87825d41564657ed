"""What a repository offers: its files turned into :class:`~explorer.model.artifacts.Artifact` records.

Pure: plain data in (file names with sizes, parameter counts, parsed GGUF
headers, the model's shape), artifacts out. No network, no cache.

- The original safetensors weights are one artifact: the checkpoint's weight
  files (the index's shards when known, else the top-level ``model*.safetensors``,
  else every top-level ``*.safetensors``), their sizes summed.
- Each GGUF file is one artifact, and so is each split set
  (``…-00001-of-00003.gguf`` … ``-00003-of-00003.gguf``, named by its first part).
- Projector files (``mmproj*.gguf``) are not offered as models; each model
  artifact names one in ``projector``.
- Sizes say where they came from: ``fetched`` (a real file size, from the Hub's
  listing or the local disk), ``header`` (a GGUF header's tensor bytes), or
  ``computed`` from the shape, only when no real size is known.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from explorer.artifacts.checkpoints import PublishedCheckpoint, checkpoint_for, rank_checkpoint
from explorer.artifacts.weight_formats import weight_formats
from explorer.errors import NothingToPlanError, capped_list
from explorer.gguf.header import GGUFHeader, merge_split_headers, split_parts
from explorer.gguf.quant import quant_from_filename, quant_name
from explorer.model.artifacts import ORIGINAL, Artifact
from explorer.model.conversion import native_gguf_types
from explorer.model.precision import Precision
from explorer.model.quant_config import GGUF_MIX_BITS, ONLINE_FP8
from explorer.model.shapes import ModelShape

__all__ = [
    "ALL_GPU_ONLY",
    "DEFAULT_WHAT_IFS",
    "FALLBACK_MAX_SHARE",
    "FALLBACK_WHAT_IFS",
    "all_gpu_only",
    "build_offer",
    "computed_disk_bytes",
    "fallback_artifacts",
    "gguf_sets",
    "is_projector",
    "native_gguf",
    "original_artifact",
    "original_weight_files",
    "plan_artifacts",
    "what_if_artifact",
    "what_if_artifacts",
]

#: the what-if precisions offered next to the original weights by default
DEFAULT_WHAT_IFS = ("bf16", "fp8", "int4-awq")
#: the precisions a plan falls back to when a model's own weights keep no layout on accelerators alone:
#: the two that vLLM and SGLang serve from published checkpoints (or quantise while loading), the two GGUF
#: quants llama.cpp users pick first, and Q3_K_M (:data:`ALL_GPU_ONLY`). The ranking puts the higher
#: precision first wherever both fit on as few cards
FALLBACK_WHAT_IFS = ("fp8", "int4-awq", "Q8_0", "Q4_K_M", "Q3_K_M")
#: fallbacks worth their loss of quality only when they keep every layer on the cards: Q3_K_M, the last step
#: before quality falls off (+0.66 perplexity on Llama-3-8B; Q2_K +3.5), for a card Q4_K_M overfills
#: (Gemma-4-26B on a 16 GB T4); never a reason to leave layers in host memory (405B on one H100 at 0.5 tok/s)
ALL_GPU_ONLY = frozenset({"Q3_K_M"})
#: precisions that run where a model's own fp8 / fp4 weights have no kernel (A100 and older, AMD CDNA2; NVFP4
#: before Blackwell): planned as fallbacks whatever their size (data/weight_support.md)
RUNS_WIDELY = ("int8", "bf16")
#: weight formats some cards of the catalogue have no kernels for (explorer.artifacts.weight_formats.weight_formats
#: names); MXFP4 is left out: vLLM runs it weight-only from Ampere, and gpt-oss has no int8 or bf16 release
KERNEL_LIMITED = frozenset({"fp8", "fp8-block", "nvfp4"})
#: the largest share of the model's own size a fallback precision may keep (bf16 → fp8 keeps about 0.5)
FALLBACK_MAX_SHARE = 0.75

_HF_WEIGHTS = re.compile(r"^model(-\d{5}-of-\d{5})?\.safetensors$")
#: projector quants in order of preference when a repo ships several (llama.cpp loads F16 by default)
_PROJECTOR_PREFERENCE = ("F16", "BF16", "F32", "Q8_0")


def is_projector(path: str) -> bool:
    """Whether a ``.gguf`` file is a multimodal projector (``mmproj-…``), not a model."""
    return "mmproj" in path.rsplit("/", 1)[-1].lower()


def original_weight_files(files: Mapping[str, int], shards: Iterable[str] | None = None) -> list[str]:
    """The files of the safetensors checkpoint, sorted.

    ``shards`` (the index's weight files, when read) wins; else the top-level
    ``model.safetensors`` / ``model-0000i-of-0000n.safetensors``; else every
    top-level ``*.safetensors`` (a repo may also hold ``consolidated.safetensors``
    or per-variant folders, which are not the transformers checkpoint).
    """
    if shards:
        return sorted(set(shards))
    top = [p for p in files if p.endswith(".safetensors") and "/" not in p]
    hf = [p for p in top if _HF_WEIGHTS.match(p)]
    return sorted(hf or top)


def computed_disk_bytes(shape: ModelShape, precision: Any = None) -> int:
    """Bytes a checkpoint of ``shape`` at ``precision`` takes on disk: what an engine
    loads plus the multi-token-prediction layers, which checkpoints store too."""
    from explorer.model.weights import weight_breakdown

    breakdown = weight_breakdown(shape, shape.resolve_precision(precision))
    return breakdown.total_bytes + breakdown.mtp_bytes


def gguf_sets(paths: Iterable[str]) -> list[tuple[str, ...]]:
    """Model GGUF files grouped into sets (one file, or every part of a split set), projectors left out.

    Each set is sorted (first part first); sets are in name order.
    """
    sets: dict[tuple[str, int] | str, list[str]] = {}
    for p in paths:
        if not p.lower().endswith(".gguf") or is_projector(p):
            continue
        parts = split_parts(p)
        folder = p.rsplit("/", 1)[0] + "/" if "/" in p else ""
        key: tuple[str, int] | str = p if parts is None else (folder + parts[0], parts[2])
        sets.setdefault(key, []).append(p)
    return sorted((tuple(sorted(v)) for v in sets.values()), key=lambda s: s[0])


def _pick_projector(projectors: list[str], model_path: str) -> str | None:
    if not projectors:
        return None
    folder = model_path.rsplit("/", 1)[0] if "/" in model_path else ""
    near = [p for p in projectors if (p.rsplit("/", 1)[0] if "/" in p else "") == folder] or projectors
    for quant in _PROJECTOR_PREFERENCE:
        for p in near:
            if (quant_from_filename(p) or "") == quant:
                return p
    return min(near)


def _known(files: Mapping[str, int], names: Iterable[str]) -> int | None:
    """The summed size of ``names``, or None when any is missing or unknown (0)."""
    total = 0
    for n in names:
        size = files.get(n)
        if not size or size <= 0:
            return None
        total += int(size)
    return total


def _gguf_artifact(
    parts: tuple[str, ...], files: Mapping[str, int], headers: Mapping[str, Any], shape: ModelShape | None
) -> Artifact | None:
    first = parts[0]
    header: GGUFHeader | None = None
    if len(parts) == 1:
        header = headers.get(first)
    elif all(p in headers for p in parts):
        header = merge_split_headers([headers[p] for p in parts])
    named_by = header or headers.get(first)  # a first part's header still names the quant
    quant = quant_name(named_by, first).name if named_by is not None else quant_from_filename(first) or "unknown"
    size = _known(files, parts)
    source = "fetched"
    if size is None and header is not None:
        size, source = header.header_bytes + header.tensor_bytes_total, "header"
    if size is None:
        if shape is None or quant.upper() not in GGUF_MIX_BITS:
            return None
        size, source = shape.weight_bytes(quant.upper()), "computed"
    return Artifact(
        name=first, format="gguf", quant=quant, size_bytes=size, size_source=source, files=parts, gguf_header=header
    )  # type: ignore[arg-type]


def build_offer(
    files: Mapping[str, int],
    *,
    shape: ModelShape | None = None,
    params_by_dtype: Mapping[str, int] | None = None,
    shards: Iterable[str] | None = None,
    gguf_headers: Mapping[str, Any] | None = None,
    has_config: bool | None = None,
    where: str = "the repository",
) -> tuple[Artifact, ...]:
    """The artifacts a repository (or a local folder) offers.

    Args:
        files: every file's path -> size in bytes (0 or missing: unknown).
        shape: the model's shape; needed for the original weights' precision and
            for computed sizes.
        params_by_dtype: parameters per safetensors dtype, from the weight headers.
        shards: the checkpoint's weight files named by its index, when read.
        gguf_headers: GGUF file -> parsed header (a split set's parts each, or only its first).
        has_config: whether a config.json is there (default: listed in ``files``);
            with a shape and no safetensors files the original weights are still
            offered, sized ``computed``.
        where: names the repository in errors.

    Raises:
        NothingToPlanError: neither a config (shape) nor a GGUF file.
    """
    headers = dict(gguf_headers or {})
    has_config = ("config.json" in files) if has_config is None else has_config
    sets = gguf_sets(files)
    if not sets and not (has_config and shape is not None):
        raise NothingToPlanError(
            f"{where} has neither a config.json nor a GGUF model file ({len(files)} files: "
            f"{capped_list(sorted(files)) or 'none'})",
            hint="pick the repo that holds the weights, or pass a local config.json or .gguf path",
        )
    out: list[Artifact] = []
    weights = original_weight_files(files, shards)
    if (weights or has_config) and (original := _original(files, weights, shape, params_by_dtype)) is not None:
        out.append(original)
    projectors = [p for p in files if p.lower().endswith(".gguf") and is_projector(p)]
    gguf = [a for parts in sets if (a := _gguf_artifact(parts, files, headers, shape)) is not None]
    gguf.sort(key=lambda a: (-a.size_bytes, a.name))
    for a in gguf:
        projector = _pick_projector(projectors, a.name)
        out.append(a if projector is None else _with(a, projector=projector))
    return tuple(out)


def _original(files: Mapping[str, int], weights: list[str], shape: ModelShape | None,
              params_by_dtype: Mapping[str, int] | None) -> Artifact | None:  # fmt: skip
    by_dtype = dict(params_by_dtype or {})
    if shape is not None:
        quant = shape.precision.name
    elif by_dtype:
        quant = max(by_dtype, key=lambda k: by_dtype[k]).lower()
    else:
        quant = "unknown"
    size = _known(files, weights) if weights else None
    if size is not None:
        return Artifact(
            name=ORIGINAL,
            format="safetensors",
            quant=quant,
            size_bytes=size,
            size_source="fetched",
            files=tuple(weights),
            params_by_dtype=by_dtype,
        )
    if shape is None:  # no real size and nothing to compute one from
        return None
    return Artifact(
        name=ORIGINAL,
        format="safetensors",
        quant=quant,
        size_bytes=computed_disk_bytes(shape),
        size_source="computed",
        files=tuple(weights),
        params_by_dtype=by_dtype,
    )


def _with(a: Artifact, **changes: Any) -> Artifact:
    return replace(a, **changes)


def original_artifact(shape: ModelShape) -> Artifact:
    """The checkpoint's own weights when no file listing is known: sized from the shape (``computed``)."""
    return Artifact(
        name=ORIGINAL,
        format="safetensors",
        quant=shape.precision.name,
        size_bytes=computed_disk_bytes(shape),
        size_source="computed",
    )


def what_if_artifact(shape: ModelShape, name: str, checkpoints: Iterable[PublishedCheckpoint] = ()) -> Artifact:
    """The model at another precision: a published checkpoint of it when one is known, else a what-if.

    A precision the checkpoint already ships gives the original artifact, but float32: asked for, it is the
    ``--dtype float32`` vLLM and SGLang need to keep a float32 checkpoint so. With a
    published checkpoint of the precision (``checkpoints``: the model's quantised
    repositories, see :mod:`explorer.artifacts.checkpoints`) the artifact names that
    repository (``repo``) and its real size; without one it is sized from the shape
    and its ``note`` says that none is known. An fp8 what-if nobody publishes is what vLLM's and SGLang's
    ``--quantization fp8`` make while loading: one scale a tensor (:data:`~explorer.model.quant_config.ONLINE_FP8`),
    not the 128 × 128 blocks of the published fp8 checkpoints; a published fp8 checkpoint of another scheme
    (:attr:`~explorer.artifacts.checkpoints.PublishedCheckpoint.scheme`: NVIDIA's ModelOpt per-tensor, Meta's FBGEMM
    per-channel…) is sized and labelled as that scheme.
    """
    precision = shape.resolve_precision(name)
    own = precision is shape.precision or precision.name == shape.precision.name
    if own and precision.name != "fp32":  # float32 kept is a --dtype: vLLM and SGLang load it at 16 bits at auto
        return original_artifact(shape)
    gguf = precision.method == "gguf"
    published = checkpoint_for(
        precision.method,
        checkpoints,
        bits=None if gguf else int(precision.nominal_bits),
        gguf_quant=precision.name if gguf else None,
    )
    if published is not None:
        if published.what_if_name:  # an fp8 checkpoint of another scheme than the blocks: sized and labelled so
            precision = shape.resolve_precision(published.what_if_name)
        return _published_artifact(shape, precision, published)
    if precision.method == "fp8" and precision.source == "what-if":  # none published: the engine quantises it
        precision = shape.resolve_precision(ONLINE_FP8)
    computed = shape.weight_bytes(precision) if gguf else computed_disk_bytes(shape, precision)
    return Artifact(
        name=precision.name if gguf else ORIGINAL,
        format="gguf" if gguf else "safetensors",
        quant=precision.name,
        size_bytes=computed,
        size_source="computed",
        what_if=True,
        note=_kept_note(shape.name) if own else _unpublished_note(precision.name, precision.method, shape.name),
    )


def _published_artifact(shape: ModelShape, precision: Precision, published: PublishedCheckpoint) -> Artifact:
    """A published checkpoint as an artifact: its repository, its real size when known."""
    note = (
        f"{published.repo} quantises {published.base_model}, which stands in for {shape.name} (same shapes)"
        if published.stands_in
        else ""
    )
    if precision.method == "gguf":
        file = published.gguf_file(precision.name)
        assert file is not None  # checkpoint_for asked for this quant
        size = file.size_bytes
        return Artifact(
            name=file.name,
            format="gguf",
            quant=precision.name,
            size_bytes=size if size else shape.weight_bytes(precision),
            size_source="fetched" if size else "computed",
            files=(file.name,),
            what_if=True,
            repo=published.repo,
            note=note,
        )
    size = published.size_bytes
    return Artifact(
        name=published.repo,
        format="safetensors",
        quant=precision.name,
        size_bytes=size if size else computed_disk_bytes(shape, precision),
        size_source="fetched" if size else "computed",
        what_if=True,
        repo=published.repo,
        note=note,
    )


def _kept_note(model: str) -> str:
    """What the float32 what-if of a float32 checkpoint means: its own weights, kept at float32."""
    return (
        f"{model}'s own float32 weights kept at float32 (vLLM and SGLang: --dtype float32; llama.cpp: "
        "convert_hf_to_gguf.py --outtype f32; their defaults load or write 16 bits)"
    )


def _unpublished_note(label: str, method: str, model: str) -> str:
    """What a what-if without a published checkpoint means for the user."""
    if method == "fp8":
        return (
            f"no published fp8 checkpoint of {model} known: vLLM and SGLang quantise it while loading "
            "(--quantization fp8: fp8 weights with one scale a tensor)"
        )
    if method == "bitsandbytes":
        return f"no published {label} checkpoint of {model} known: vLLM quantises it while loading"
    if method == "none":  # another float (fp16 of a bf16 model): a cast, not a quantisation
        outtype = label.replace("fp", "f")  # fp16 → f16, bf16 → bf16, fp32 → f32
        return (
            f"no published {label} checkpoint of {model} known: a cast of its own weights "
            f"(llama.cpp: convert_hf_to_gguf.py --outtype {outtype})"
        )
    return f"no published {label} checkpoint of {model} known: quantise it yourself"


def what_if_artifacts(
    shape: ModelShape, names: Iterable[str] = DEFAULT_WHAT_IFS, checkpoints: Iterable[PublishedCheckpoint] = ()
) -> tuple[Artifact, ...]:
    """The model at other precisions (``what_if=True``): published checkpoints where known.

    Names are :func:`explorer.model.quant_config.what_if_precision` names (``bf16``,
    ``fp8``, ``int4-awq``, ``int4-gptq``, ``nf4``…); one the checkpoint already
    ships (same label) is left out.
    """
    known = tuple(checkpoints)
    out: list[Artifact] = []
    seen = {shape.precision.name}
    for name in names:
        artifact = what_if_artifact(shape, name, known)
        if artifact.quant in seen:
            continue
        seen.add(artifact.quant)
        out.append(artifact)
    return tuple(out)


def fallback_artifacts(
    shape: ModelShape, offered: Iterable[Artifact], checkpoints: Iterable[PublishedCheckpoint] = ()
) -> tuple[Artifact, ...]:
    """:data:`FALLBACK_WHAT_IFS` as artifacts (published checkpoints where known) that make the weights
    clearly smaller: at most :data:`FALLBACK_MAX_SHARE` of the smallest ``offered`` artifact, and not a
    precision already offered (a GGUF repository's own Q4_K_M stays the one planned). gpt-oss-120b's
    MXFP4 experts (60.8 GiB) get none: int4 AWQ would save 4 %, not a change an engineer would make.

    A model whose own weights are fp8 or NVFP4 (formats some cards have no kernels for) also gets
    :data:`RUNS_WIDELY` (int8, bf16: published conversions where known) whatever their size: DeepSeek-R1 on
    A100s with SGLang runs a BF16 conversion or an INT8 checkpoint, not its block-FP8 original."""
    offered = list(offered)
    known = tuple(checkpoints)
    have = {artifact.quant.upper() for artifact in offered}
    smallest = min((a.size_bytes for a in offered), default=shape.weight_bytes(shape.precision))
    smaller = tuple(
        artifact
        for artifact in what_if_artifacts(shape, FALLBACK_WHAT_IFS, known)
        if artifact.quant.upper() not in have and _worth_planning(artifact, smallest)
    )
    if not KERNEL_LIMITED & set(weight_formats(shape.precision)):
        return smaller
    # fp8 / fp4 originals: an engine without their kernels on the cluster's cards runs int8 or a bf16 conversion
    wider = tuple(a for a in what_if_artifacts(shape, RUNS_WIDELY, known) if a.quant.upper() not in have)
    return smaller + tuple(a for a in wider if a not in smaller)


def _worth_planning(artifact: Artifact, smallest: int) -> bool:
    """Whether a fallback precision makes the weights small enough to plan: at most :data:`FALLBACK_MAX_SHARE`
    of the smallest offered artifact, or, for the last-resort precisions (:data:`ALL_GPU_ONLY`, which the planner
    keeps only where they put every layer on the cards), any size below it. Kimi-K2.5's Q3_K_M (467.5 GiB, 0.84
    of its int4 original) holds it on 7 H100s where its int4 weights leave 14 layers in host memory."""
    if artifact.size_bytes <= smallest * FALLBACK_MAX_SHARE:
        return True
    return artifact.quant.upper() in ALL_GPU_ONLY and artifact.size_bytes < smallest


def native_gguf(shape: ModelShape, checkpoints: Iterable[PublishedCheckpoint]) -> Artifact | None:
    """The best published GGUF file (:func:`~explorer.artifacts.checkpoints.checkpoint_for`'s ranking) of a type
    that holds the model's own weights as they are (:func:`~explorer.model.conversion.native_gguf_types`:
    ggml-org's ``gpt-oss-20b-MXFP4.gguf`` for gpt-oss-20b, a BF16 GGUF of a bf16 model), as part of the model's
    offer (``what_if=False``): llama.cpp loads it where it would otherwise convert the weights first. A stand-in's
    (the Instruct model's for a base id) is other weights, so not offered here; None when none is published."""
    found = []
    for gguf_type in sorted(native_gguf_types(shape)):
        published = checkpoint_for("gguf", (c for c in checkpoints if not c.stands_in), gguf_quant=gguf_type)
        if published is not None:
            found.append((published, published.gguf_file(gguf_type)))
    if not found:
        return None
    published, file = min(found, key=lambda pair: rank_checkpoint(pair[0]))
    assert file is not None  # checkpoint_for asked for this type
    return Artifact(
        name=file.name,
        format="gguf",
        quant=file.quant,
        size_bytes=file.size_bytes or computed_disk_bytes(shape),
        size_source="fetched" if file.size_bytes else "computed",
        files=(file.name,),
        repo=published.repo,
        note=f"{published.repo} publishes {shape.name or 'the model'}'s own weights as this GGUF",
    )


def all_gpu_only(artifact: Artifact) -> bool:
    """Whether a fallback ``artifact`` is planned only where it keeps every layer on the cards (:data:`ALL_GPU_ONLY`)."""
    return artifact.what_if and artifact.quant.upper() in ALL_GPU_ONLY


def plan_artifacts(
    shape: ModelShape,
    offered: Iterable[Artifact],
    *,
    quant: str | None = None,
    selected: Artifact | None = None,
    checkpoints: Iterable[PublishedCheckpoint] = (),
) -> list[Artifact]:
    """The artifacts a plan considers.

    A file the user named (``org/name:FILE.gguf``, a local .gguf) alone; else,
    with ``quant``, the offered artifact of that quant or the original weights
    at it (a published checkpoint of it when ``checkpoints`` has one, else a
    what-if); else everything the repository offers (the original
    weights computed from the shape when it lists none), with a published GGUF of its own weights
    (:func:`native_gguf`) beside them.
    """
    offered = list(offered)
    if selected is not None:
        return [selected]
    if not quant and offered and not any(a.format == "gguf" for a in offered):
        published = native_gguf(shape, checkpoints)
        offered += [published] if published is not None else []
    if quant:
        wanted = quant.upper().replace("-", "_")
        for artifact in offered:
            if artifact.format == "gguf" and artifact.quant.upper() == wanted:
                return [artifact]
        return [what_if_artifact(shape, quant, checkpoints)]
    return offered or [original_artifact(shape)]
