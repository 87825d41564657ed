"""A cold Hub fetch, side by side: ``explorer shape ORG/NAME`` against ``hf-mem`` on the same repos.

    python -m explorer.bench.hub_vs_hfmem [--runs 10] [--repos NAME ...] [--rtt-ms 0] [--hf-mem PATH] [--timeline]

Starts the project's test Hub (``tests/support/hubserver.py``) on three
generated repos, each holding a real config.json and safetensors files with
the model's real tensor shapes (sparse: real headers, no weight bytes):
Llama 3.2 1B in one ``model.safetensors``, Llama 3.1 8B in 4 shards and Llama
3.1 70B in 30 shards. For each repo it runs, interleaved, ``--runs`` times each:

- ``explorer shape ORG/NAME`` in a fresh process with an empty cache
  (``EXPLORER_CACHE`` in a new temporary folder each run);
- ``hf-mem --model-id ORG/NAME --experimental`` (listing, safetensors headers
  and config.json: the same reads explorer makes).

hf-mem always asks ``https://huggingface.co`` (it does not read
``HF_ENDPOINT``); it runs here under a small bootstrap that mounts an httpx2
transport sending those requests to the local server instead (no other
change). It is found as ``--hf-mem PATH``, else ``hf-mem`` on PATH; when
absent its column is skipped with a message (install it in its own venv:
``python -m venv v && v/bin/pip install hf-mem``).

``--baseline PYTHON`` adds a third column: another install of explorer (an
older commit in its own venv), for before/after figures taken side by side.

Reports, per repo, wall and CPU time (median, p90, min, max), the ratios of medians, peak RSS
(``wait4``'s ``ru_maxrss`` of each process) and the requests each tool made
per fetch, as the server logged them. Where the wall goes: the median of each
phase, from the server's clock (the same process's ``time.monotonic()``):
start-up (the process started → its first request read), the requests (→ the
last answer's last byte written) and the rest (→ the process ended: the answers'
parsing after the last byte, the output, interpreter shutdown). ``--timeline``
also prints each request's start and end of one run (the first). Needs a source
checkout (``tests/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from explorer.bench.hub import import_test_hub
from explorer.bench.timing import Runs, run_once, timing_table


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRepo:
    """One repo of the benchmark.

    Attributes:
        repo: its id on the test Hub.
        config: the fixture config.json it holds (a file name stem of the shared fixtures).
        dims: its Llama-style tensor shapes (``llama_tensors``' keyword arguments).
        shards: safetensors files (1: ``model.safetensors``).
    """

    repo: str
    config: str
    dims: dict
    shards: int


#: the three repos: one file, a few shards, many shards
REPOS = (
    # 1,235,814,400 parameters at BF16, embeddings tied
    BenchRepo(repo="bench-org/Llama-3.2-1B", config="meta-llama__Llama-3.2-1B", shards=1,
              dims={"layers": 16, "hidden": 2048, "intermediate": 8192, "vocab": 128256, "heads": 32, "kv_heads": 8,
                    "tied": True}),
    # 8,030,261,248 parameters at BF16
    BenchRepo(repo="bench-org/Llama-3.1-8B", config="meta-llama__Meta-Llama-3.1-8B", shards=4,
              dims={"layers": 32, "hidden": 4096, "intermediate": 14336, "vocab": 128256, "heads": 32, "kv_heads": 8}),
    # 70,553,706,496 parameters at BF16
    BenchRepo(repo="bench-org/Llama-3.1-70B", config="meta-llama__Meta-Llama-3.1-70B", shards=30,
              dims={"layers": 80, "hidden": 8192, "intermediate": 28672, "vocab": 128256, "heads": 64, "kv_heads": 8}),
)  # fmt: skip

# hf-mem hard-codes https://huggingface.co: send its requests to the local server instead.
_HF_MEM_BOOT = """
import sys, httpx2
_port = int(sys.argv.pop(1))
class _Local(httpx2.AsyncHTTPTransport):
    async def handle_async_request(self, request):
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=_port)
        return await super().handle_async_request(request)
