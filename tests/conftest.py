"""Shared fixtures; the corpus helpers themselves live in tests/support/corpus.py."""

from __future__ import annotations

import socket

import pytest
from support.corpus import load_config

#: the local test Hub and its repos (tests/support/hub_fixtures.py), for every test module
pytest_plugins = ["support.hub_fixtures"]


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
