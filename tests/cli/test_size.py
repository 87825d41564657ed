"""``explorer size`` and ``explorer plan --users`` through the real CLI."""

from __future__ import annotations

import json

from support.corpus import CONFIGS

from explorer.cli import main

LLAMA_8B = str(CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json")
WORKLOAD = ("--users", "200", "--prompt", "2000", "--answer", "500", "--ttft", "1s", "--tpot", "50ms")


def test_size_json_lists_clusters_best_first(capsys):
    status = main(["size", LLAMA_8B, *WORKLOAD, "--classes", "h100-80g,a100-80g", "--offline", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and out["met"] and out["workload"]["users"] == 200
    clusters = out["clusters"]
    assert [c["gpu_class"] for c in clusters] == sorted(
        (c["gpu_class"] for c in clusters),
        key=lambda n: next(c["usd_per_hour"] for c in clusters if c["gpu_class"] == n),
    )
    for c in clusters:
        assert {"gpu_class", "cards", "usd_per_hour", "option", "binding", "command"} <= set(c)
        assert c["cards"] == (c["load"]["replicas"] + c["load"]["prefill_replicas"]) * c["load"]["cards_per_replica"]
        assert c["load"]["tpot_s"] <= 0.050 and c["load"]["ttft_s"] <= 1.0


def test_size_table_and_an_unmet_workload(capsys):
    status = main(["size", LLAMA_8B, "--users", "10", "--tpot", "1ms", "--classes", "h100-80g", "--offline"])
    out = capsys.readouterr().out
    assert status == 3
    assert "h100-80g" in out and "not met: time per output token" in out


def test_size_needs_a_workload(capsys):
    assert main(["size", LLAMA_8B, "--offline"]) == 2
    assert "--users" in capsys.readouterr().err


def test_plan_with_a_workload_sizes_each_option(capsys):
    status = main(["plan", LLAMA_8B, "--cluster", "1x1xh100-80g", *WORKLOAD, "--engine", "vllm", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0 and out["workload"]["tpot_s"] == 0.05
    first = out["options"][0]
    assert first["command"].startswith("vllm serve") and "--max-model-len 2500" in first["command"]
    assert first["workload"]["replicas"] >= 2 and first["workload"]["batch"] <= first["max_concurrency"]


def test_plan_users_past_one_replicas_kv_cache_shows_the_queue(capsys):
    """300 users at 2,000 + 500 tokens on one H100: each option's one replica holds fewer (vLLM's KV cache),
    so the rest wait, named by the KV capacity; the sizing spreads them over replicas instead, and the TPOT p90
    it checks (``--tpot-percentile p90``) is at least its mean."""
    argv = ["plan", LLAMA_8B, "--cluster", "1x1xh100-80g", "--users", "300", "--prompt", "2000", "--answer", "500",
            "--tpot", "30ms", "--tpot-percentile", "p90", "--offline"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workload"]["tpot_percentile"] == "p90"
    first = out["options"][0]["workload"]
    alone = first["one_replica"]
    assert alone["queued"] == 300 - alone["batch"] > 0 and alone["binding"] == "KV capacity"
    assert alone["ttft_s"] > first["ttft_s"]
    assert first["tpot_s"] <= first["tpot_p90_s"] <= 0.030
    assert main(argv) == 0
    assert "wait for room in the KV cache (KV capacity)" in capsys.readouterr().out
