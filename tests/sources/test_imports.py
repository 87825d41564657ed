"""Imports in explorer.sources (and the CLI over it) point one way: no cycle, function-level imports included.

The graph is read from the source with ``ast``: every ``import`` and
``from ... import`` anywhere in a module (inside functions too, where a
deferred import would hide a cycle from the interpreter) is an arrow from that
module to the module it names (``from pkg import mod`` names ``pkg.mod``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.corpus import ROOT

PACKAGE = ROOT / "explorer"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The explorer modules ``path`` imports anywhere in its body."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in modules else base)
    return {m for m in out if m in modules and m != this}


def graph(prefixes: tuple[str, ...]) -> dict[str, set[str]]:
    modules = all_modules()
    inside = {m: p for m, p in modules.items() if m.startswith(prefixes)}
    return {m: {t for t in imports_of(p, modules) if t in inside} for m, p in inside.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``g`` as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(g[m]):
            if state.get(t) == 1:
                return stack[stack.index(t) :] + [t]
            if t not in state and (found := visit(t)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state and (found := visit(m)):
            return found
    return None


@pytest.mark.parametrize("prefixes", [("explorer.sources",), ("explorer.cli",), ("explorer.sources", "explorer.cli")],
                         ids=lambda p: "+".join(p))  # fmt: skip
def test_no_import_cycle(prefixes):
    cycle = find_cycle(graph(prefixes))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_walk_sees_function_level_and_from_package_imports(tmp_path):
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    modules = all_modules()
    # sources.from_hub imports the snapshot reader inside a function
    assert "explorer.sources.snapshot.read" in imports_of(modules["explorer.sources.from_hub"], modules)


def test_hub_modules_have_no_module_getattr():
    for name, path in all_modules().items():
        if name.startswith("explorer.sources"):
            tree = ast.parse(path.read_text())
            defs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert "__getattr__" not in defs, f"{name} defines a module __getattr__"
