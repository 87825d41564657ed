"""``explorer fit`` through the real CLI: the table fits 120 columns, the JSON carries each model's best option."""

from __future__ import annotations

import json

import pytest

from explorer.cli import main


@pytest.fixture(autouse=True)
def no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "none.duckdb"))


def test_json_lists_every_snapshot_model(capsys):
    assert main(["fit", "--cluster", "1x1xh100-80g", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["models"]) >= 80 and out["cache"] is None
    row = next(m for m in out["models"] if m["model"] == "meta-llama/Meta-Llama-3.1-8B")
    assert row["tier"] == 1 and row["replicas"] == 1 and row["max_context"] >= 4096 and row["fits"]
    assert set(out["summary"]) == {"tier 1", "tier 2", "tier 3", "no fit"}


def test_the_table_fits_120_columns_and_suggests_for_lower_tiers(capsys):
    assert main(["fit", "--cluster", "1x1xrtx4090-24g", "--context", "8192"]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 120
    # Qwen3-32B: a published AWQ checkpoint, marked as the quantised fallback; Llama-2-7B was trained for 4,096
    # tokens, which every engine holds it to (llama.cpp's n_ctx_train too), so the change it needs is the context
    assert "* vLLM 1 × rtx4090-24g · int4 AWQ g128" in text and "fits nowhere" in text
    assert "try a context of 4,096 tokens (asked 8,192; the model's limit is 4,096)" in text


def test_a_lower_tier_suggests_fewer_bits(capsys):
    """falcon-180B at 2,048 (its limit) fits nowhere on a 4090 even at Q2_K's 3.35 bits a weight without 55 layers
    on the CPU: the suggestion says so."""
    assert main(["fit", "--cluster", "1x1xrtx4090-24g", "--context", "2048"]) == 0
    assert "try Q2_K weights, 3.35 bits a weight (llama.cpp)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--context", "-1", "argument --context: -1 is out of range: it must be a whole number from 1 to"),
        (
            "--concurrency",
            "0",
            "argument --concurrency/--parallel: 0 is out of range: it must be a whole number from 1",
        ),
        ("--gpu-memory-utilization", "nan", "argument --gpu-memory-utilization: 'nan' is not a finite number"),
        ("--efficiency", "2", "argument --efficiency: 2 is out of range: the efficiency must be 0.01 to 1"),
        ("--top", "-3", "argument --top: -3 is out of range"),
    ],
)
def test_each_number_is_refused_at_the_edge_naming_it(capsys, flag, value, says):
    with pytest.raises(SystemExit) as e:
        main(["fit", "--cluster", "1x1xh100-80g", flag, value])
    assert e.value.code == 2 and says in capsys.readouterr().err
