"""Read a model's config.json (and its companion files) from the local disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError
from explorer.model.config_reader import parse_config_text
from explorer.sources.regular_file import read_capped

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
