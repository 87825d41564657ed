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
from explorer.errors import EngineLogError, PlanError
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


#: the same engine with a log reader: its start-up lines are its own, its figures follow vLLM's accounting
PACKAGE_WITH_READER = (
    PACKAGE
    + """
import re

from explorer.engines.interface import LogReader
from explorer.engines.logs.record import EngineLog, gib_bytes


def read_tiny(text):
    head = re.search(r"\\[tiny\\] model (\\S+) on (.+), tp (\\d+), max_model_len (\\d+)", text)
    figures = dict(re.findall(r"\\[tiny\\] (weights|kv cache) ([\\d.]+) GiB", text))
    return EngineLog(
        engine="vllm",
        model=head[1],
        card=head[2],
        settings={"tensor_parallel_size": int(head[3]), "max_model_len": int(head[4])},
        observed={"weights_bytes": gib_bytes(figures["weights"]), "kv_cache_bytes": gib_bytes(figures["kv cache"])},
        refused=False,
        lines=text.count("\\n"),
    )


Tiny.log_reader = LogReader(signatures=(r"\\[tiny\\] weights ",), read=read_tiny, expected="Tiny-LLM: '[tiny] weights X GiB'")
"""
)
TINY_LOG = """\
[tiny] model meta-llama/Llama-3.2-3B on NVIDIA H100 80GB HBM3, tp 1, max_model_len 8192
[tiny] weights 6.01 GiB
[tiny] kv cache 60.00 GiB
[tiny] ready
"""


def test_explorer_check_reads_a_log_with_the_reader_an_engine_brings(tmp_path, monkeypatch, capsys, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:ENGINE", body=PACKAGE_WITH_READER)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "none.duckdb"))
    log = tmp_path / "tiny.log"
    log.write_text(TINY_LOG)
    assert main(["check", str(log), "--offline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "vllm"  # planned with the accounting the reader names
    assert out["model"] == "meta-llama/Llama-3.2-3B" and out["card"] == "h100-80g"
    # the log's figures as read: 6.01 GiB = round(6.01 × 2³⁰) bytes, 60.00 GiB = 60 × 2³⁰
    assert out["observed"]["weights_bytes"] == 6_453_188_362
    assert out["observed"]["kv_cache_bytes"] == 64_424_509_440
    # explorer's own plan of the same setup beside them: Llama-3.2-3B's 3,212,749,824 parameters × 2 bytes (bf16),
    # and vLLM's RoPE cos/sin cache of its 131,072 positions × 128 × 2 bytes (explorer/engines/rope_cache.py)
    assert out["predicted"]["weights_bytes"] == 3_212_749_824 * 2 + 131_072 * 128 * 2
    assert out["verdict"] == {"engine_started": True, "explorer_fits": True, "reason": ""}


def test_a_log_no_reader_knows_lists_every_readers_lines(tmp_path, monkeypatch, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:ENGINE", body=PACKAGE_WITH_READER)
    from explorer.engines.logs import read_engine_log

    with pytest.raises(EngineLogError, match=r"Tiny-LLM: '\[tiny\] weights X GiB'"):
        read_engine_log("nothing an engine prints\n", more_readers=registry.log_readers)
    assert read_engine_log(TINY_LOG, more_readers=registry.log_readers).observed["weights_bytes"] == 6_453_188_362


def test_entry_points_load_only_for_a_name_that_is_not_built_in(tmp_path, monkeypatch, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:ENGINE")
    from explorer.cli.request_args import engine_choice

    assert engine_choice("vllm") == "vllm" and "tiny" not in registry.ENGINES_BY_NAME  # a built-in: nothing loaded
    assert engine_choice("tiny") == "tiny" and "tiny" in registry.ENGINES_BY_NAME  # another package's: loaded now


def test_the_apps_paste_box_reads_a_log_with_the_reader_an_engine_brings(tmp_path, monkeypatch, fresh_registry):
    _install(tmp_path, monkeypatch, "tiny_engine:ENGINE", body=PACKAGE_WITH_READER)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "none.duckdb"))
    from explorer.ui.check_rows import check_rows

    rows = {r["part"]: r for r in check_rows(TINY_LOG, offline=True)}
    # the log's 6.01 GiB of weights beside explorer's 3,212,749,824 × 2 + 33,554,432 (RoPE cache) bytes = 6.02 GiB
    assert rows["weights"]["log"] == "6.01 GiB" and rows["weights"]["explorer"] == "6.02 GiB"
    assert rows["verdict"]["difference"] == "agree"
