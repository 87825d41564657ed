"""Issue 14's defects, replayed: each hostile input or faulty Hub, run as a real ``explorer`` process.

``python -m explorer.bench.hostile [--root PATH] [--limit-s 40] [--only ID,...]``

Each scenario runs ``python -m explorer ...`` with the code at ``--root``
(default: this checkout; give an older checkout for the "before" column) in
a fresh process, with its own cache, against the test Hub of this checkout
and its fault layer (``tests/support/hubserver.py``, ``hubfaults.py``). A
process gets ``--limit-s`` seconds and 4 GiB of address space. The table says
how each ended: its exit status and the typed error or the traceback's last
line, its time, and what a scenario looks for (the token in the output, a raw
control character, a negative figure, how many requests the Hub saw).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from explorer.bench.hub import TESTS, import_test_hub

ADDRESS_SPACE_BYTES = 4 << 30


@dataclass
class Ctx:
    """What a scenario may use: the checkout under test, a scratch folder, the Hub and its fixtures."""

    root: Path
    tmp: Path
    server: object
    fx: object
    limit_s: float
    env: dict = field(default_factory=dict)

    def explorer(self, *argv: str, env: dict | None = None) -> dict:
        """Run ``python -m explorer ARGV`` with the code under test; its status, output and time."""
        full = {
            **os.environ,
            "PYTHONPATH": str(self.root),
            "HF_ENDPOINT": self.server.endpoint,
            "EXPLORER_CACHE": str(self.tmp / "cache.duckdb"),
            "PYTHONWARNINGS": "ignore",
            **(env or {}),
        }
        for k in [k for k, v in full.items() if v is None]:
            del full[k]
        t0 = time.monotonic()
        try:
            p = subprocess.run(
                [sys.executable, "-m", "explorer", *argv],
                env=full,
                capture_output=True,
                text=True,
                timeout=self.limit_s,
                preexec_fn=_limit_memory,
                cwd=self.tmp,
            )
            out, err, code = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out, err, code = _text(e.stdout), _text(e.stderr), f"killed at {self.limit_s:g} s"
        return {"code": code, "out": out, "err": err, "s": time.monotonic() - t0}


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def outcome(run: dict) -> str:
    """``0``, ``2 ConfigError-like message…``, ``1 Traceback: ValueError: …`` or ``killed at 40 s``."""
    err = run["err"].strip().splitlines()
    if isinstance(run["code"], str):
        return run["code"]
    if "Traceback" in run["err"]:
        return f"{run['code']} traceback: {err[-1][:70]}"
    if run["code"] in (0, 3):
        return f"{run['code']}"
    return f"{run['code']} {err[-1][:80] if err else ''}"


# --- files the scenarios use -----------------------------------------------------------------


def gguf(ctx: Ctx, name: str, **overrides) -> str:
    """A llama GGUF (header over a sparse file) with metadata overridden (Typed values allowed)."""
    from support.gguf_factory import llama_like, llama_metadata

    path = ctx.tmp / name
    md = llama_metadata(**overrides)
    tensors = [] if md.pop("__no_tensors__", False) else llama_like()
    ctx.fx.write_gguf(path, md, tensors, file_size=64 << 20)
    return str(path)


def typed(value, kind: str):
    from support.gguf_factory import VT, Typed

    return Typed(
        value, {"f32": VT.FLOAT32, "i32": VT.INT32, "u32": VT.UINT32, "u64": VT.UINT64, "str": VT.STRING}[kind]
    )


def config_file(ctx: Ctx, name: str, **overrides) -> str:
    config = ctx.fx.config_fixture("meta-llama__Meta-Llama-3.1-8B")
    config.update(overrides)
    folder = ctx.tmp / name
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, allow_nan=True))
    return str(folder)


# --- the scenarios --------------------------------------------------------------------------


def leak(run: dict, token: str) -> str:
    return "token shown" if token in run["out"] + run["err"] else "token not shown"


def s_token_crlf(ctx: Ctx) -> str:
    run = ctx.explorer("shape", ctx.fx.GATED, "--json", env={"HF_TOKEN": ctx.fx.GATED_TOKEN + "\r"})
    return f"{outcome(run)}; {leak(run, ctx.fx.GATED_TOKEN[3:20])}"


def s_gguf_nan(ctx: Ctx) -> str:
    return outcome(
        ctx.explorer("shape", gguf(ctx, "nan-Q4_K_M.gguf", **{"llama.context_length": typed(float("nan"), "f32")}))
    )


def s_gguf_layers_2_32(ctx: Ctx) -> str:
    run = ctx.explorer("shape", gguf(ctx, "huge-Q4_K_M.gguf", **{"llama.block_count": typed(2**32 - 1, "u32")}))
    return f"{outcome(run)} in {run['s']:.1f} s"


def s_gguf_layers_1e7(ctx: Ctx) -> str:
    run = ctx.explorer("shape", gguf(ctx, "deep-Q4_K_M.gguf", **{"llama.block_count": typed(10**7, "u32")}))
    return f"{outcome(run)} in {run['s']:.1f} s"


def s_gguf_negative_key_length(ctx: Ctx) -> str:
    run = ctx.explorer(
        "shape", gguf(ctx, "neg-Q4_K_M.gguf", **{"llama.attention.key_length": typed(-512, "i32")}), "--json"
    )
    if run["code"] == 0:
        return f"0, KV per token {json.loads(run['out'])['kv_bytes_per_token']:,} bytes"
    return outcome(run)


def s_gguf_rwkv_no_tensors(ctx: Ctx) -> str:
    md = {
        "general.architecture": "rwkv6",
        "rwkv6.block_count": 24,
        "rwkv6.embedding_length": 2048,
        "rwkv6.wkv.head_size": 64,
        "__no_tensors__": True,
    }
    return outcome(ctx.explorer("shape", gguf(ctx, "rwkv-Q4_K_M.gguf", **md)))


def s_poisoned_cache(ctx: Ctx) -> str:
    repo = "tmp-org/poisoned-GGUF"
    folder = ctx.tmp / "hub" / repo
    folder.mkdir(parents=True, exist_ok=True)
    from support.gguf_factory import llama_like, llama_metadata

    ctx.fx.write_gguf(
        folder / "p-Q4_K_M.gguf",
        llama_metadata(**{"llama.context_length": typed(float("nan"), "f32")}),
        llama_like(),
        file_size=64 << 20,
    )
    online = ctx.explorer("shape", repo)
    offline = ctx.explorer("shape", repo, "--offline")
    return f"online: {outcome(online)} | then --offline: {outcome(offline)}"


def s_config_layers_1e7(ctx: Ctx) -> str:
    run = ctx.explorer("shape", config_file(ctx, "layers", num_hidden_layers=10**7))
    return f"{outcome(run)} in {run['s']:.1f} s"


def s_config_deep(ctx: Ctx) -> str:
    folder = ctx.tmp / "deep"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama", "hidden_size": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return outcome(ctx.explorer("shape", str(folder)))


def s_place_plan_deep(ctx: Ctx) -> str:
    (ctx.tmp / "deep-plan.json").write_text("[" * 100_000 + "]" * 100_000)
    return outcome(
        ctx.explorer(
            "place",
            "--cluster",
            "1x1xh100-80g",
            "--model",
            "Qwen/Qwen3-8B",
            "--offline",
            "--plan",
            str(ctx.tmp / "deep-plan.json"),
        )
    )


def s_config_nan_yarn(ctx: Ctx) -> str:
    rope = {"rope_type": "yarn", "factor": float("nan"), "original_max_position_embeddings": 8192}
    return outcome(ctx.explorer("shape", config_file(ctx, "yarn", rope_scaling=rope)))


def cli(*argv: str) -> Callable[[Ctx], str]:
    def scenario(ctx: Ctx) -> str:
        return outcome(ctx.explorer(*argv))

    return scenario


def s_mfs_2(ctx: Ctx) -> str:
    run = ctx.explorer(
        "plan",
        "Qwen/Qwen3-8B",
        "--offline",
        "--cluster",
        "1x1xh100-80g",
        "--engine",
        "sglang",
        "--mem-fraction-static",
        "2",
        "--json",
    )
    if run["code"] in (0, 3):
        best = json.loads(run["out"])["options"][0]["per_card"]
        return f"{run['code']}, best option's KV pool {best['kv_cache'] / 2**30:,.1f} GiB, usable {best['usable'] / 2**30:,.1f} GiB"
    return outcome(run)


def s_bad_endpoint(ctx: Ctx) -> str:
    return outcome(ctx.explorer("shape", "nobody/model", env={"HF_ENDPOINT": "http://127.0.0.1:99999"}))


def s_control_chars(ctx: Ctx) -> str:
    path = gguf(ctx, "evil-Q4_K_M.gguf", **{"general.architecture": "\x1b[2J\x1b[31mllama\u202e"})
    run = ctx.explorer("shape", path)
    raw = "\x1b" in run["out"] or "\u202e" in run["out"]
    return f"{outcome(run)}; {'raw ESC/RLO printed' if raw else 'escaped'}"


def hub_fault(mode: str, **params) -> Callable[[Ctx], str]:
    def scenario(ctx: Ctx) -> str:
        with ctx.server.fault(mode, r"^/api/models/", **params):
            run = ctx.explorer("shape", "Qwen/Qwen3-8B", "--timeout", "3")
        said = " (snapshot, says why)" if run["code"] == 0 and "Hub failed" in run["out"] else ""
        return f"{outcome(run)}{said} in {run['s']:.1f} s"

    return scenario


def s_short_ranges(ctx: Ctx) -> str:
    ctx.server.reset_stats()
    with ctx.server.fault("short-range", r"tiny-Q4_K_M\.gguf$", short_bytes=16):
        run = ctx.explorer("shape", f"{ctx.fx.GGUF}:tiny-Q4_K_M.gguf")
    return f"{outcome(run)}; {ctx.server.stats.total_requests('tiny-Q4_K_M.gguf'):,} range requests in {run['s']:.1f} s"


def s_429(ctx: Ctx) -> str:
    with ctx.server.fault("status", r"^/api/models/", status=429, headers={"Retry-After": "1"}, times=2):
        run = ctx.explorer("shape", ctx.fx.SINGLE)
    return f"{outcome(run)} in {run['s']:.1f} s"


def s_404_one_file(ctx: Ctx) -> str:
    with ctx.server.fault("status", r"big-vocab-Q8_0\.gguf$", status=404):
        run = ctx.explorer("shape", ctx.fx.GGUF)
    offers = [ln for ln in run["out"].splitlines() if ln.startswith("offers")]
    return f"{outcome(run)}; {len(offers)} artifacts offered"


def s_stale(ctx: Ctx) -> str:
    first = ctx.explorer("shape", ctx.fx.SINGLE)
    import duckdb

    con = duckdb.connect(str(ctx.tmp / "cache.duckdb"))
    con.execute("UPDATE revisions SET fetched_at = fetched_at - 3 * 86400")  # the mapping is 3 days old
    con.close()
    with ctx.server.fault("status", r"^/api/models/", status=503):
        run = ctx.explorer("shape", ctx.fx.SINGLE, "--json")
    if run["code"] == 0:
        got = json.loads(run["out"])["source"]
        return f"0, answered from the {got['origin']}" + (" (stale)" if got.get("stale") else "")
    return f"first {outcome(first)}; Hub down: {outcome(run)}"


def s_endpoint_key(ctx: Ctx) -> str:
    other = ctx.tmp / "mirror"
    ctx.fx.make_repo(
        other,
        ctx.fx.SINGLE,
        {
            "config.json": {
                **json.loads((ctx.tmp / "hub" / ctx.fx.SINGLE / "config.json").read_text()),
                "num_hidden_layers": 7,
            }
        },
    )
    hubserver, _ = import_test_hub()
    ctx.explorer("shape", ctx.fx.SINGLE, "--revision", "main")
    with hubserver.HubServer(other) as mirror:
        run = ctx.explorer("shape", ctx.fx.SINGLE, "--json", env={"HF_ENDPOINT": mirror.endpoint})
    if run["code"] == 0:
        got = json.loads(run["out"])
        return f"0, {got['layers']} layers from the {got['source']['origin']} (the mirror has 7)"
    return outcome(run)


def s_subfolder(ctx: Ctx) -> str:
    repo = "tmp-org/folders-GGUF"
    from support.gguf_factory import llama_like, llama_metadata

    ctx.fx.write_gguf(
        ctx.tmp / "hub" / repo / "sub" / "x-Q4_K_M.gguf", llama_metadata(), llama_like(), file_size=64 << 20
    )
    return outcome(ctx.explorer("shape", f"{repo}:sub/x-Q4_K_M.gguf"))


def s_not_duckdb(ctx: Ctx) -> str:
    notes = ctx.tmp / "notes.txt"
    notes.write_text("my notes, not a cache\n")
    run = ctx.explorer("cache", "clear", env={"EXPLORER_CACHE": str(notes)})
    kept = notes.exists() and notes.read_bytes() == b"my notes, not a cache\n"
    return f"{outcome(run)}; the file {'kept' if kept else 'renamed: ' + str([p.name for p in ctx.tmp.glob('notes*')])}"


def s_export(ctx: Ctx, target: str) -> str:
    ctx.explorer("shape", ctx.fx.SINGLE)  # a cache to export
    return outcome(ctx.explorer("cache", "export", target))


SCENARIOS: dict[str, tuple[str, Callable[[Ctx], str]]] = {
    "1": ("token with CR (HF_TOKEN=$'hf_…\\r'), shape --json", s_token_crlf),
    "2a": ("GGUF context_length NaN", s_gguf_nan),
    "2b": ("GGUF block_count 2^32-1", s_gguf_layers_2_32),
    "2c": ("GGUF block_count 10^7", s_gguf_layers_1e7),
    "2d": ("GGUF key_length -512", s_gguf_negative_key_length),
    "2e": ("rwkv6 GGUF without tensors", s_gguf_rwkv_no_tensors),
    "2f": ("bad header from the Hub, then --offline", s_poisoned_cache),
    "3a": ("config num_hidden_layers 10^7", s_config_layers_1e7),
    "3b": ("config nested 100,000 deep", s_config_deep),
    "3c": ("place --plan nested 100,000 deep", s_place_plan_deep),
    "3d": ("config yarn factor NaN", s_config_nan_yarn),
    "4a": ("--context -1", cli("shape", "Qwen/Qwen3-8B", "--offline", "--context", "-1")),
    "4b": (
        "--mem-fraction-static nan",
        cli("plan", "Qwen/Qwen3-8B", "--offline", "--cluster", "1x1xh100-80g", "--mem-fraction-static", "nan"),
    ),
    "4c": (
        "--tensor-split 1e308,1e308",
        cli(
            "plan",
            "Qwen/Qwen3-8B",
            "--offline",
            "--cluster",
            "1x2xh100-80g",
            "--engine",
            "llamacpp",
            "--tensor-split",
            "1e308,1e308",
        ),
    ),
    "4d": ("--timeout nan", cli("shape", "Qwen/Qwen3-8B", "--timeout", "nan")),
    "4e": ("--timeout -1", cli("shape", "Qwen/Qwen3-8B", "--timeout", "-1")),
    "4f": ("--timeout inf", cli("shape", "Qwen/Qwen3-8B", "--timeout", "inf")),
    "4g": ("HF_ENDPOINT=http://127.0.0.1:99999", s_bad_endpoint),
    "4h": ("--mem-fraction-static 2", s_mfs_2),
    "5": ("ANSI and RLO in a GGUF's general.architecture", s_control_chars),
    "6a": ("HTML listing", hub_fault("html")),
    "6b": ("non-UTF-8 listing", hub_fault("not-utf8")),
    "6c": ("redirect loop", hub_fault("redirect-loop")),
    "7a": ("drip, 1 byte / 2 s, --timeout 3", hub_fault("drip", drip_s=2.0)),
    "7b": ("ranges answered 16 bytes short", s_short_ranges),
    "8a": ("429 + Retry-After 1, twice", s_429),
    "8b": ("404 on one GGUF file of a repo", s_404_one_file),
    "8c": ("Hub 503, cache entry 3 days old", s_stale),
    "9": ("same repo id on a mirror (HF_ENDPOINT)", s_endpoint_key),
    "10a": ("org/name:sub/x-Q4_K_M.gguf", s_subfolder),
    "10b": ("a 5,000-character id", cli("shape", "o/" + "x" * 5000, "--offline")),
    "11a": (
        "place --plan nope.json",
        cli("place", "--cluster", "1x1xh100-80g", "--model", "Qwen/Qwen3-8B", "--offline", "--plan", "nope.json"),
    ),
    "11b": (
        "place --plan a folder",
        cli("place", "--cluster", "1x1xh100-80g", "--model", "Qwen/Qwen3-8B", "--offline", "--plan", "/"),
    ),
    "11c": ("cache export /nonexistent/x.json", lambda ctx: s_export(ctx, "/nonexistent-dir-14/x.json")),
    "11d": ("cache export to a folder", lambda ctx: s_export(ctx, "/")),
    "11e": (
        "snapshot refresh --repos /nonexistent",
        cli("snapshot", "refresh", "--repos", "/nonexistent-14", "--offline"),
    ),
    "11f": (
        "snapshot seed --configs /nonexistent",
        cli("snapshot", "seed", "--configs", "/nonexistent-14", "--provenance", "/nonexistent-14", "--out", "s.json"),
    ),
    "12a": ("EXPLORER_CACHE is a text file; cache clear", s_not_duckdb),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=TESTS.parent, help="the checkout whose code runs")
    ap.add_argument("--limit-s", type=float, default=40.0, help="seconds a process may run")
    ap.add_argument("--only", default="", help="scenario ids, comma separated")
    a = ap.parse_args(argv)
    hubserver, fx = import_test_hub()
    only = {s for s in a.only.split(",") if s}
    print(f"| # | scenario | {a.root} |\n|---|---|---|")
    for key, (title, scenario) in SCENARIOS.items():
        if only and key not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            tmp_path = Path(tmp)
            shutil.copytree(_standard_tree(fx), tmp_path / "hub", copy_function=_sparse_copy)
            with hubserver.HubServer(tmp_path / "hub") as server:
                ctx = Ctx(root=a.root, tmp=tmp_path, server=server, fx=fx, limit_s=a.limit_s)
                try:
                    result = scenario(ctx)
                except Exception as e:
                    result = f"harness: {type(e).__name__}: {e}"
        print(f"| {key} | {title} | {re.sub(r'[|]', '/', result)} |", flush=True)
    for tree in _TREE:
        shutil.rmtree(tree, ignore_errors=True)


_TREE: list[Path] = []


def _standard_tree(fx) -> Path:
    """The tests' standard repo tree, built once per run."""
    if not _TREE:
        _TREE.append(fx.build_standard_repos(Path(tempfile.mkdtemp(prefix="hostile-tree-"))))
    return _TREE[0]


def _sparse_copy(src: str, dst: str) -> None:
    size = Path(src).stat().st_size
    with open(src, "rb") as f:
        head = f.read(min(size, 1 << 24))
    with open(dst, "wb") as f:
        f.write(head)
        f.truncate(size)


if __name__ == "__main__":
    main()