_init = httpx2.AsyncClient.__init__
def _init_local(self, *a, **kw):
    kw["mounts"] = {"https://huggingface.co": _Local(verify=False)}  # no CA bundle to load for plain http
    _init(self, *a, **kw)
httpx2.AsyncClient.__init__ = _init_local
sys.argv[0] = "hf-mem"
from hf_mem.cli import main
main()
"""


@dataclass
class HubRuns(Runs):
    """A tool's timings, and the requests the server logged.

    Attributes:
        requests: (method, path, Range) per request, of the first run.
        request_counts: requests per run.
        first_request_s: per run, seconds from the process's start to its first request read by the server.
        last_answer_s: per run, seconds from the process's start to its last answer's last byte written.
        timeline: (path, Range, start s, end s) per request of the first run, from the process's start.
    """

    requests: list[tuple[str, str, str]] = field(default_factory=list)
    request_counts: list[int] = field(default_factory=list)
    first_request_s: list[float] = field(default_factory=list)
    last_answer_s: list[float] = field(default_factory=list)
    timeline: list[tuple[str, str, float, float]] = field(default_factory=list)


def build_repo(root: Path, fx, bench: BenchRepo) -> None:
    """A benchmark repo under ``root``: its config and its sparse safetensors files."""
    d = fx.make_repo(
        root,
        bench.repo,
        {
            "config.json": fx.config_fixture(bench.config),
            "README.md": "# bench\n",
            "generation_config.json": {"do_sample": True},
        },
    )
    tensors = fx.llama_tensors(**bench.dims)
    if bench.shards <= 1:
        fx.write_safetensors(d / "model.safetensors", tensors)
    else:
        fx.write_sharded_safetensors(d, tensors, bench.shards)


def find_hf_mem(given: str | None) -> list[str] | None:
    """The interpreter that has hf_mem installed (read from the ``hf-mem`` script's first line), or None."""
    script = given or shutil.which("hf-mem")
    if not script or not Path(script).is_file():
        return None
    first = Path(script).read_text(errors="replace").splitlines()[0]
    python = first[2:].strip() if first.startswith("#!") else sys.executable
    return [python, "-c", _HF_MEM_BOOT]


def report_phases(results: list[HubRuns], *, timeline: bool) -> None:
    """Where each tool's wall goes (medians, ms), and with ``timeline`` each request of its first run."""
    med = statistics.median
    print(f"\nwhere the wall goes, medians in ms: {'start-up':>9} {'requests':>9} {'the rest':>9} {'wall':>7}")
    for r in results:
        ups = [a * 1e3 for a in r.first_request_s]
        reqs = [(b - a) * 1e3 for a, b in zip(r.first_request_s, r.last_answer_s, strict=True)]
        rest = [(w - b) * 1e3 for b, w in zip(r.last_answer_s, r.wall_s, strict=True)]
        print(f"  {r.label:<34} {med(ups):9.0f} {med(reqs):9.0f} {med(rest):9.0f} {med(r.wall_s) * 1e3:7.0f}")
    for r in results if timeline else ():
        print(f"\ntimeline of one {r.label} fetch (ms from the process's start; it ended at {r.wall_s[0] * 1e3:.0f}):")
        for path, rng, start, end in r.timeline:
            print(f"  {start * 1e3:6.0f} → {end * 1e3:6.0f}  {path}{'  Range: ' + rng if rng else ''}")


def report(results: list[HubRuns]) -> None:
    lines = timing_table(results)
    print("\n" + lines[0])
    print(lines[1].replace(" " * 10, f"{'tool':<10}", 1) + "  requests/fetch")
    for r, line in zip(results, lines[2:], strict=True):
        print(f"{line}  {'/'.join(map(str, sorted(set(r.request_counts))))}")
    med = statistics.median
    a = results[0]
    for b in results[1:]:
        print(
            f"\nratio of medians {a.label} / {b.label}: wall {med(a.wall_s) / med(b.wall_s):.2f}x,"
            f" CPU {med(a.cpu_s) / med(b.cpu_s):.2f}x, peak RSS {med(a.rss_kib) / med(b.rss_kib):.2f}x"
        )
    for r in results:
        print(f"\nrequests of one {r.label} fetch:")
        for method, path, rng in r.requests:
            print(f"  {method:<4} {path}{'  Range: ' + rng if rng else ''}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs of each tool on each repo (interleaved)")
    names = [b.repo.split("/")[1] for b in REPOS]
    ap.add_argument("--repos", nargs="+", choices=names, default=names, help="the repos timed (default: all three)")
    ap.add_argument("--rtt-ms", type=float, default=0.0, help="latency the server adds to each answer")
    ap.add_argument("--hf-mem", default=None, metavar="PATH", help="the hf-mem script (default: hf-mem on PATH)")
    ap.add_argument("--timeline", action="store_true", help="print each request's start and end of one run per tool")
    ap.add_argument(
        "--baseline",
        default=None,
        metavar="PYTHON",
        help="also time `PYTHON -m explorer shape` (another install, e.g. an older commit's venv)",
    )
    a = ap.parse_args(argv)
    hubserver, fx = import_test_hub()
    tmp = Path(tempfile.mkdtemp(prefix="bench-hfmem-"))
    try:
        benches = [b for b in REPOS if b.repo.split("/")[1] in a.repos]
        for bench in benches:
            build_repo(tmp / "hub", fx, bench)
        hf_mem = find_hf_mem(a.hf_mem)
        if hf_mem is None:
            print(
                "hf-mem is not installed (or --hf-mem PATH is wrong): timing explorer alone.\n"
                "  install it apart from the project: python -m venv /tmp/hfmem && /tmp/hfmem/bin/pip install hf-mem,"
                " then pass --hf-mem /tmp/hfmem/bin/hf-mem"
            )
        with hubserver.HubServer(tmp / "hub") as server:
            server.set_slow(a.rtt_ms / 1000)
            env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE", "EXPLORER_CACHE")}
            env.update(HF_ENDPOINT=server.endpoint, HF_HOME=str(tmp / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1")
            for bench in benches:
                print(
                    f"\nrepo {bench.repo}: {bench.shards} safetensors file(s), server {server.endpoint}"
                    f" (+{a.rtt_ms:g} ms per answer), {a.runs} runs each"
                )
                results = _time_repo(bench.repo, server, env, tmp, a.runs, baseline=a.baseline, hf_mem=hf_mem)
                report(results)
                report_phases(results, timeline=a.timeline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _time_repo(repo: str, server, env: dict[str, str], tmp: Path, runs: int, *, baseline: str | None,
               hf_mem: list[str] | None) -> list[HubRuns]:  # fmt: skip
    """Each tool's cold read of ``repo``, ``runs`` times, interleaved (who goes first alternates)."""
    tools = [(HubRuns("explorer"), [sys.executable, "-m", "explorer", "shape", repo])]
    if baseline:
        tools.append((HubRuns("baseline"), [baseline, "-m", "explorer", "shape", repo]))
    if hf_mem is not None:
        tools.append((HubRuns("hf-mem"), [*hf_mem, str(server.port), "--model-id", repo, "--experimental"]))
    for i in range(runs):
        for timed, cmd in tools if i % 2 == 0 else tools[::-1]:
            server.reset_stats()
            cache = tmp / f"cache-{repo.replace('/', '--')}-{timed.label}-{i}" / "cache.duckdb"
            started = time.monotonic()  # the server's clock: its timeline is in the same process's monotonic seconds
            wall, cpu, rss, rc, out = run_once(cmd, {**env, "EXPLORER_CACHE": str(cache)}, tmp)
            if rc != 0:
                sys.exit(f"{timed.label} failed on {repo} (exit {rc}):\n{out}")
            log = [(m, p, r) for m, p, r, _ in server.stats.log]
            spans = sorted(
                ((p, r, a - started, b - started) for p, r, a, b in server.stats.timeline), key=lambda x: x[2]
            )
            timed.first_request_s.append(spans[0][2])
            timed.last_answer_s.append(max(span[3] for span in spans))
            timed.wall_s.append(wall)
            timed.cpu_s.append(cpu)
            timed.rss_kib.append(rss)
            timed.request_counts.append(len(log))
            if i == 0:
                timed.requests = log
                timed.timeline = spans
    return [timed for timed, _ in tools]


if __name__ == "__main__":
    main()
