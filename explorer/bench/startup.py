"""How long the CLI takes to start: ``explorer --help`` and ``explorer shape Qwen/Qwen3-8B --offline``.

    python -m explorer.bench.startup [--runs 15] [--profile 7] [--baseline OTHER_VENV/bin/python]

Runs each command ``--runs`` times in fresh processes (interleaved with
``python -c pass`` for the interpreter's own start) and reports wall and
CPU seconds and peak RSS; with ``--baseline``, the same commands of another
install side by side (an older commit in its own venv). ``--profile N``
adds the import-time profile: ``-X importtime`` self times, the least of N
runs per module, summed by package, largest first.

Each command runs twice over: with an ``EXPLORER_CACHE`` path that does not
exist, as on a first use, and ("cache file") with a cache file that holds
another model and was read once before (so its index is written: see
:mod:`explorer.sources.cache.index`), as on every later use.
Bytecode matters: an installed wheel has it, a checkout run with
``PYTHONDONTWRITEBYTECODE=1`` compiles every module on every start, so the
benchmark says when the package has none (``python -m compileall explorer``).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from explorer.bench.timing import Runs, run_once, timing_table

COMMANDS = (("--help",), ("shape", "Qwen/Qwen3-8B", "--offline"))
#: how many seconds ago the prepared cache file was last written: past the index's settling time
_CACHE_AGE_S = 60


def cache_file(folder: Path) -> Path:
    """A cache file holding one other model's branch mapping, read once since (its index written).

    Made in a child process: importing duckdb here would grow this process, and a child's peak RSS
    (``ru_maxrss``) starts from its parent's at the fork.
    """
    path = folder / "with-cache" / "cache.duckdb"
    path.parent.mkdir(parents=True)
    script = (
        "import os, sys, time\n"
        "from explorer.sources.cache.store import Cache\n"
        "path = sys.argv[1]\n"
        "with Cache.open(path) as cache:\n"
        "    cache.put_revision('someone/another-model', 'main', '0' * 40)\n"
        f"past = time.time() - {_CACHE_AGE_S}\n"
        "os.utime(path, (past, past))\n"
        "Cache.open(path, read_only=True).close()  # a first read, as a later start finds it\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    return path


def _cli(python: str) -> list[str]:
    """The ``explorer`` script next to ``python`` (what a user runs), else ``python -m explorer``."""
    script = Path(python).parent / "explorer"
    return [str(script)] if script.is_file() else [python, "-m", "explorer"]


def _has_bytecode(python: str) -> bool:
    code = (
        "import importlib.util, os, explorer.cli as c; "
        "print(os.path.exists(importlib.util.cache_from_source(c.__file__)))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
    return out.stdout.strip() == "True"


def import_profile(python: str, argv: tuple[str, ...], runs: int, env: dict[str, str], cwd: Path) -> dict[str, int]:
    """Module -> the least ``-X importtime`` self time (µs) over ``runs`` runs of ``python -m explorer ARGV``."""
    best: dict[str, int] = {}
    for i in range(runs):
        run_env = {**env, "EXPLORER_CACHE": str(cwd / f"profile-{i}" / "cache.duckdb")}
        err = subprocess.run(
            [python, "-X", "importtime", "-m", "explorer", *argv], capture_output=True, text=True, env=run_env, cwd=cwd
        ).stderr
        for m in re.finditer(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", err):
            best[m[2]] = min(best.get(m[2], 1 << 62), int(m[1]))
    return best


def by_package(profile: dict[str, int]) -> collections.Counter:
    """Self time summed by top-level package (``explorer`` by subpackage)."""
    out: collections.Counter = collections.Counter()
    for name, us in profile.items():
        parts = name.split(".")
        out[".".join(parts[:2]) if parts[0] == "explorer" else parts[0]] += us
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15, help="runs of each command (interleaved)")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="import-time profile, least of N runs")
    ap.add_argument("--top", type=int, default=12, help="packages shown in the profile")
    ap.add_argument("--baseline", default=None, metavar="PYTHON", help="another install's python, side by side")
    a = ap.parse_args(argv)
    installs = [("", sys.executable)] + ([("baseline ", a.baseline)] if a.baseline else [])
    for label, python in installs:
        if not _has_bytecode(python):
            print(
                f"note: {label or 'this '}install has no bytecode for explorer (PYTHONDONTWRITEBYTECODE="
                f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')}): each start compiles it; "
                "python -m compileall on its package folder gives an installed wheel's figures"
            )
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    env = {k: v for k, v in os.environ.items() if k not in ("EXPLORER_SNAPSHOT", "HF_TOKEN", "HF_HUB_OFFLINE")}
    try:
        cached = cache_file(tmp)
        jobs: list[tuple[Runs, list[str], Path | None]] = [
            (Runs("python -c pass"), [sys.executable, "-c", "pass"], None)
        ]
        for cmd in COMMANDS:
            for label, python in installs:
                for cache in (None, cached):
                    title = f"{label}explorer {' '.join(cmd)}{' (cache file)' if cache else ''}"
                    jobs.append((Runs(title), [*_cli(python), *cmd], cache))
        width = max(len(r.label) for r, _, _ in jobs)
        for i in range(a.runs):
            for runs, cmd, cache in jobs if i % 2 == 0 else jobs[::-1]:
                fresh = tmp / f"cache-{i}-{len(runs.wall_s)}-{id(runs)}" / "c.duckdb"
                run_env = {**env, "EXPLORER_CACHE": str(cache or fresh)}
                wall, cpu, rss, rc, out = run_once(cmd, run_env, tmp)
                if rc != 0:
                    sys.exit(f"{runs.label} failed (exit {rc}):\n{out}")
                runs.wall_s.append(wall)
                runs.cpu_s.append(cpu)
                runs.rss_kib.append(rss)
        load = os.getloadavg()
        print(f"{a.runs} runs each, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs\n")
        print("\n".join(timing_table([r for r, _, _ in jobs], width=width)))
        for cmd in COMMANDS if a.profile else ():
            for label, python in installs:
                prof = import_profile(python, cmd, a.profile, env, tmp)
                total = sum(prof.values())
                print(
                    f"\nimport profile of {label}explorer {' '.join(cmd)}: {len(prof)} modules, "
                    f"{total / 1000:.1f} ms self time (least of {a.profile} runs each)"
                )
                for pkg, us in by_package(prof).most_common(a.top):
                    print(f"  {us / 1000:7.1f} ms  {pkg}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
