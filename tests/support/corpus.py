"""The test corpus: real published config.json files under tests/data/configs, and the test folders."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

#: the tests folder, its data, and the repository root
TESTS = Path(__file__).resolve().parent.parent
DATA = TESTS / "data"
CONFIGS = DATA / "configs"
ROOT = TESTS.parent


@cache
def _load(name: str) -> str:
    return (CONFIGS / f"{name}.json").read_text()


def load_config(name: str) -> dict:
    """A fresh copy of a fixture config (``meta-llama__Meta-Llama-3.1-8B``)."""
    return json.loads(_load(name))


@cache
def shape_of(name: str):
    """The (cached) ModelShape of a fixture config."""
    from explorer.model.shapes import shape_from_config

    return shape_from_config(load_config(name), name=name)


def all_config_names() -> list[str]:
    """Every fixture config that is a model's config.json (not a companion file)."""
    return sorted(p.stem for p in CONFIGS.glob("*.json") if "hf_quant_config" not in p.name)
