"""The package's layers: what each package may import, and no import cycles.

Every import form counts: ``import a.b``, ``from a import b``, relative
imports, imports inside functions, and ``importlib.import_module("...")`` /
``__import__("...")`` with a literal name. The pure core (model, gguf,
hardware, artifacts, engines, speed, plan, fleet) imports only the standard library, the
``gguf`` package, ``explorer.errors``, ``explorer.units``, ``explorer.memo``, ``explorer.limits``,
``explorer.safe_text`` and the core packages
below it. The edges (sources, ui, cli, bench) may import anything.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from support.corpus import ROOT

PACKAGE = ROOT / "explorer"

#: each core package and the core packages it may import (besides itself)
CORE_LAYERS: dict[str, frozenset[str]] = {
    "model": frozenset(),
    "gguf": frozenset({"model"}),
    "hardware": frozenset(),
    "artifacts": frozenset({"model", "gguf"}),
    "engines": frozenset({"model", "gguf", "hardware", "artifacts"}),
    "speed": frozenset({"model", "hardware", "artifacts", "engines"}),
    "plan": frozenset({"model", "gguf", "hardware", "artifacts", "engines", "speed"}),
    "fleet": frozenset({"model", "gguf", "hardware", "artifacts", "engines", "speed"}),
}
#: explorer modules every package may import
SHARED = frozenset({"explorer.errors", "explorer.units", "explorer.memo", "explorer.limits", "explorer.safe_text"})
#: third-party packages the core may import
CORE_THIRD_PARTY = frozenset({"gguf"})
#: standard-library modules the core may not use: they reach the disk, the network, or hide imports
CORE_FORBIDDEN_STDLIB = frozenset(
    {
        "importlib",
        "socket",
        "http",
        "urllib",
        "ssl",
        "subprocess",
        "sqlite3",
        "shutil",
        "tempfile",
        "asyncio",
        "multiprocessing",
        "threading",
        "concurrent",
        "io_open",
        "glob",
        "webbrowser",
        "ftplib",
        "smtplib",
    }
)
EDGES = frozenset({"sources", "ui", "cli", "bench"})


def module_name(path: Path) -> str:
    """``explorer/plan/planner.py`` → ``explorer.plan.planner`` (a package's ``__init__`` is the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, is_package: bool) -> set[str]:
    """Every module ``source`` imports, in any form, as absolute dotted names (``from a import b`` gives
    both ``a`` and ``a.b``: ``b`` may be a module)."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def all_modules() -> dict[str, Path]:
    """Every module of the package by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def violations(name: str, imported: set[str]) -> list[str]:
    """What ``name`` may not import among ``imported``; empty for edge modules."""
    parts = name.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top not in CORE_LAYERS:
        return []
    allowed_packages = CORE_LAYERS[top] | {top}
    bad = []
    for module in sorted(imported):
        root = module.split(".")[0]
        if root == "explorer":
            inner = module.split(".")
            if module == "explorer" or module in SHARED or any(module.startswith(s + ".") for s in SHARED):
                continue
            if len(inner) > 1 and inner[1] in allowed_packages:
                continue
            bad.append(module)
        elif root in CORE_THIRD_PARTY or module == "__future__":
            continue
        elif root in sys.stdlib_module_names:
            if root in CORE_FORBIDDEN_STDLIB:
                bad.append(module)
        else:
            bad.append(module)
    return bad


def _core_paths() -> list[Path]:
    return [p for n, p in all_modules().items() if len(n.split(".")) > 1 and n.split(".")[1] in CORE_LAYERS]


@pytest.mark.parametrize("path", _core_paths(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_only_what_its_layer_allows(path):
    name = module_name(path)
    bad = violations(name, imports_of(path.read_text(), name, path.name == "__init__.py"))
    assert not bad, (
        f"{name} may not import {bad} (allowed: stdlib, gguf, errors, units, {sorted(CORE_LAYERS[name.split('.')[1]])})"
    )


def test_the_checker_catches_every_import_form():
    """A deliberate duckdb / hub / ui import in a core module is reported, in each import form."""
    for source in ("import duckdb", "def f():\n    import duckdb", "from duckdb import connect",
                   "import importlib\nimportlib.import_module('explorer.sources.hub.client')",
                   "from explorer import sources", "from explorer.ui import charts", "from .. import sources",
                   "from explorer.plan.planner import plan"):  # fmt: skip
        found = imports_of(source, "explorer.engines.vllm", False)
        assert violations("explorer.engines.vllm", found), source
    assert not violations(
        "explorer.engines.vllm",
        imports_of("from explorer.model.shapes import ModelShape\nimport math", "explorer.engines.vllm", False),
    )
    assert violations(
        "explorer.model.shapes", imports_of("from explorer.engines import vllm", "explorer.model.shapes", False)
    )


def test_the_fleet_and_the_sources_import_no_plan():
    """What both need of a model's repository (its artifacts, published checkpoints, the known models) is in
    ``artifacts``: the sources feed the planner and the fleet sits beside it, so neither reaches into ``plan``."""
    reaching = {
        name: sorted(m for m in imports_of(path.read_text(), name, path.name == "__init__.py")
                     if m == "explorer.plan" or m.startswith("explorer.plan."))
        for name, path in all_modules().items()
        if name.split(".")[1:2] in (["fleet"], ["sources"])
    }  # fmt: skip
    assert not {name: found for name, found in reaching.items() if found}
    assert imports_of("from ..plan import offer", "explorer.sources.resolve", False) & {"explorer.plan"}


def test_every_core_and_edge_package_exists():
    tops = {n.split(".")[1] for n in all_modules() if n.count(".") >= 1}
    assert set(CORE_LAYERS) | EDGES <= tops
    assert not {
        t
        for t in tops
        if t.count("_")
        and t.split("_")[0]
        in ("gguf", "llamacpp", "placement", "speed", "hub", "cache", "resolve", "snapshot", "bench")
    }


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def import_graph() -> dict[str, set[str]]:
    """explorer module → the explorer modules it imports (any form, functions included)."""
    modules = all_modules()
    graph = {}
    for name, path in modules.items():
        found = imports_of(path.read_text(), name, path.name == "__init__.py")
        graph[name] = {m for m in found if m in modules and m != name and not name.startswith(m + ".")}
    return graph


def test_no_import_cycles():
    graph = import_graph()
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_finder_finds_cycles():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]
