"""Timing child processes for the benchmarks: wall and CPU seconds and peak RSS of each, and their spread.

Wall time on a shared machine moves with the load; a process's own user +
system CPU time moves much less, so both are reported. Each child is reaped
with ``os.wait4``, which gives that child's own resource usage.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Runs", "dist", "run_once", "timing_table"]


@dataclass
class Runs:
    """What one command did over the runs.

    Attributes:
        label: the command's name in the report.
        wall_s: wall seconds per run.
        cpu_s: user + system CPU seconds per run (steadier than wall on a shared machine).
        rss_kib: peak resident set per run, KiB.
    """

    label: str
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)


def run_once(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int, int, str]:
    """(wall seconds, CPU seconds, peak RSS in KiB, exit status, output) of one child process.

    ``cwd`` should hold no ``explorer`` folder: ``python -m`` looks there first.
    """
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage, not all children's
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, p.returncode, text


def dist(xs: list[float], fmt: str = "{:7.3f}") -> str:
    """Median, p90, min and max of ``xs``, formatted."""
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]
    return " ".join(fmt.format(v) for v in (statistics.median(xs), p90, xs[0], xs[-1]))


def timing_table(results: list[Runs], width: int = 10) -> list[str]:
    """Lines of a table: wall and CPU (median, p90, min, max) and median peak RSS of each command."""
    lines = [
        f"{'':<{width}} {'wall s':^31}   {'CPU s (user+sys)':^31}",
        f"{'':<{width}} {'median':>7} {'p90':>7} {'min':>7} {'max':>7}   {'median':>7} {'p90':>7} {'min':>7} {'max':>7}"
        f"   {'RSS MiB':>7}",
    ]
    for r in results:
        lines.append(
            f"{r.label:<{width}} {dist(r.wall_s)}   {dist(r.cpu_s)}   {statistics.median(r.rss_kib) / 1024:7.1f}"
        )
    return lines
