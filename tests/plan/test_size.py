"""``size`` (explorer/plan/size.py): card classes ranked by what serving a workload costs an hour."""

from __future__ import annotations

import pytest
from support.corpus import shape_of

from explorer.plan.size import size
from explorer.sources.shipped import shipped_catalogue
from explorer.speed.prices import Price, PriceTable
from explorer.speed.workload import Workload

LLAMA_8B = shape_of("meta-llama__Meta-Llama-3.1-8B")
CHAT = Workload(users=200, prompt_tokens=2000, answer_tokens=500, ttft_s=1.0, tpot_s=0.050)


def prices(**usd: float) -> PriceTable:
    return PriceTable(tuple(Price(gpu_class=name.replace("_", "-"), usd_per_gpu_hour=v) for name, v in usd.items()))


def test_size_chooses_between_two_classes_by_cost():
    """An H100 holds more sequences within 50 ms a token than an A100 (3.35 vs 2.04 TB/s), so the A100 needs
    more cards; which class comes first follows the prices: cards × USD a card-hour."""
    cheap_a100 = size(LLAMA_8B, CHAT, shipped_catalogue(), prices(h100_80g=3.0, a100_80g=1.0))
    h100, a100 = (next(c for c in cheap_a100.clusters if c.gpu_class == n) for n in ("h100-80g", "a100-80g"))
    assert a100.cards > h100.cards and a100.sizing.replicas > 1  # a workload that needs replicas
    assert [c.gpu_class for c in cheap_a100.clusters] == ["a100-80g", "h100-80g"]
    assert a100.sizing.usd_per_hour == pytest.approx(a100.cards * 1.0)
    dear_a100 = size(LLAMA_8B, CHAT, shipped_catalogue(), prices(h100_80g=3.0, a100_80g=3.0))
    assert [c.gpu_class for c in dear_a100.clusters] == ["h100-80g", "a100-80g"]
    d = dear_a100.to_dict()["clusters"][0]
    assert {"gpu_class", "cards", "usd_per_hour", "option", "binding"} <= set(d)
    assert d["usd_per_hour"] == pytest.approx(d["cards"] * 3.0) and d["load"]["tpot_s"] <= 0.050


def test_a_workload_no_class_meets_says_by_how_much_and_what_would():
    """TPOT 1 ms: no card decodes an 8B model that fast; the answer still lists the closest and the way out."""
    result = size(LLAMA_8B, Workload(users=10, tpot_s=0.001), shipped_catalogue(), prices(h100_80g=3.0))
    assert result.clusters and not result.met
    assert result.clusters[0].sizing.shortfall["tpot"] > 1
    assert "× the 1.0 ms target" in result.advice[0] and "lower precision" in result.advice[0]


def test_own_cluster_is_one_more_candidate():
    from explorer.sources.shipped import parse_cluster

    result = size(LLAMA_8B, CHAT, shipped_catalogue(), prices(a100_80g=1.0), own=parse_cluster("1x4xl40s-48g"))
    mine = next(c for c in result.clusters if c.own)
    assert mine.gpu_class == "l40s-48g" and mine.own_cards == 4 and mine.sizing.usd_per_hour is None
