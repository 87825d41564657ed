"""``explorer check LOGFILE``: logs of the three engines beside explorer's plan, and --calibrate feeding later plans."""

from __future__ import annotations

import json

import duckdb
import pytest
from support.engine_logs import LOG_CONFIGS, entry

from explorer.cli import main
from explorer.units import GiB


def _log(tmp_path, name: str) -> str:
    path = tmp_path / f"{name}.log"
    path.write_text(entry(name)["excerpt"])
    return str(path)


def test_a_vllm_log(tmp_path, capsys):
    log = _log(tmp_path, "vllm__llama-3.1-8b__H100__4")
    # the log names meta-llama/Llama-3.1-8B-Instruct, not in the snapshot: --model names the same shapes offline
    assert main(["check", log, "--model", "meta-llama/Meta-Llama-3.1-8B", "--offline"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.19.0 · meta-llama/Meta-Llama-3.1-8B · 1 × h100-80g")
    # log, explorer: 14.96 GiB of bf16 weights and vLLM's 32 MiB RoPE cache
    assert "weights" in out and out.count("14.99 GiB") >= 2
    assert "card total (as the engine sees it)  79.19 GiB" in out and "verdict" in out and "agree" in out


def test_json_has_the_promised_fields_with_byte_ints(tmp_path, capsys):
    log = _log(tmp_path, "vllm__gpt-oss-20b__H100__3")
    assert main(["check", log, "--offline", "--json"]) == 0  # openai/gpt-oss-20b is in the snapshot
    d = json.loads(capsys.readouterr().out)
    assert {"engine", "model", "card", "settings", "observed", "predicted", "differences"} <= set(d)
    assert d["engine"] == "vllm" and d["model"] == "openai/gpt-oss-20b" and d["card"] == "h100-80g"
    assert d["settings"]["tensor_parallel_size"] == 2 and d["cards"] == 2
    for part in ("observed", "predicted", "differences"):
        assert all(type(v) is int for v in d[part].values()), part
    assert d["differences"]["weights_bytes"] == d["predicted"]["weights_bytes"] - d["observed"]["weights_bytes"]
    assert d["verdict"] == {"engine_started": True, "explorer_fits": True, "reason": ""}


def test_an_sglang_log(tmp_path, capsys):
    log = _log(tmp_path, "sglang__llama-3.2-3b__48GB__1")
    # the model is named in the log (meta-llama/Llama-3.2-3B, in the snapshot), the card is not
    assert main(["check", log, "--offline"]) == 2
    assert "does not say which card" in capsys.readouterr().err
    # the excerpt's ServerArgs line is cut before mem_fraction_static: --set gives it
    assert main(["check", log, "--offline", "--card", "l40s-48g", "--set", "mem_fraction_static=0.2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["engine"] == "sglang" and d["model"] == "meta-llama/Llama-3.2-3B"
    assert d["observed"]["kv_cache_tokens"] == 25169 and abs(d["differences"]["kv_cache_bytes"]) < 0.15 * GiB


def test_a_llamacpp_log(tmp_path, capsys):
    log = _log(tmp_path, "llamacpp__qwen2.5-14b__RTX3090__1")
    config = str(LOG_CONFIGS / "Qwen__Qwen2.5-14B.json")  # the log names 'Qwen2.5 14B Instruct', not a repo
    assert main(["check", log, "--model", config]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llama.cpp b7896 (ec6c7421e)") and "1 × rtx3090-24g" in out
    # KV: 48 layers × 8 heads × 128 × 2 (K, V) × 2 bytes × 32,768 cells = 6,144 MiB, as logged
    assert "KV cache             6.00 GiB  6.00 GiB  +0.00 GiB" in out


def test_bad_settings_are_typed_errors(tmp_path, capsys):
    log = _log(tmp_path, "vllm__gpt-oss-20b__H100__3")
    assert main(["check", log, "--offline", "--set", "nonsense"]) == 2
    assert "is not KEY=VALUE" in capsys.readouterr().err
    assert main(["check", log, "--offline", "--engine-version", "latest"]) == 2
    assert "is not a version" in capsys.readouterr().err


def test_unreadable_logs_say_which_lines_were_expected(tmp_path, capsys):
    bad = tmp_path / "bad.log"
    bad.write_text("hello\nworld\n")
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no vLLM, SGLang or llama.cpp start-up lines" in err and "Model loading took" in err
    assert main(["check", str(tmp_path / "missing.log")]) == 2
    assert "cannot read the log" in capsys.readouterr().err


def test_calibrate_changes_a_later_plan_and_the_cache_lists_it(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(cache))
    plan = ["plan", "openai/gpt-oss-20b", "--offline", "--cluster", "1x1xh100-80g", "--engine", "vllm", "--json"]
    plan += ["--context", "8192"]
    assert main(plan) == 0
    before = json.loads(capsys.readouterr().out)["options"][0]["per_card"]
    log = _log(tmp_path, "vllm__gpt-oss-20b__H100__3")
    assert main(["check", log, "--offline", "--calibrate"]) == 0
    out = capsys.readouterr().out
    assert "stored calibration for vllm on h100-80g" in out and "calibrated from your log of" in out
    assert main(plan) == 0
    after = json.loads(capsys.readouterr().out)["options"][0]
    # the log's CUDA-graph pool (1.55 GiB) replaces explorer's estimate (0.1 GiB + 2 × 51 graphs × 7 MiB); its
    # non-torch figure was measured at tp 2, so a one-card plan keeps the release's 0.25 GiB
    assert after["per_card"]["overhead"] == round(1.55 * GiB) + GiB // 4 != before["overhead"]
    assert any(n.startswith("calibrated from your log of") for n in after["notes"])
    assert main(["cache", "info"]) == 0
    assert "calibrations  1" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0  # Hub facts only: the calibration stays
    capsys.readouterr()
    assert main(["cache", "info", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["calibrations"]) == 1
    assert main(["cache", "clear", "--calibrations"]) == 0
    assert "removed 1 calibration" in capsys.readouterr().out
    assert main(plan) == 0
    assert json.loads(capsys.readouterr().out)["options"][0]["per_card"] == before


def test_an_older_cache_file_without_the_table_reads_as_none(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "old.duckdb"
    monkeypatch.setenv("EXPLORER_CACHE", str(cache))
    assert main(["cache", "clear"]) == 0  # creates the file
    con = duckdb.connect(str(cache))
    con.execute("DROP TABLE calibrations")
    con.close()
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    assert "calibrations  0" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--help"])
def test_help_lists_the_flags(flag, capsys):
    with pytest.raises(SystemExit):
        main(["check", flag])
    out = capsys.readouterr().out
    assert all(f in out for f in ("--card", "--model", "--calibrate", "--json", "--engine-version"))


def test_a_v0_log_of_064_with_its_refusal(tmp_path, capsys):
    # vllm#10517: Llama-3.1-8B on an RTX 3090 at 29,000 tokens; V0's profiling line and its refusal in tokens
    log = _log(tmp_path, "vllm__llama-3.1-8b__RTX3090__2")
    args = ["check", log, "--model", "meta-llama/Meta-Llama-3.1-8B", "--card", "rtx3090-24g", "--offline"]
    assert main([*args, "--engine-version", "0.6.4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.6.4 · meta-llama/Meta-Llama-3.1-8B · 1 × rtx3090-24g")  # the version given
    assert "KV cache (tokens)                   23,648 tokens" in out  # 1,478 blocks of 16, as the refusal says
    assert "activation peak                     2.99 GiB" in out  # peak_torch_memory 17.98 − weights 14.99
    assert "not in the log" not in out


def test_an_out_of_memory_traceback_alone(tmp_path, capsys):
    # vllm#636: Llama-2-70B in fp16 built on one 80 GB card, vLLM 0.1.2 (torch 2.0's form of the error)
    log = _log(tmp_path, "vllm__llama-2-70b__A100__1")
    assert main(["check", log, "--model", "meta-llama/Llama-2-70b-hf", "--card", "a100-80g", "--offline"]) == 0
    out = capsys.readouterr().out
    assert (
        "tried to allocate                   0.16 GiB" in out and "allocated by PyTorch                78.58 GiB" in out
    )
    assert "not in the log: this log prints no weights line ('Model loading took X GiB')" in out
    assert "verdict                             refused" in out and "agree" in out
