"""pyproject.toml declares what the code imports: explorer/ and the notebooks' third-party imports are its
dependencies, explorer/bench's are the test extra's, and nothing is declared that nothing imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: a distribution's name -> the module it installs, where they differ
MODULE_OF = {"huggingface-hub": "huggingface_hub", "ipython": "IPython"}
#: explorer's own modules and the tests' helpers (explorer/bench runs from a checkout, beside tests/)
OWN = {"explorer", "explorer_data", "support", "__future__"}


def _modules(requirements: list[str]) -> set[str]:
    names = {re.match(r"[A-Za-z0-9_.-]+", r)[0].lower() for r in requirements}
    return {MODULE_OF.get(n, n.replace("-", "_")) for n in names}


def _imports(paths) -> set[str]:
    """The top-level third-party modules the files import (any form: plain, from, inside functions)."""
    found: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in OWN}


RUNTIME = _modules(PROJECT["dependencies"])
TEST = _modules(PROJECT["optional-dependencies"]["test"])
PACKAGE = [p for p in (ROOT / "explorer").rglob("*.py") if "bench" not in p.relative_to(ROOT).parts]
BENCH = list((ROOT / "explorer" / "bench").rglob("*.py"))
NOTEBOOKS = list((ROOT / "notebooks").glob("*.py"))


def test_what_explorer_imports_is_declared():
    assert _imports(PACKAGE) == RUNTIME - {"marimo"}  # marimo: the notebooks' (the app, the lessons)
    assert "marimo" in _imports(NOTEBOOKS) and _imports(NOTEBOOKS) <= RUNTIME


def test_the_benchmarks_need_only_the_test_extra():
    assert _imports(BENCH) <= RUNTIME | TEST | {"numpy"}  # numpy: gguf-py's own dependency, the oracle's arrays


def test_gguf_py_is_only_the_tests_oracle():
    """explorer reads GGUF headers itself (a byte prefix over HTTP ranges; the browser page has no numpy)."""
    assert "gguf" not in RUNTIME and "gguf" in TEST
    assert "gguf" not in _imports(PACKAGE)
