"""Building and refreshing the shipped snapshot (``data/snapshot.json``).

Two ways in:

- :func:`refresh` re-reads repositories from the Hub with
  :func:`explorer.sources.hub.many.fetch_many` (a bounded pool) and writes their entries,
  with real file sizes (``fetched``), over the existing file;
- :func:`seed` builds entries from a folder of real config.json files (the
  test corpus: ``explorer snapshot seed --configs tests/data/configs``), for
  machines that never reached the Hub: sizes are the index's ``total_size``
  where a fixture has one (``fetched``), else computed from the shape.

Every artifact records ``how`` its size was found; ``data/snapshot.md`` says
what the shipped file holds.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from explorer.artifacts.offer import build_offer, computed_disk_bytes
from explorer.datafiles import data_path
from explorer.errors import ExplorerError, SnapshotError
from explorer.limits import load_json
from explorer.model.artifacts import Artifact
from explorer.model.quant_config import GGUF_MIX_BITS
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.sources.shipped import read_user_text
from explorer.sources.snapshot.read import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
    default_snapshot_path,
    read_snapshot_file,
)

__all__ = ["GGUF_SEEDS", "SEED_QUANTS", "SEED_SKIP", "entry_from_fetch", "refresh", "seed", "write_snapshot"]

#: fixture configs left out of the seed, and why
SEED_SKIP = {
    "derived__EXAONE-4.0-1.2B-compressed-tensors-w4a16": "a third-party quantised re-save; its repo is not known",
    "derived__Llama-3.1-8B-Instruct-bnb-int8": "a third-party bitsandbytes re-save, not the repo's own config",
    "TheBloke__WizardCoder-15B-1.0-GPTQ": "its GPTQ settings live in quantize_config.json, which the corpus lacks",
}
#: fixture configs that are third-party re-saves: the quantisation block is dropped to describe the original
SEED_UNQUANTISE = {"derived__Molmo-7B-D-bnb-nf4"}

#: GGUF repositories seeded without ever seeing them: (repo, base model in the snapshot, file name pattern)
GGUF_SEEDS = (
    (
        "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
        "meta-llama/Meta-Llama-3.1-8B",
        "Meta-Llama-3.1-8B-Instruct-{q}.gguf",
    ),
    ("bartowski/Qwen2.5-7B-Instruct-GGUF", "Qwen/Qwen2.5-7B", "Qwen2.5-7B-Instruct-{q}.gguf"),
    ("Qwen/Qwen3-8B-GGUF", "Qwen/Qwen3-8B", "Qwen3-8B-{q}.gguf"),
    ("TheBloke/Mistral-7B-v0.1-GGUF", "mistralai/Mistral-7B-v0.1", "mistral-7b-v0.1.{q}.gguf"),
    ("bartowski/gemma-2-9b-it-GGUF", "google/gemma-2-9b-it", "gemma-2-9b-it-{q}.gguf"),
    ("TheBloke/Llama-2-7B-Chat-GGUF", "meta-llama/Llama-2-7b-hf", "llama-2-7b-chat.{q}.gguf"),
    ("unsloth/Qwen3-30B-A3B-GGUF", "Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B-{q}.gguf"),
)
SEED_QUANTS = ("Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")


def _artifact_dict(a: Artifact, how: str) -> dict[str, Any]:
    d = {
        "name": a.name,
        "format": a.format,
        "quant": a.quant,
        "size_bytes": a.size_bytes,
        "size_source": a.size_source,
        "files": list(a.files),
        "how": how,
    }
    if a.projector:
        d["projector"] = a.projector
    return d


def _shape_fields(shape: ModelShape) -> dict[str, Any]:
    return {"family": shape.family, "model_type": shape.model_type, "params": shape.params}


# --- seeding from a config corpus --------------------------------------------------------------


#: the provenance CSV's columns seed reads
PROVENANCE_COLUMNS = ("file", "hf_model_id", "source_repo", "source_path", "commit")


def _provenance(path: Path) -> dict[str, dict[str, str]]:
    """file -> its provenance row; SnapshotError for a file that cannot be read or lacks a column."""
    text = read_user_text(path, "the provenance CSV", SnapshotError)
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise SnapshotError(f"the provenance CSV {path} is not CSV: {e}") from None
    missing = [c for c in PROVENANCE_COLUMNS if rows and c not in rows[0]] if rows else list(PROVENANCE_COLUMNS)
    if missing:
        raise SnapshotError(f"the provenance CSV {path} lacks the column(s) {', '.join(missing)}")
    return {row["file"]: {k: v or "" for k, v in row.items() if isinstance(k, str)} for row in rows}


def _read_json(path: Path, what: str) -> Any:
    return load_json(read_user_text(path, what, SnapshotError), where=f"{what} {path}", error=SnapshotError)


def _repo_id(hf_model_id: str) -> str:
    return hf_model_id.split("[", 1)[0].split(" (", 1)[0].strip()


def _computed_how(shape: ModelShape) -> str:
    mtp = sum(t.elements for t in shape.mtp)
    extra = f" + {mtp:,} MTP parameters" if mtp else ""
    return f"computed: the shape's weights at {shape.precision.name}{extra}; no file listing seen"


def seed(configs: Path, provenance: Path, *, indexes: Path | None = None,
         gguf_seeds: Iterable[tuple[str, str, str]] = GGUF_SEEDS) -> dict[str, Any]:  # fmt: skip
    """A snapshot document from a folder of real config.json files named ``org__name.json``.

    ``provenance`` (CSV: ``file,hf_model_id,source_repo,source_path,commit,…``)
    gives each file's Hub id and source; ``indexes`` holds
    ``org__name.model.safetensors.index.json`` files whose ``metadata.total_size``
    sizes the original weights.
    """
    if not configs.is_dir():
        raise SnapshotError(f"--configs {configs} is not a folder", hint="give the folder of org__name.json configs")
    if indexes is not None and not indexes.is_dir():
        raise SnapshotError(f"--indexes {indexes} is not a folder")
    rows = _provenance(provenance)
    entries: list[dict[str, Any]] = []
    shapes: dict[str, ModelShape] = {}
    for path in sorted(configs.glob("*.json")):
        row = rows.get(f"configs/{path.name}")
        if path.stem in SEED_SKIP or "hf_quant_config" in path.name or row is None:
            continue
        config = _read_json(path, "the config")
        if not isinstance(config, dict):
            raise SnapshotError(f"the config {path} holds a JSON {type(config).__name__}, not an object")
        notes = [f"config.json as published in {row['source_repo']}@{row['commit'][:12]} ({row['source_path']})"]
        if row.get("notes"):
            notes.append(f"corpus note: {row['notes'][:300]}")
        if path.stem in SEED_UNQUANTISE:
            config.pop("quantization_config", None)
            notes.append("the corpus copy is a third-party quantised re-save; its quantization_config was dropped")
        companions = {}
        if (companion := configs / f"{path.stem}.hf_quant_config.json").is_file():
            companions["hf_quant_config.json"] = _read_json(companion, "the quantisation config")
        repo = _repo_id(row["hf_model_id"])
        shape = shapes[repo] = shape_from_config(config, name=repo, companions=companions)
        artifact = _seed_original(shape, indexes, path.stem, rows)
        entries.append(
            {
                "repo": repo,
                **_shape_fields(shape),
                "source": "seed",
                "sha": None,
                "config": config,
                "companions": companions,
                "files": {},
                "artifacts": [artifact],
                "notes": notes,
            }
        )
    for repo, base, pattern in gguf_seeds:
        shape = shapes[base]
        artifacts = [
            {
                "name": pattern.format(q=q),
                "format": "gguf",
                "quant": q,
                "size_bytes": shape.weight_bytes(q),
                "size_source": "computed",
                "files": [pattern.format(q=q)],
                "how": (
                    f"computed: {shape.params:,} parameters at {GGUF_MIX_BITS[q]} bits a weight on average"
                    " (explorer.model.quant_config.GGUF_MIX_BITS); the file itself not seen"
                ),
            }
            for q in SEED_QUANTS
        ]
        entries.append(
            {
                "repo": repo,
                **_shape_fields(shape),
                "source": "seed",
                "sha": None,
                "config": None,
                "base_model": base,
                "files": {},
                "artifacts": artifacts,
                "notes": [
                    (
                        f"GGUF repository: architecture from {base}'s config.json; file names follow"
                        " the publisher's naming and were not checked against the Hub"
                    )
                ],
            }
        )
    return {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "built_by": "explorer snapshot seed",
        "entries": entries,
    }


def _seed_original(shape: ModelShape, indexes: Path | None, stem: str, rows: Mapping[str, Mapping[str, str]]) -> dict:
    index = indexes / f"{stem}.model.safetensors.index.json" if indexes else None
    if index is not None and index.is_file():
        doc = _read_json(index, "the safetensors index")
        row = rows.get(f"safetensors_index/{index.name}", {})
        weight_map, meta = (doc.get("weight_map"), doc.get("metadata")) if isinstance(doc, dict) else (None, None)
        size = meta.get("total_size") if isinstance(meta, dict) else None
        if not isinstance(weight_map, dict) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise SnapshotError(f"the safetensors index {index} has no weight_map or no metadata.total_size ≥ 0")
        shards = sorted({str(v) for v in weight_map.values()})
        how = (
            f"fetched: metadata.total_size of model.safetensors.index.json from {row.get('source_repo', '?')}"
            f"@{row.get('commit', '?')[:12]} (tensor bytes; each shard's header adds a few kB)"
        )
        a = Artifact(
            name="original",
            format="safetensors",
            quant=shape.precision.name,
            size_bytes=size,
            size_source="fetched",
            files=tuple(shards),
        )
        return _artifact_dict(a, how)
    a = Artifact(
        name="original",
        format="safetensors",
        quant=shape.precision.name,
        size_bytes=computed_disk_bytes(shape),
        size_source="computed",
    )
    return _artifact_dict(a, _computed_how(shape))


# --- refreshing from the Hub -------------------------------------------------------------------


def entry_from_fetch(fetch: Any) -> dict[str, Any]:
    """A snapshot entry from a :class:`explorer.sources.hub.many.RepoFetch`."""
    from explorer.sources.facts import shape_set
    from explorer.sources.gguf_files import header_record, shape_from_header

    listing = fetch.listing
    files = {f.path: f.size_bytes for f in listing.files}
    headers = {p: dataclasses.replace(h, name=p) for p, h in fetch.gguf_headers.items()}
    companions = {k: v for k, v in fetch.configs.items() if k != "config.json"}
    entry: dict[str, Any] = {
        "repo": listing.repo_id,
        "source": "hub",
        "sha": listing.sha,
        "config": fetch.config,
        "companions": companions,
        "files": files,
        "notes": [],
    }
    shape = None
    if fetch.config is not None:
        shape = shape_from_config(fetch.config, name=listing.repo_id, companions=companions)
    else:
        from explorer.artifacts.offer import gguf_sets

        sets = [s for s in gguf_sets(files) if s[0] in headers]
        if sets:
            first = headers[shape_set(sets)[0]]
            entry["gguf_header"] = header_record(first, file_size_bytes=files.get(first.name, 0))
            entry.update(family="", model_type=first.architecture or "")
            try:
                shape = shape_from_header(first, name=listing.repo_id)
            except ExplorerError as e:
                entry["notes"].append(f"no shape yet: {e.message}")
    if shape is not None:
        entry.update(_shape_fields(shape))
    st = fetch.safetensors
    artifacts = build_offer(
        files,
        shape=shape,
        params_by_dtype=st.params_by_dtype if st else None,
        shards=list(st.files) if st else None,
        gguf_headers=headers,
        has_config=fetch.config is not None,
        where=listing.repo_id,
    )
    how = {
        "fetched": f"fetched: file sizes from the Hub listing at {listing.sha[:12]}",
        "header": "header: tensor bytes of the GGUF header",
        "computed": "computed: from the shape",
    }
    entry["artifacts"] = [_artifact_dict(a, how[a.size_source]) for a in artifacts]
    return entry


def refresh(repo_ids: Iterable[str], *, settings: Any = None, max_workers: int = 4, out: str | Path | None = None,
            base: str | Path | None = None, progress: Any = None,
            cancel: threading.Event | None = None) -> dict[str, Any]:  # fmt: skip
    """Re-read ``repo_ids`` from the Hub and write the snapshot with their new entries.

    Entries of ``base`` (default: the current snapshot) that were not asked
    for, or whose fetch failed, are kept. Writes ``out`` (default: ``base``).
    Returns ``{"path", "refreshed": [repo…], "errors": {repo: message}, "entries": n, "cancelled"}``.
    """
    from explorer.sources.hub.many import fetch_many

    base_path = Path(base) if base is not None else default_snapshot_path()
    empty = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, "entries": []}
    doc = read_snapshot_file(base_path) if base_path.exists() else empty
    result = fetch_many(repo_ids, max_workers=max_workers, settings=settings, progress=progress, cancel=cancel)
    errors = {repo: str(e) for repo, e in result.errors.items()}
    fresh: dict[str, dict[str, Any]] = {}
    for repo, fetch in result.results.items():
        try:
            fresh[repo.lower()] = entry_from_fetch(fetch)
        except ExplorerError as e:
            errors[repo] = str(e)
    entries = [fresh.pop(e["repo"].lower(), e) for e in doc.get("entries", [])] + list(fresh.values())
    path = write_snapshot({**doc, "entries": entries}, Path(out) if out is not None else base_path)
    refreshed = sorted(r for r in result.results if r not in errors)
    return {
        "path": str(path),
        "refreshed": refreshed,
        "errors": errors,
        "entries": len(entries),
        "cancelled": result.cancelled,
    }


def write_snapshot(doc: Mapping[str, Any], path: Path) -> Path:
    """Write a snapshot document: one entry a line, so that a refresh diffs by repo (gzip for ``.gz``)."""
    head = json.dumps({k: v for k, v in doc.items() if k != "entries"}, separators=(",", ":"))[:-1]
    lines = [json.dumps(e, separators=(",", ":"), allow_nan=True) for e in doc["entries"]]
    text = head + ',"entries":[\n' + ",\n".join(lines) + "\n]}\n"
    data = text.encode()
    if path.suffix == ".gz":
        import gzip

        data = gzip.compress(data, mtime=0)
    return _write_atomically(path, data, "the snapshot")


def _write_atomically(path: Path, data: bytes, what: str) -> Path:
    """Write ``data`` to ``path`` through a temporary file, so a reader sees the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as e:
        raise SnapshotError(f"cannot write {what} to {path}: {e.strerror or e}", hint="check the --out path") from None
    return path


