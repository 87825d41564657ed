"""The shipped snapshot: what explorer knows about popular models with no network at all.

``data/snapshot.json`` (see ``data/snapshot.md``) holds, per Hub repository,
its config.json (and quantisation companions), the files it offers with their
sizes, and where each size came from. :func:`load_snapshot` reads it once per
process; ``$EXPLORER_SNAPSHOT`` points at another file (one written by
``explorer snapshot refresh --out``).

A GGUF repository without a config names the repository whose config
describes its architecture in ``base_model``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explorer.errors import ExplorerError, SnapshotError
from explorer.memo import memo
from explorer.model.artifacts import Artifact
from explorer.model.shapes import ModelShape, shape_from_config
from explorer.sources.regular_file import read_capped

#: the largest snapshot file read, and the most its gzip form may decompress to (the shipped one is ~190 kB)
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024

__all__ = ["SNAPSHOT_FORMAT", "Snapshot", "SnapshotEntry", "default_snapshot_path", "load_snapshot", "parse_snapshot"]

SNAPSHOT_FORMAT = "explorer-snapshot"
SNAPSHOT_VERSION = 1
_ARTIFACT_KEYS = ("name", "format", "quant", "size_bytes", "size_source", "files", "projector")


@dataclass(frozen=True, kw_only=True)
class SnapshotEntry:
    """One repository as the snapshot knows it.

    Attributes:
        repo: ``org/name``.
        family: the shape builder's family (``llama-like``, ``mla``, ``hybrid``…), for search.
        model_type: the config's ``model_type`` (a GGUF's ``general.architecture``).
        params: parameters of the model (a count), for listings.
        config: the config.json, or None for a GGUF repository.
        companions: quantisation companions (``hf_quant_config.json``…) by file name.
        base_model: for a GGUF repository, the repo whose config gives the shape.
        gguf_header: a cache-style header record (``explorer.sources.gguf_files``) when refreshed from the Hub.
        sha: the commit the facts were read at, None when seeded from fixtures.
        source: ``seed`` (from the test fixtures) or ``hub`` (by ``explorer snapshot refresh``).
        files: file path -> size in bytes, as the Hub listed them (empty when seeded).
        artifacts: offered artifacts as plain dicts, each with ``how``: where its size came from.
        notes: caveats about the entry.
    """

    repo: str
    family: str = ""
    model_type: str = ""
    params: int = 0
    config: Mapping[str, Any] | None = None
    companions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    base_model: str | None = None
    gguf_header: Mapping[str, Any] | None = None
    sha: str | None = None
    source: str = "seed"
    files: Mapping[str, int] = field(default_factory=dict)
    artifacts: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = ()

    def offered(self) -> tuple[Artifact, ...]:
        """The artifacts as :class:`Artifact` records (no GGUF headers: the snapshot keeps none)."""
        return tuple(
            Artifact(**{k: (tuple(a[k]) if k == "files" else a[k]) for k in _ARTIFACT_KEYS if k in a})
            for a in self.artifacts
        )

    def size_notes(self) -> tuple[str, ...]:
        """``"NAME: how its size was found"`` for each artifact."""
        return tuple(f"{a['name']}: {a['how']}" for a in self.artifacts if a.get("how"))

    @property
    def haystack(self) -> str:
        return f"{self.repo} {self.family} {self.model_type} {self.base_model or ''}".lower()


class Snapshot:
    """The entries of a snapshot file, by repo; shapes are built on first use and kept.

    Attributes:
        path: the file read ("" when built in memory).
        entries: repo -> entry, in the file's order.
        meta: the file's top-level fields other than ``entries``.
    """

    def __init__(self, entries: Mapping[str, SnapshotEntry], *, path: str = "", meta: Mapping[str, Any] | None = None):
        self.path = path
        self.entries = dict(entries)
        self.meta = dict(meta or {})
        self._lower = {k.lower(): k for k in self.entries}
        self._shapes: dict[str, ModelShape] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"Snapshot(path={self.path!r}, entries={len(self.entries)})"

    @property
    def repos(self) -> tuple[str, ...]:
        """Every repo id, in the file's order."""
        return tuple(self.entries)

    def get(self, repo: str) -> SnapshotEntry | None:
        """The entry of ``repo`` (Hub ids are case-insensitive), or None."""
        key = self._lower.get(repo.strip().lower())
        return None if key is None else self.entries[key]

    def shape(self, repo: str) -> ModelShape:
        """The shape of an entry: from its config, its base model's config, or its GGUF header."""
        entry = self.get(repo)
        if entry is None:
            raise SnapshotError(f"{repo} is not in the snapshot {self.path or '(in memory)'}")
        with self._lock:
            if entry.repo in self._shapes:
                return self._shapes[entry.repo]
        shape = self._build_shape(entry)
        with self._lock:
            self._shapes[entry.repo] = shape
        return shape

    def _build_shape(self, entry: SnapshotEntry) -> ModelShape:
        if entry.config is not None:
            return shape_from_config(entry.config, name=entry.repo, companions=entry.companions)
        base = self.get(entry.base_model) if entry.base_model else None
        if base is not None and base.config is not None:
            return shape_from_config(base.config, name=entry.repo, companions=base.companions)
        if entry.gguf_header is not None:
            from explorer.sources.gguf_files import header_from_record, shape_from_header

            header = header_from_record(entry.gguf_header, name=entry.repo)
            if header is not None:
                return shape_from_header(header, name=entry.repo)
        raise SnapshotError(f"the snapshot entry {entry.repo} has no config, base model or GGUF header to shape it")

    def search(self, text: str, limit: int = 20) -> list[SnapshotEntry]:
        """Entries whose repo id, family, model type or base model contain every word of ``text``.

        Case-insensitive. Exact repo matches come first, then names starting
        with the text, then the rest by repo id. An empty ``text`` lists the
        first ``limit`` entries by repo id.
        """
        words = text.lower().replace("/", " / ").split()
        query = text.strip().lower()
        hits = [e for e in self.entries.values() if all(w in e.haystack for w in words if w != "/")]

        def rank(e: SnapshotEntry) -> tuple[int, int, str]:
            repo = e.repo.lower()
            name = repo.split("/", 1)[-1]
            in_repo = -sum(w in repo for w in words)  # words found in the id beat words found in the family
            if query and repo == query:
                return 0, in_repo, repo
            if query and (name.startswith(query) or repo.startswith(query)):
                return 1, in_repo, repo
            if query and query in repo:
                return 2, in_repo, repo
            return 3, in_repo, repo

        return sorted(hits, key=rank)[: max(0, limit)]


def _entry(raw: Mapping[str, Any], where: str) -> SnapshotEntry:
    try:
        return SnapshotEntry(
            repo=str(raw["repo"]),
            family=str(raw.get("family", "")),
            model_type=str(raw.get("model_type", "")),
            params=int(raw.get("params", 0)),
            config=raw.get("config"),
            companions=dict(raw.get("companions") or {}),
            base_model=raw.get("base_model"),
            gguf_header=raw.get("gguf_header"),
            sha=raw.get("sha"),
            source=str(raw.get("source", "seed")),
            files={str(k): int(v) for k, v in (raw.get("files") or {}).items()},
            artifacts=tuple(dict(a) for a in raw.get("artifacts") or ()),
            notes=tuple(raw.get("notes") or ()),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SnapshotError(f"{where}: a malformed entry {str(raw)[:80]!r} ({type(e).__name__}: {e})") from None


def parse_snapshot(doc: Mapping[str, Any], *, path: str = "") -> Snapshot:
    """A :class:`Snapshot` from the parsed JSON document."""
    if not isinstance(doc, Mapping) or doc.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError(f"{path or 'the document'} is not an explorer snapshot (no format {SNAPSHOT_FORMAT!r})")
    if doc.get("version") != SNAPSHOT_VERSION:
        raise SnapshotError(f"{path}: snapshot version {doc.get('version')!r}, this explorer reads {SNAPSHOT_VERSION}")
    entries = {}
    for raw in doc.get("entries") or ():
        entry = _entry(raw, path)
        entries[entry.repo] = entry
    return Snapshot(entries, path=path, meta={k: v for k, v in doc.items() if k != "entries"})


def default_snapshot_path() -> Path:
    """``$EXPLORER_SNAPSHOT``, else the shipped ``data/snapshot.json`` (or ``.json.gz``)."""
    if env := os.environ.get("EXPLORER_SNAPSHOT"):
        return Path(env)
    from explorer.datafiles import data_path

    plain = data_path("snapshot.json")
    return plain if plain.exists() or not data_path("snapshot.json.gz").exists() else data_path("snapshot.json.gz")


def read_snapshot_file(path: Path) -> dict[str, Any]:
    """The parsed JSON of a snapshot file (gzip when it ends in ``.gz``)."""
    raw = read_capped(path, MAX_SNAPSHOT_BYTES, "the snapshot", SnapshotError)
    try:
        if path.suffix == ".gz":
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(MAX_SNAPSHOT_BYTES + 1)
            if len(raw) > MAX_SNAPSHOT_BYTES:
                raise ValueError(f"it decompresses past {MAX_SNAPSHOT_BYTES:,} bytes")
        return json.loads(raw)
    except (OSError, ValueError, EOFError, RecursionError) as e:
        raise SnapshotError(
            f"cannot read the snapshot {path}: {e}", hint="reinstall explorer, or unset EXPLORER_SNAPSHOT"
        ) from None


@memo(8, keyed_on="the snapshot file's path and modification time (a rewritten file is read again)")
def _load(path: str, mtime_ns: int) -> Snapshot:
    return parse_snapshot(read_snapshot_file(Path(path)), path=path)


def load_snapshot(path: str | os.PathLike | None = None) -> Snapshot:
    """The snapshot at ``path`` (default: :func:`default_snapshot_path`), read once per process and file version."""
    p = Path(path) if path is not None else default_snapshot_path()
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as e:
        raise SnapshotError(f"no snapshot at {p} ({e.strerror or e})", hint="unset EXPLORER_SNAPSHOT") from None
    return _load(str(p), mtime)


def try_load_snapshot() -> tuple[Snapshot | None, str | None]:
    """(the default snapshot, None), or (None, why) when it cannot be read; for fallbacks that must not fail."""
    try:
        return load_snapshot(), None
    except ExplorerError as e:
        return None, str(e)
