"""Shared fixtures: the real config.json corpus under tests/data/configs."""

from __future__ import annotations

import json
import socket
from functools import lru_cache
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CONFIGS = DATA / "configs"


@lru_cache(maxsize=None)
def _load(name: str) -> str:
    return (CONFIGS / f"{name}.json").read_text()


def load_config(name: str) -> dict:
    """A fresh copy of a fixture config (``meta-llama__Meta-Llama-3.1-8B``)."""
    return json.loads(_load(name))


@lru_cache(maxsize=None)
def shape_of(name: str):
    """The (cached) ModelShape of a fixture config."""
    from explorer.model.shapes import shape_from_config

    return shape_from_config(load_config(name), name=name)


def all_config_names() -> list[str]:
    """Every fixture config that is a model's config.json (not a companion file)."""
    return sorted(p.stem for p in CONFIGS.glob("*.json") if "hf_quant_config" not in p.name)


@pytest.fixture
def config():
    """``config(name)`` → a fresh dict of a fixture config."""
    return load_config


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network: every connect raises; the Hub client is offline; the cache is a fresh file."""

    def refuse(*_args, **_kwargs):
        raise OSError("network blocked in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
