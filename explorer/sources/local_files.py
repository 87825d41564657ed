"""A model from the local disk: a config.json (with its companion files) or a model folder, or a .gguf file.

- a ``config.json`` or model folder: the shape from the config, the offer
  from the folder's weight files (sizes read from the disk);
- a ``.gguf`` file: only its header bytes are read (a split set's sibling
  parts too, merged), the shape comes from the header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explorer.artifacts.offer import build_offer, is_projector
from explorer.errors import ConfigError
from explorer.gguf.header import split_parts
from explorer.model.config_reader import parse_config_text
from explorer.model.shapes import shape_from_config
from explorer.sources.gguf_files import read_header_file, shape_from_header, split_siblings
from explorer.sources.regular_file import read_capped
from explorer.sources.resolved import ResolvedModel
from explorer.sources.spec import ModelSpec

#: files beside config.json that change how the weights are stored
COMPANIONS = ("hf_quant_config.json", "quantize_config.json")

#: the largest config.json explorer reads (real ones are a few KB)
MAX_CONFIG_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class LocalConfig:
    """A config.json read from disk.

    Attributes:
        path: the file read.
        config: its parsed JSON.
        companions: companion files found beside it, parsed.
        name: a label for the model (the folder name, or the file's stem).
    """

    path: Path
    config: dict[str, Any]
    companions: dict[str, dict[str, Any]] = field(default_factory=dict)
    name: str = ""


def _read_json(path: Path) -> dict[str, Any]:
    return parse_config_text(read_capped(path, MAX_CONFIG_BYTES, "the config", ConfigError), where=str(path))


def read_local_config(path: str | Path) -> LocalConfig:
    """Read ``path`` (a config.json, or a folder holding one) with its companion files."""
    p = Path(path).expanduser()
    if p.is_dir():
        folder, file = p, p / "config.json"
        if not file.exists():
            raise ConfigError(f"{p} holds no config.json", hint="point at the model folder or its config.json")
        name = p.name
    elif p.exists():
        folder, file, name = p.parent, p, p.stem if p.name != "config.json" else p.parent.name
    else:
        raise ConfigError(f"{p} does not exist", hint="pass a path to a config.json, a model folder, or a .gguf file")
    config = _read_json(file)
    companions = {c: _read_json(folder / c) for c in COMPANIONS if (folder / c).is_file() and folder / c != file}
    return LocalConfig(path=file, config=config, companions=companions, name=name)


def resolve_local(spec: ModelSpec) -> ResolvedModel:
    """The model a local path names (``spec.kind`` ``config`` or ``gguf``), with what its folder offers.

    Raises:
        ConfigError, GGUFError: the file cannot be read.
    """
    return _resolve_gguf_file(spec) if spec.kind == "gguf" else _resolve_config(spec)


def _folder_files(folder: Path) -> dict[str, int]:
    try:
        return {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    except OSError:
        return {}


def _resolve_config(spec: ModelSpec) -> ResolvedModel:
    local = read_local_config(spec.path)
    shape = shape_from_config(local.config, name=local.name, companions=local.companions)
    # only a model folder's files belong to the model (a config.json lying among others does not)
    files = _folder_files(local.path.parent) if local.path.name == "config.json" else {}
    artifacts = build_offer(files, shape=shape, has_config=True, where=str(local.path.parent))
    notes = tuple(
        f"{a.label}: size computed from the shape (no weight files beside the config)"
        for a in artifacts
        if a.size_source == "computed"
    )
    return ResolvedModel(spec=spec, shape=shape, artifacts=artifacts, origin="file", notes=notes)


def _resolve_gguf_file(spec: ModelSpec) -> ResolvedModel:
    path = spec.path
    parts = split_siblings(path)
    headers = {p.name: read_header_file(p)[0] for p in parts}
    files = {p.name: p.stat().st_size for p in parts}
    for p in path.parent.glob("*.gguf"):  # a projector beside the model goes with it
        if is_projector(p.name):
            files[p.name] = p.stat().st_size
    artifacts = build_offer(files, gguf_headers=headers, has_config=False, where=str(path.parent))
    chosen = next(a for a in artifacts if path.name in a.files)
    split = split_parts(path.name)
    name = split[0] if split else path.stem
    shape = shape_from_header(chosen.gguf_header, name=name)
    span = sum(h.header_bytes for h in headers.values())
    notes = (f"read only the header ({span:,} bytes) of {sum(files[p.name] for p in parts):,} in {len(parts)} file(s)",)
    return ResolvedModel(spec=spec, shape=shape, artifacts=(chosen,), origin="file", notes=notes)
