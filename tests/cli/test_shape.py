"""``explorer shape`` on real configs, through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys

from support.corpus import CONFIGS

from explorer.cli import main


def test_shape_json_has_the_promised_fields(capsys):
    assert main(["shape", str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json"), "--json", "--context", "8192"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "model_type",
        "params",
        "active_params",
        "layers",
        "attention",
        "kv_heads",
        "head_dim",
        "experts",
        "max_context",
        "kv_bytes_per_token",
        "approximate",
        "notes",
    ):
        assert key in out
    assert out["params"] == 8_030_261_248 and out["kv_bytes_per_token"] == 131_072
    assert out["kv_bytes"] == 8192 * 131_072 and out["attention"] == "GQA"


def test_shape_table_and_kv_dtype(capsys, tmp_path):
    folder = tmp_path / "Qwen3-30B-A3B"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "Qwen__Qwen3-30B-A3B.json").read_text())
    assert main(["shape", str(folder), "--kv-dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "30.53B" in out and "128 routed" in out and "49,152 bytes (fp8)" in out and "GiB" in out


def test_bad_inputs_exit_2_with_a_message(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hello": "world"}')
    proc = subprocess.run([sys.executable, "-m", "explorer", "shape", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a model config" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "explorer", "shape", str(tmp_path / "missing.json")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr
