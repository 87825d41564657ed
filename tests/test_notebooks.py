"""The notebooks run headless (``app.run()``) with the network blocked, and compute what they show.

Each test imports a notebook from its file (under another module name: the
notebook ``explorer.py`` must not shadow the package), runs it on the shipped
snapshot and asserts on the values its cells define.
"""

from __future__ import annotations

import importlib.util
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from explorer import notebook_data as nd
from explorer.cluster import parse_cluster_spec
from explorer.planner import plan
from explorer.presets import AppDefaults
from explorer.snapshot import load_snapshot
from explorer.units import GiB

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
MINE = ("explorer.py", "kv_cache.py")


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network: every connect raises; the Hub client is offline; the cache is a fresh file."""

    def refuse(*_args, **_kwargs):
        raise OSError("network blocked in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))


def load_notebook(filename: str):
    """The notebook's marimo ``App``, imported from its file as ``notebook_<name>``."""
    path = NOTEBOOKS / filename
    spec = importlib.util.spec_from_file_location(f"notebook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def run_explorer(**defaults):
    """Run notebooks/explorer.py with :class:`AppDefaults` fields overridden; returns its definitions."""
    _outputs, defs = load_notebook("explorer.py").run(defs={"defaults": AppDefaults(**defaults)})
    return defs


def test_explorer_default_plan(offline):
    defs = run_explorer()
    model, result = defs["model"], defs["result"]
    assert model.origin == "snapshot" and model.repo == "meta-llama/Meta-Llama-3.1-70B"
    assert defs["context"].value == 32768 and defs["request"].context_tokens == 32768
    assert result.options, "the default model must fit the default cluster"
    best = result.options[0]
    assert best.fits
    # the notebook's plan is the planner's own: the same request on the same cluster gives the same best option
    again = plan(model.shape, parse_cluster_spec("1x8xh100-80g"), defs["request"],
                 artifacts=[nd.plannable(model.shape, a) for a in model.artifacts], model_ref=model.repo)
    assert again.options[0].label == best.label
    assert again.options[0].per_card.total == best.per_card.total
    # and the table shows it, in GiB: "70.9 / 79.1"
    row = defs["option_rows"][0]
    assert row["option"] == best.label
    assert row["per card (GiB)"] == f"{best.per_card.total / GiB:,.1f} / {best.per_card.usable / GiB:,.1f}"
    assert row["max context"] == f"{best.evaluation.max_context_tokens:,}"
    # 70B at 32k on 2 cards just misses for vLLM/SGLang: shown in red with ✗
    assert defs["miss_rows"] and all(r["fits"].startswith("✗") for r in defs["miss_rows"])
    # KV per token: 80 layers × 2 × 8 KV heads × 128 × 2 bytes
    assert defs["summary"]["kv_bytes_per_token"] == model.shape.kv_bytes_per_token() == 327_680
    # the context chart's data: every drawn option at every slider step, misses among them
    steps = defs["context_steps"]
    assert steps[0] == 512 and steps[-1] == model.shape.max_context_tokens
    assert {r["context"] for r in defs["sweep"]} == set(steps)
    assert any(not r["fits"] for r in defs["sweep"])


def test_explorer_engines_side_by_side(offline):
    defs = run_explorer(model="meta-llama/Meta-Llama-3.1-8B", context_tokens=8192)
    engines = {o.engine for o in defs["result"].options}
    assert {"vllm", "sglang"} <= engines
    assert engines == set(defs["engines"])  # llama.cpp too, once its planner is installed
    speeds = [o.speed for o in defs["result"].options]
    if any(s is not None for s in speeds):  # the speed column shows when the planner estimates it
        assert defs["option_rows"][0]["decode tok/s"] != "—"


def test_explorer_linked_cluster_and_engine(offline):
    defs = run_explorer(model="meta-llama/Meta-Llama-3.1-8B", spec="1x1xrtx4090-24g", engine="vLLM",
                        context_tokens=131072)
    assert defs["spec"].value == "1x1xrtx4090-24g"
    assert defs["result"].options == ()  # 16 GiB of KV does not fit a 24 GB card next to 15 GiB of weights
    miss = defs["miss_rows"][0]
    assert miss["engine"] == "vLLM" and miss["fits"].startswith("✗ short by")


def test_explorer_bad_spec_is_a_callout(offline):
    outputs, defs = load_notebook("explorer.py").run(defs={"defaults": AppDefaults(spec="1x8xnosuchgpu")})
    assert "result" not in defs  # the plan cell stopped
    texts = [getattr(o, "text", "") for o in outputs if o is not None]
    assert any("does not parse" in t and "nosuchgpu" in t for t in texts)
    assert not any("Traceback" in t for t in texts)


def test_planner_update_is_fast_on_64_gpus(offline):
    """A slider move re-plans only: under 50 ms (median) on eight 8×H100 nodes."""
    defs = run_explorer(spec="8x8xh100-80g@ib0")
    model, request = defs["model"], defs["request"]
    cluster = parse_cluster_spec("8x8xh100-80g@ib0")
    assert cluster.total_gpus == 64
    artifacts = [nd.plannable(model.shape, a) for a in model.artifacts]
    times = []
    for context in defs["context_steps"]:
        t0 = time.perf_counter()
        plan(model.shape, cluster, replace(request, context_tokens=context), artifacts=artifacts)
        times.append((time.perf_counter() - t0) * 1000)
    median = statistics.median(times)
    print(f"\nplanner per update, 64 GPUs, {model.repo}: median {median:.1f} ms, max {max(times):.1f} ms")
    assert median < 50


def test_kv_notebook_shows_the_shapes_figures(offline):
    _outputs, defs = load_notebook("kv_cache.py").run()
    snapshot = load_snapshot()
    kv, context, seqs = defs["kv_dtype"].value, defs["context"].value, defs["sequences"].value
    assert (kv, context, seqs) == ("auto", 32768, 1)
    for name, (_design, shape) in defs["lesson"].items():
        assert snapshot.shape(shape.name) is shape
        assert defs["per_token"][name] == shape.kv_bytes_per_token(kv)
        assert defs["at_context"][name] == shape.kv_bytes(context, kv, seqs)
        assert sum(r["bytes"] for r in defs["tables"][name]) == defs["at_context"][name]
    gqa = defs["tables"]["Meta-Llama-3.1-8B (GQA)"][0]
    assert gqa["formula"] == "2 × 32 × 8 × 128 × 2 = 131,072 bytes a token"
    mla = defs["tables"]["DeepSeek-V3 (MLA)"][0]
    assert mla["formula"].startswith("61 × (512 + 64) × 2 = 70,272 bytes a token")
    # a hybrid's recurrent layers are flat in context; its attention layers grow
    hybrid = {r["kind"]: r for r in defs["tables"]["Qwen3-Next-80B-A3B-Thinking (hybrid linear)"]}
    assert hybrid["recurrent"]["tokens kept"] == 0 and hybrid["full"]["tokens kept"] == context
    assert {r["model"] for r in defs["curve"]} == set(defs["lesson"])


def test_notebooks_pass_marimo_check():
    files = [str(NOTEBOOKS / f) for f in MINE]
    done = subprocess.run([sys.executable, "-m", "marimo", "check", "--strict", *files],
                          check=False, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in (done.stdout + done.stderr).lower()
