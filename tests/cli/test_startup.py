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
from support.gguf_factory import build_gguf, llama_like, llama_metadata

import explorer
from explorer.bench.startup import cache_file

#: libraries that take 0.1 to 0.4 s to import and that these commands never need
HEAVY = ("duckdb", "huggingface_hub", "numpy", "gguf", "altair", "marimo", "httpx2", "tqdm", "pandas")
#: explorer's own readers that an answer from the shipped snapshot never uses: the GGUF reader and the offer of
#: files (it reads GGUF headers), local files, the Hub's records, client and facts, the cache file and its store
NOT_FOR_A_SNAPSHOT_ANSWER = (
    "explorer.gguf.binary",
    "explorer.gguf.header",
    "explorer.gguf.quant",
    "explorer.sources.gguf_files",
    "explorer.artifacts.offer",
    "explorer.sources.local_files",
    "explorer.sources.hub.records",
    "explorer.sources.hub.client",
    "explorer.sources.hub.http",
    "explorer.sources.facts",
    "explorer.sources.from_cache",
    "explorer.sources.cache.file",
    "explorer.sources.cache.store",
)

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


def child_env(cache: Path) -> dict[str, str]:
    """The environment of a child interpreter: ``cache`` as the cache file, no token, and the explorer under test
    first on its path (else a checkout's run would time the installed copy)."""
    env = {k: v for k, v in os.environ.items() if k not in ("EXPLORER_SNAPSHOT", "HF_TOKEN")}
    root = str(Path(explorer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env["EXPLORER_CACHE"] = str(cache)
    return env


def run_cli(argv: list[str], tmp_path: Path, *, cache: Path | None = None, watch: tuple[str, ...] = HEAVY) -> dict:
    """The CLI's status, output, loaded modules and the culprits of the ``watch`` modules it imported, from a
    fresh interpreter; ``cache``: the cache file it finds (default: none)."""
    env = child_env(cache or tmp_path / "no-cache-yet" / "cache.duckdb")  # no cache file by default: nothing to open
    proc = subprocess.run(
        [sys.executable, "-c", _RUN.format(heavy=watch, argv=argv)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout.splitlines()[-1])


def heavy_loaded(result: dict, watch: tuple[str, ...] = HEAVY) -> dict[str, list[str]]:
    """Each ``watch`` module loaded -> the explorer lines (file:line, innermost last) that imported it."""
    return {m: result["culprits"].get(m, []) for m in watch if m in result["modules"]}


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


@pytest.mark.parametrize("with_cache_file", [False, True], ids=["no cache file", "a cache file of another model"])
def test_offline_shape_of_a_snapshot_model_imports_only_what_the_snapshot_answer_uses(tmp_path, with_cache_file):
    # the cache file holds another model and was read once (its revision index says what it lacks), as on every
    # use after the first: the cache cannot answer, and neither duckdb nor the cache's own code is loaded
    cache = cache_file(tmp_path) if with_cache_file else None
    watch = HEAVY + NOT_FOR_A_SNAPSHOT_ANSWER
    result = run_cli(["shape", "Qwen/Qwen3-8B", "--offline", "--json"], tmp_path, cache=cache, watch=watch)
    assert result["status"] == 0
    assert json.loads(result["output"])["source"]["origin"] == "snapshot"
    assert heavy_loaded(result, watch) == {}


def test_the_watched_readers_load_for_a_local_gguf_file(tmp_path):
    # the same watch, on a path that needs them: a .gguf file's header is read by the GGUF reader, and its offer
    path = tmp_path / "tiny-Q4_K_M.gguf"
    path.write_bytes(build_gguf(llama_metadata(), llama_like()))
    result = run_cli(["shape", str(path), "--json"], tmp_path, watch=NOT_FOR_A_SNAPSHOT_ANSWER)
    assert result["status"] == 0 and json.loads(result["output"])["source"]["origin"] == "file"
    loaded = heavy_loaded(result, NOT_FOR_A_SNAPSHOT_ANSWER)
    assert {"explorer.gguf.header", "explorer.sources.gguf_files", "explorer.artifacts.offer"} <= set(loaded)
    assert re.fullmatch(r"sources/resolve\.py:\d+", loaded["explorer.sources.local_files"][-1])
    assert "explorer.sources.hub.client" not in loaded and "explorer.sources.cache.store" not in loaded


def test_a_command_module_loads_when_used(tmp_path):
    result = run_cli(["shape", "Qwen/Qwen3-8B", "--offline", "--json"], tmp_path)
    assert "explorer.cli.shape" in result["modules"]
    assert "explorer.cli.plan" not in result["modules"]
    assert json.loads(result["output"])["source"]["origin"] == "snapshot"


def test_the_tracer_names_the_line_that_imported_a_library(tmp_path):
    # the snapshot reader stands in for a heavy library: from_hub imports it inside a function
    code = _RUN.format(heavy=("explorer.sources.snapshot.read",), argv=["shape", "Qwen/Qwen3-8B", "--offline"])
    env = child_env(tmp_path / "none.duckdb")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    culprits = json.loads(proc.stdout.splitlines()[-1])["culprits"]
    assert re.fullmatch(r"sources/from_hub\.py:\d+", culprits["explorer.sources.snapshot.read"][-1])
