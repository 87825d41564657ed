"""Benchmark of the Hub edge and the cache, against the local test Hub.

    python -m explorer.bench.hub [--repos 20] [--reads 300] [--rtt-ms 30]

Reports:
1. bytes and requests per GGUF header read, and their ratio to the file size;
2. the latency of cache hits (median and p95 over ``--reads`` reads; target < 5 ms);
3. ``fetch_many`` over ``--repos`` repos with pools of 1 and 4 (and the ratio).

The server adds ``--rtt-ms`` to every answer so that concurrency has network
latency to hide, as with the real Hub. Needs a source checkout: the server
and the repo writers live in ``tests/support/`` (``hubserver.py``, ``hub_fixtures.py``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2] / "tests"  # explorer/bench/hub.py -> the checkout


def import_test_hub():
    """(hubserver, hub_fixtures), the test Hub modules of a source checkout; exits when they are missing."""
    if not (TESTS / "support" / "hubserver.py").is_file():
        sys.exit(f"bench_hub needs a source checkout: {TESTS / 'support' / 'hubserver.py'} is missing")
    sys.path.insert(0, str(TESTS))  # the tests' support package
    from support import hub_fixtures, hubserver

    return hubserver, hub_fixtures


def _ms(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs) * 1e3:6.3f} ms   p95 {xs[int(0.95 * (len(xs) - 1))] * 1e3:6.3f} ms"


def bench_gguf(server, fx) -> None:
    from explorer.sources.hub.client import fetch_repo_listing
    from explorer.sources.hub.weights import fetch_gguf_header_bytes

    try:
        from explorer.gguf.header import parse_gguf_header
    except ImportError:  # pragma: no cover - the parser is another module's job
        parse_gguf_header = None
    listing = fetch_repo_listing(fx.GGUF, endpoint=server.endpoint)
    print("GGUF header reads (parser: %s)" % ("explorer.gguf.header" if parse_gguf_header else "toy"))
    for f in listing.gguf_files:
        header_bytes = fx.GGUF_FILES[f.path][0]

        def parse(b: bytes, f=f, header_bytes=header_bytes):
            if parse_gguf_header is not None:
                return parse_gguf_header(b, file_size=f.size_bytes, name=f.path).header_bytes
            if len(b) < header_bytes:
                from explorer.errors import GGUFNeedMoreBytes

                raise GGUFNeedMoreBytes(len(b), header_bytes)
            return header_bytes

        server.reset_stats()
        got, stats = fetch_gguf_header_bytes(
            fx.GGUF, listing.sha, f.path, size_bytes=f.size_bytes, parse=parse, endpoint=server.endpoint
        )
        moved = server.stats.total_bytes(f.path)
        print(
            f"  {f.path:28s} header {got:>10,} B  file {f.size_bytes:>14,} B  read {moved:>10,} B"
            f" in {stats.requests} requests  = {100 * moved / f.size_bytes:.3f} % of the file"
        )


def bench_cache(reads: int) -> None:
    """Cold hits (first read of a key: DuckDB point queries) and warm hits (the in-memory memo)."""
    from explorer.sources.cache.store import Cache
    from explorer.sources.hub.records import RepoFile, RepoListing, SafetensorsParams

    tmp = tempfile.mkdtemp(prefix="bench-cache-")
    path = Path(tmp) / "cache.duckdb"
    try:
        with Cache.open(path) as cache:
            for i in range(reads):
                sha = f"{i:040x}"
                files = tuple(
                    RepoFile(path=f"model-{j:05d}.safetensors", size_bytes=5 * 10**9, lfs=True) for j in range(30)
                )
                cache.put_listing(RepoListing(repo_id=f"org/m{i}", revision="main", sha=sha, files=files))
                cache.put_config(f"org/m{i}", sha, "config.json", {"hidden_size": 4096, "num_hidden_layers": 32})
                cache.put_safetensors(
                    f"org/m{i}",
                    sha,
                    SafetensorsParams(total_params=8 * 10**9, params_by_dtype={"BF16": 8 * 10**9}, files={"a": 1}),
                )
        print(f"cache hits: {reads} repos cached (30 files each), each read once cold then once warm")
        with Cache.open(path) as cache:  # a fresh object: nothing remembered yet
            calls = [
                ("resolve_revision", lambda i: cache.resolve_revision(f"org/m{i}", "main")),
                ("get_config", lambda i: cache.get_config(f"org/m{i}", f"{i:040x}")),
                ("get_listing", lambda i: cache.get_listing(f"org/m{i}", f"{i:040x}")),
                ("get_safetensors", lambda i: cache.get_safetensors(f"org/m{i}", f"{i:040x}")),
            ]
            for label, call in calls:
                for temp in ("cold", "warm"):
                    times = []
                    for k in range(reads):
                        t0 = time.perf_counter()
                        assert call((k * 37) % reads) is not None
                        times.append(time.perf_counter() - t0)
                    print(f"  {label:17s} {temp}  {_ms(times)}")
        with Cache.open(path) as cache:
            for temp in ("cold", "warm"):
                times = []
                for k in range(reads):
                    i = (k * 37) % reads
                    t0 = time.perf_counter()
                    sha = cache.resolve_revision(f"org/m{i}", "main")
                    assert cache.get_listing(f"org/m{i}", sha) and cache.get_config(f"org/m{i}", sha)
                    assert cache.get_safetensors(f"org/m{i}", sha)
                    times.append(time.perf_counter() - t0)
                print(f"  {'whole model (4)':17s} {temp}  {_ms(times)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_many(server, fx, root: Path, repos: int) -> None:
    from explorer.sources.hub.many import fetch_many

    ids = []
    for i in range(repos):
        rid = f"bench/m{i:02d}"
        d = fx.make_repo(root, rid, {"config.json": {"model_type": "llama", "num_hidden_layers": 2}})
        fx.write_safetensors(d / "model.safetensors", fx.llama_tensors(**fx.TINY))
        ids.append(rid)
    walls = {}
    for workers in (1, 4):
        server.reset_stats()
        t0 = time.perf_counter()
        result = fetch_many(ids, max_workers=workers, endpoint=server.endpoint, progress=lambda *a: None)
        walls[workers] = time.perf_counter() - t0
        assert not result.errors, result.errors
        print(
            f"  pool {workers}: {walls[workers]:6.2f} s for {repos} repos,"
            f" {server.stats.total_requests()} requests, at most {server.stats.max_in_flight} in flight"
        )
    print(f"  speed-up pool 4 / pool 1: {walls[1] / walls[4]:.2f}x")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repos", type=int, default=20, help="repos for the concurrent fetch")
    ap.add_argument("--reads", type=int, default=200, help="cache reads per measurement (at least 200)")
    ap.add_argument("--rtt-ms", type=float, default=30.0, help="latency the server adds to each answer")
    a = ap.parse_args(argv)
    hubserver, fx = import_test_hub()
    root = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    try:
        fx.build_standard_repos(root)
        with hubserver.HubServer(root) as server:
            bench_gguf(server, fx)
            bench_cache(max(a.reads, 200))
            server.set_slow(a.rtt_ms / 1000)
            print(f"fetch_many (listing, config, safetensors header per repo; server adds {a.rtt_ms:g} ms per answer)")
            bench_many(server, fx, root, a.repos)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
