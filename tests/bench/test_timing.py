"""explorer.bench.timing and the hf-mem comparison: child-process timing, and one cold read end to end."""

from __future__ import annotations

import sys

from explorer.bench import hub_vs_hfmem
from explorer.bench.timing import Runs, dist, run_once, timing_table


def test_run_once_times_one_child(tmp_path):
    wall, cpu, rss_kib, status, out = run_once([sys.executable, "-c", "print('hi')"], {}, tmp_path)
    assert status == 0 and out.strip() == "hi"
    assert wall > 0 and cpu >= 0 and rss_kib > 1024  # a Python process holds more than 1 MiB


def test_run_once_reports_a_failure(tmp_path):
    _, _, _, status, _out = run_once([sys.executable, "-c", "raise SystemExit(3)"], {}, tmp_path)
    assert status == 3


def test_dist_and_table():
    assert dist([3.0, 1.0, 2.0], fmt="{:.0f}") == "2 3 1 3"  # median, p90, min, max
    lines = timing_table([Runs("a", wall_s=[1.0], cpu_s=[0.5], rss_kib=[2048])])
    assert lines[2].startswith("a") and lines[2].rstrip().endswith("2.0")


def test_find_hf_mem_reads_the_interpreter_from_the_script(tmp_path):
    assert hub_vs_hfmem.find_hf_mem(str(tmp_path / "absent")) is None
    script = tmp_path / "hf-mem"
    script.write_text("#!/opt/venv/bin/python\nimport hf_mem\n")
    cmd = hub_vs_hfmem.find_hf_mem(str(script))
    assert cmd[0] == "/opt/venv/bin/python" and cmd[1] == "-c"


def test_a_cold_read_end_to_end_without_hf_mem(capsys, tmp_path):
    hub_vs_hfmem.main(["--runs", "1", "--repos", "Llama-3.1-8B", "--hf-mem", str(tmp_path / "no-hf-mem"), "--timeline"])
    out = capsys.readouterr().out
    assert "hf-mem is not installed" in out
    explorer_row = next(line for line in out.splitlines() if line.startswith("explorer "))
    assert explorer_row.split()[-1] == "7"  # listing, config.json and the index, 4 shard headers
    assert "/api/models/bench-org/Llama-3.1-8B" in out and "Range: bytes=0-" in out
    # one run: its phases (start-up, requests, the rest, in ms) add up to its wall, to the rounding
    phases = next(line for line in out.splitlines() if line.startswith("  explorer "))
    up, requests, rest, wall = map(int, phases.split()[1:])
    assert abs(up + requests + rest - wall) <= 2 and up > 0 and requests >= 0 and rest >= 0
    # the timeline: each of the 7 requests, in the order they started, within the process's life
    spans = [line.split() for line in out.splitlines() if "→" in line]
    assert len(spans) == 7 and "/api/models/bench-org/Llama-3.1-8B" in spans[0][-1]
    starts = [float(s[0]) for s in spans]
    assert starts == sorted(starts) and starts[0] == up and all(float(s[2]) <= wall + 1 for s in spans)
