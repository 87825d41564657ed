"""The CLI starts light: ``explorer --help`` and an offline ``shape`` of a snapshot model import no heavy library.

Each case runs the CLI in a fresh interpreter and checks ``sys.modules``
afterwards, not the time (timings are in ``docs/notes/startup.md``). A finder
placed first on ``sys.meta_path`` notes, for each heavy library, the explorer
line that first imported it, so that a failure names the culprit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: libraries that take 0.1 to 0.4 s to import and that these commands never need
HEAVY = ("duckdb", "huggingface_hub", "numpy", "gguf", "altair", "marimo", "httpx2", "tqdm", "pandas")

_RUN = """
import contextlib, io, json, sys, traceback
heavy, culprits = {heavy!r}, {{}}

class Tracer:
    # never finds anything: it only notes who asked first for a heavy library
    def find_spec(self, name, path=None, target=None):
        if name in heavy and name not in culprits:
            frames = [f for f in traceback.extract_stack() if "/explorer/" in f.filename]
            culprits[name] = [f"{{f.filename.rsplit('/explorer/', 1)[1]}}:{{f.lineno}}" for f in frames[-3:]]
        return None

sys.meta_path.insert(0, Tracer())
from explorer.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        status = main({argv!r})
    except SystemExit as e:
        status = e.code
print(json.dumps({{"status": status, "output": out.getvalue(), "modules": sorted(sys.modules), "culprits": culprits}}))
"""


def run_cli(argv: list[str], tmp_path: Path) -> dict:
    """The CLI's status, output, loaded modules and heavy imports' culprits, from a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("EXPLORER_SNAPSHOT", "HF_TOKEN")}
    env["EXPLORER_CACHE"] = str(tmp_path / "no-cache-yet" / "cache.duckdb")  # no cache file: nothing to open
    proc = subprocess.run(
        [sys.executable, "-c", _RUN.format(heavy=HEAVY, argv=argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout.splitlines()[-1])


def heavy_loaded(result: dict) -> dict[str, list[str]]:
    """Each heavy library loaded -> the explorer lines (file:line, innermost last) that imported it."""
    return {m: result["culprits"].get(m, []) for m in HEAVY if m in result["modules"]}


def test_help_imports_no_command_and_no_heavy_library(tmp_path):
    result = run_cli(["--help"], tmp_path)
    assert result["status"] == 0
    assert "shape" in result["output"] and "plan" in result["output"]
    assert heavy_loaded(result) == {}
    commands = [m for m in result["modules"] if re.fullmatch(r"explorer\.cli\.\w+", m)]
    assert commands == [], f"--help imported command modules {commands}"
    assert not [m for m in result["modules"] if m.startswith(("explorer.sources", "explorer.plan", "explorer.model"))]


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "meta-llama/Meta-Llama-3.1-70B"])
def test_offline_shape_of_a_snapshot_model_imports_no_heavy_library(tmp_path, model):
    result = run_cli(["shape", model, "--offline"], tmp_path)
    assert result["status"] == 0
    assert "snapshot" in result["output"]  # answered from the shipped snapshot
    assert heavy_loaded(result) == {}
    assert not (tmp_path / "no-cache-yet").exists()  # offline never creates the cache


def test_a_command_module_loads_when_used(tmp_path):
    result = run_cli(["shape", "Qwen/Qwen3-8B", "--offline", "--json"], tmp_path)
    assert "explorer.cli.shape" in result["modules"]
    assert "explorer.cli.plan" not in result["modules"]
    assert json.loads(result["output"])["source"]["origin"] == "snapshot"


def test_the_tracer_names_the_line_that_imported_a_library(tmp_path):
    # the snapshot reader stands in for a heavy library: from_hub imports it inside a function
    code = _RUN.format(heavy=("explorer.sources.snapshot.read",), argv=["shape", "Qwen/Qwen3-8B", "--offline"])
    env = {**os.environ, "EXPLORER_CACHE": str(tmp_path / "none.duckdb")}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    culprits = json.loads(proc.stdout.splitlines()[-1])["culprits"]
    assert re.fullmatch(r"sources/from_hub\.py:\d+", culprits["explorer.sources.snapshot.read"][-1])
