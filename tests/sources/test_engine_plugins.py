"""explorer.sources.engine_plugins: an engine from another package, through the ``explorer.engines`` entry points,
plans with no change to explorer's files."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from support.corpus import shape_of

from explorer.cli import main
from explorer.engines import registry
from explorer.engines.names import ENGINE_LABELS
from explorer.engines.request import PlanRequest
from explorer.errors import PlanError
from explorer.memo import clear_memos
from explorer.plan.planner import plan
from explorer.sources.engine_plugins import load_engine_plugins
from explorer.sources.shipped import parse_cluster

#: a third party's package: vLLM's memory model under another engine's name (a fork, say), and its entry point
PACKAGE = """
from dataclasses import dataclass
from typing import ClassVar

from explorer.engines.vllm import VLLM


@dataclass(frozen=True, slots=True)
class Tiny(VLLM):
    name: ClassVar[str] = "tiny"
    label: ClassVar[str] = "Tiny-LLM"


ENGINE = Tiny()
"""


def _install(tmp_path, monkeypatch, entry: str, body: str = PACKAGE) -> None:
    """A package ``tiny_engine`` with a real ``*.dist-info`` (METADATA, entry_points.txt) on ``sys.path``."""
    (tmp_path / "tiny_engine").mkdir()
    (tmp_path / "tiny_engine" / "__init__.py").write_text(textwrap.dedent(body))
    info = tmp_path / "tiny_engine-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-engine\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[explorer.engines]\ntiny = {entry}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tiny_engine", raising=False)  # another test's package of that name


@pytest.fixture
def fresh_registry(monkeypatch):
    """The registry as shipped before and after the test (an entry point registers for the whole process)."""
    saved = dict(registry.ENGINES_BY_NAME), dict(registry.SPLIT_ENGINES), dict(ENGINE_LABELS)
    clear_memos()
    yield
    for live, kept in zip((registry.ENGINES_BY_NAME, registry.SPLIT_ENGINES, ENGINE_LABELS), saved, strict=True):
        live.clear()
        live.update(kept)
    sys.modules.pop("tiny_engine", None)
    clear_memos()


def test_an_engine_from_an_entry_point_plans(tmp_path, monkeypatch, capsys, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:ENGINE")
    assert load_engine_plugins() == ("tiny",)
    assert list(registry.engine_labels().items())[-1] == ("tiny", "Tiny-LLM")  # after the built-ins
    result = plan(shape_of("meta-llama__Llama-3.2-3B"), parse_cluster("1x1xh100-80g"), PlanRequest(engines=("tiny",)),
                  model_ref="m", speed=False, suggest=False)  # fmt: skip
    assert result.options and {o.engine for o in result.options} == {"tiny"}
    # each option is labelled with the engine's own label, not its raw name: "Tiny-LLM · 1 × h100-80g (single) · …"
    assert result.options[0].label.startswith("Tiny-LLM · 1 × h100-80g (single) · ")
    # the command line lists it under --engine and plans with it
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "none.duckdb"))
    argv = ["plan", "meta-llama/Llama-3.2-3B", "--cluster", "1x1xh100-80g", "--engine", "tiny", "--offline", "--json"]
    assert main(argv) == 0
    options = json.loads(capsys.readouterr().out)["options"]
    assert {o["engine"] for o in options} == {"tiny"}
    assert all(o["label"].startswith("Tiny-LLM · ") for o in options)


def test_an_entry_point_that_is_no_engine_is_a_typed_error(tmp_path, monkeypatch, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:ENGINE", body="ENGINE = object()\n")
    with pytest.raises(PlanError, match="is not an engine: it lacks walk, recheck, footprint, serves, pin"):
        load_engine_plugins()


def test_an_entry_point_that_does_not_load_names_its_package(tmp_path, monkeypatch, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:MISSING")
    with pytest.raises(PlanError, match=r"tiny = tiny_engine:MISSING \(from tiny-engine\) does not load"):
        load_engine_plugins()


def test_a_taken_name_is_refused():
    with pytest.raises(PlanError, match="an engine named 'sglang' is registered already"):
        registry.register_engine(type(registry.ENGINES_BY_NAME["sglang"])())  # a second SGLang
