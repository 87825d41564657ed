"""The planner core imports no network, database or UI code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "explorer"

#: edge modules: they may talk to the network, the cache, the disk or a UI
EDGES = {"cli", "sources", "ui", "bench", "__main__"}
FORBIDDEN = {"duckdb", "huggingface_hub", "httpx", "requests", "urllib", "socket", "marimo", "ipywidgets", "altair", "http"}


def core_modules() -> list[Path]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        top = rel.parts[0].removesuffix(".py")
        if top in EDGES:
            continue
        out.append(path)
    return sorted(out)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_no_io_or_ui(path):
    bad = {n for n in imported_modules(path) if n.split(".")[0] in FORBIDDEN}
    edge = {n for n in imported_modules(path) if n.startswith("explorer.") and n.split(".")[1] in EDGES}
    assert not bad, f"{path.name} imports {bad}"
    assert not edge, f"{path.name} imports edge modules {edge}"


def test_there_is_a_core_to_check():
    names = {p.stem for p in core_modules()}
    assert {"shapes", "kv_cache", "precision", "weights"} <= names
