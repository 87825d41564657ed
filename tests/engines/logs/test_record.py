"""The log readers' matching helpers: one line at a time, tried only where a pattern's literal occurs."""

from __future__ import annotations

import pytest

from explorer.bench.logs import HOSTILE_LOGS, hostile_log, main
from explorer.engines.logs import llamacpp_log, record, sglang_log, vllm_log
from explorer.engines.logs.read import read_engine_log
from explorer.engines.logs.record import (
    MAX_LINE_CHARS,
    find_all,
    first,
    first_line,
    leading_literal,
    log_lines,
)
from explorer.errors import EngineLogError


@pytest.mark.parametrize(
    ("pattern", "lead"),
    [
        (r"Model loading took ", "Model loading took "),
        (r"Load weight end\..*?avail mem=", "Load weight end."),  # an escaped dot is a dot
        (r"Graph capturing finished in \d+ secs?, took", "Graph capturing finished in "),  # \d ends it
        (r"args: Namespace\((.*)\)", "args: Namespace("),
        (r"secs?", "sec"),  # the "s" may be absent, so it is not part of the lead
        (r"(?:Model loading took|Loading model weights took)", ""),  # a group
        (r"server is listening|model loaded", ""),  # an alternation has no one lead
        (r"(?<!\S)(\S+) model buffer size", ""),
    ],
)
def test_leading_literal(pattern, lead):
    assert leading_literal(pattern) == lead


def test_matching_is_per_line_and_tries_each_occurrence_of_the_lead():
    # vLLM 0.19's banner holds "█" several times before "█  version 0.19.0"
    text = "INFO ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.19.0\nsecond line"
    assert first(r"█\s+version (\S+)", text)[1] == "0.19.0"
    assert find_all(r"line", text) == ["line"]
    assert find_all(r"(\w+) (line)", "a line\nb line\nc") == [("a", "line"), ("b", "line")]
    assert first(r"nowhere", text) is None


def test_first_line_is_the_whole_line_holding_the_match():
    text = "start\nERROR 12:00 CUDA out of memory. Tried to allocate 2 GiB  \nend"
    assert first_line(r"CUDA out of memory", text) == "ERROR 12:00 CUDA out of memory. Tried to allocate 2 GiB"
    assert first_line(r"missing", text) == ""


def test_a_line_past_the_cap_is_read_up_to_it():
    (line,) = log_lines("x" * (MAX_LINE_CHARS + 10))
    assert len(line) == MAX_LINE_CHARS


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llamacpp"])
def test_every_pattern_a_reader_uses_is_tried_only_where_it_can_start(engine, monkeypatch):
    # issue 25: r".*" + pattern + r".*" over the whole text was cubic in a long line. Every pattern a reader
    # passes is recorded here: each has a leading literal, or starts at a word's start, or is an alternation
    used: list[str] = []
    real = record._compiled
    monkeypatch.setattr(record, "_compiled", lambda pattern: used.append(pattern) or real(pattern))
    reader = {"vllm": vllm_log.read_vllm, "sglang": sglang_log.read_sglang, "llamacpp": llamacpp_log.read_llamacpp}
    reader[engine]("nothing to see\n")
    assert len(used) >= 5
    for pattern in used:
        assert not pattern.startswith((".*", ".+")), pattern
        assert leading_literal(pattern) or pattern.startswith(("(?<!\\S)", "(?:")) or "|" in pattern, pattern


@pytest.mark.parametrize(("name", "unit"), HOSTILE_LOGS, ids=[n for n, _ in HOSTILE_LOGS])
def test_a_hostile_megabyte_log_is_read(name, unit):
    # before: a 6 KB line of "Free memory on device " took 3.0 s and a 12 KB one tens of seconds; a 1 MB log
    # of any of these would not end. No time is asserted (the benchmark explorer.bench.logs measures it):
    # that the test ends is the check.
    try:
        log = read_engine_log(hostile_log(unit, 1_000_000))
    except EngineLogError:
        return
    assert log.engine in ("vllm", "sglang", "llamacpp")


def test_the_benchmark_reports_each_log_at_each_size(capsys):
    main(["--sizes", "1000,2000"])
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 2 * len(HOSTILE_LOGS)
    assert all(float(row.split()[-1]) >= 0 for row in rows)
