"""Cache tests' helpers: run a script in another process, and check a cache file is whole."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def run_script(tmp_path: Path, body: str, *args: str) -> subprocess.Popen:
    script = tmp_path / f"script{time.monotonic_ns()}.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def check_consistent(path: Path) -> int:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    repos = con.execute("SELECT repo, sha, file_count FROM repos").fetchall()
    for repo, sha, count in repos:
        idx = con.execute("SELECT idx FROM files WHERE repo = ? AND sha = ? ORDER BY idx", [repo, sha]).fetchall()
        assert [i for (i,) in idx] == list(range(count)), (repo, sha)
    orphans = con.execute("SELECT count(*) FROM files f ANTI JOIN repos r ON f.repo = r.repo AND f.sha = r.sha")
    assert orphans.fetchone()[0] == 0
    for total, by_dtype in con.execute("SELECT total_params, params_by_dtype FROM safetensors").fetchall():
        assert total == sum(json.loads(by_dtype).values())
    con.close()
    return len(repos)
