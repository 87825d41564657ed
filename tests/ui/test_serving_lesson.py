"""explorer.ui.serving_lesson: the frontier the serving lesson draws, from the sizing's own figures."""

from __future__ import annotations

from explorer.sources.snapshot.read import load_snapshot
from explorer.speed.workload import Workload
from explorer.ui.serving_lesson import frontier_rows, published_rows, replica

CHAT = Workload(users=200, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050)


def test_rows_are_the_load_models_figures():
    """Each row is load.at(batch): TPOT in ms, a user's tokens/s = 1000 / TPOT ms, the card's = batch × that."""
    served = replica(load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B"), "h100-80g", "bf16", CHAT)
    assert served is not None and served.usd_per_gpu_hour == 3.49
    rows = frontier_rows(served.load, steps=(1, 64, 256))
    for r in rows:
        point = served.load.at(r["batch"])
        assert r["tpot_ms"] == point.tpot_s * 1e3
        assert r["gpu_tokens_per_s"] == r["batch"] * r["user_tokens_per_s"]
        assert r["fits"] == (r["batch"] <= served.load.capacity)
    assert [r["meets"] for r in rows] == [True, True, False]  # 256 > the 174 the KV cache holds


def test_a_model_too_big_for_the_card_has_no_replica():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    assert replica(shape, "rtx4090-24g", "bf16", CHAT) is None


def test_published_rows_carry_the_checks_figures():
    """NIM's Llama-3.3-70B at 100 in flight: 917.26 tok/s measured; the row's bound and estimate are the
    check's (explorer.plan.throughput_check), their ratios the figures over the measurement."""
    rows = {r["source"]: r for r in published_rows(load_snapshot().shape)}
    nim = rows["nim-l33-70b-fp8-tp2-c100"]
    assert nim["measured"] == 917.26 and nim["engine"] == "nvidia-nim"
    assert nim["bound_ratio"] == nim["bound"] / 917.26 and nim["estimate_ratio"] == nim["estimate"] / 917.26
    assert nim["metric"] == "output tok/s, 100 in flight, 5,000 in / 500 out"
    assert nim["close"] == (1 / 1.5 <= nim["estimate_ratio"] <= 1.5) and not nim["kept_out"]
    assert rows["nim-l33-70b-fp8-tp2-c150"]["kept_out"]  # crc32 of its id is 0 mod 3