def refresh_checkpoints(repo_ids: Iterable[str], *, settings: Any = None, out: str | Path | None = None) -> dict:
    """Re-read each model's published checkpoints from the Hub's model tree and write the shipped list.

    A model whose tree cannot be read keeps its shipped entries. Entries the
    Hub lists replace the model's old ones (verified ``hub``). Writes ``out``
    (default: ``data/checkpoints.json``). Returns ``{"path", "refreshed", "errors", "entries"}``.
    """
    from explorer.artifacts.checkpoints import checkpoint_record
    from explorer.sources.hub.tree import fetch_model_tree

    path = Path(out) if out is not None else data_path("checkpoints.json")
    doc = json.loads(data_path("checkpoints.json").read_text(encoding="utf-8"))
    kept = {e["repo"].lower(): e for e in doc["entries"]}
    refreshed, errors = [], {}
    for repo in repo_ids:
        try:
            found = fetch_model_tree(repo, settings=settings)
        except ExplorerError as e:
            errors[repo] = str(e)
            continue
        refreshed.append(repo)
        for c in found:
            record = checkpoint_record(c)
            stands_in = record.pop("stands_in")
            record["also_base_of"] = [repo] if stands_in else []
            kept[c.repo.lower()] = {**kept.get(c.repo.lower(), {}), **record, "evidence": ["the Hub's model tree"]}
    entries = sorted(kept.values(), key=lambda e: (e["base_model"].lower(), e["format"], e["repo"].lower()))
    head = json.dumps({k: v for k, v in doc.items() if k != "entries"}, separators=(",", ":"))[:-1]
    text = head + ',"entries":[\n' + ",\n".join(json.dumps(e, separators=(",", ":")) for e in entries) + "\n]}\n"
    _write_atomically(path, text.encode("utf-8"), "the checkpoint list")
    return {"path": str(path), "refreshed": refreshed, "errors": errors, "entries": len(entries)}
