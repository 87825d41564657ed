"""How many fetched records survive when several processes resolve models into one cache at once.

``python -m explorer.bench.cache_writers [--processes 6] [--repos 60] [--root PATH]``

Serves ``--repos`` tiny repos on the test Hub (``tests/support/hubserver.py``,
a source checkout), then starts ``--processes`` processes at once; each
resolves its share of the repos, one after another, into the same
``EXPLORER_CACHE`` with the code at ``--root`` (default: this checkout; give
an older checkout to compare). Every repo read from the Hub is three records
(config.json, the safetensors counts, the listing) and a revision mapping.
At the end it counts the repos whose rows are all in the cache, and prints
kept / fetched. A benchmark, not a test: the figures depend on timing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from explorer.bench.hub import import_test_hub

CHILD = """
    import sys, time
    from explorer.sources.resolve import resolve_model
    origins = []
    for repo in sys.argv[1:]:
        origins.append(resolve_model(repo, progress=lambda *a: None).origin)
    print(" ".join(origins))
"""


def make_repos(root: Path, count: int, fixtures) -> list[str]:
    """``count`` tiny Llama repos (config.json and one model.safetensors) under ``root``."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
    }  # fmt: skip
    repos = []
    for i in range(count):
        repo = f"bench-org/tiny-{i:04d}"
        folder = fixtures.make_repo(root, repo, {"config.json": {**config, "vocab_size": 256 + i}})
        fixtures.write_safetensors(folder / "model.safetensors", fixtures.llama_tensors(**fixtures.TINY))
        repos.append(repo)
    return repos


def count_cached(cache: Path, repos: list[str]) -> int:
    """Repos whose listing, config and safetensors rows are all in the cache file."""
    import duckdb

    con = duckdb.connect(str(cache), read_only=True)
    try:
        listed = {r for (r,) in con.execute("SELECT DISTINCT repo FROM repos").fetchall()}
        configs = {r for (r,) in con.execute("SELECT DISTINCT repo FROM configs").fetchall()}
        counts = {r for (r,) in con.execute("SELECT DISTINCT repo FROM safetensors").fetchall()}
    finally:
        con.close()
    return len(set(repos) & listed & configs & counts)


def run(processes: int, repos_count: int, code_root: Path) -> dict:
    hubserver, fixtures = import_test_hub()
    with tempfile.TemporaryDirectory(prefix="bench-writers-") as tmp:
        tmp_path = Path(tmp)
        repos = make_repos(tmp_path / "hub", repos_count, fixtures)
        script = tmp_path / "child.py"
        script.write_text(textwrap.dedent(CHILD))
        cache = tmp_path / "cache.duckdb"
        with hubserver.HubServer(tmp_path / "hub") as server:
            env = {**os.environ, "HF_ENDPOINT": server.endpoint, "EXPLORER_CACHE": str(cache),
                   "PYTHONPATH": str(code_root), "PYTHONWARNINGS": "ignore"}  # fmt: skip
            env.pop("HF_HUB_OFFLINE", None)
            shares = [repos[i::processes] for i in range(processes)]
            t0 = time.monotonic()
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
            children = [subprocess.Popen([sys.executable, str(script), *share], env=env, **pipes) for share in shares]
            outs = [c.communicate(timeout=600) for c in children]
            elapsed = time.monotonic() - t0
        failed = [err.strip().splitlines()[-1] for c, (_, err) in zip(children, outs, strict=True) if c.returncode]
        origins = " ".join(out for out, _ in outs).split()
        return {
            "processes": processes,
            "fetched": origins.count("hub"),
            "kept": count_cached(cache, repos) if cache.exists() else 0,
            "seconds": elapsed,
            "failed": failed,
        }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--repos", type=int, default=60)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="the code to run")
    a = ap.parse_args(argv)
    got = run(a.processes, a.repos, a.root)
    print(
        f"{got['processes']} processes, {got['fetched']} repos read from the Hub, {got['kept']} of them wholly"
        f" in the cache afterwards ({got['kept'] / max(got['fetched'], 1):.0%}), {got['seconds']:.1f} s"
        + (f"; {len(got['failed'])} processes failed: {got['failed'][:2]}" if got["failed"] else "")
    )


if __name__ == "__main__":
    main()
