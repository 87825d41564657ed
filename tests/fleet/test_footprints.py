"""Footprints from the engines' accounting, the fleet's cards, and ``explorer place``."""

from __future__ import annotations

import json

from support.corpus import shape_of

from explorer.cli import main
from explorer.engines import vllm
from explorer.engines.common import Layout, PlanRequest
from explorer.fleet.footprints import demand_for, fleet_cards, unique_names
from explorer.fleet.place import parse_model_term, place
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.units import GiB

H100 = shipped_catalogue().resolve("h100-80g")


def test_vllm_footprint_matches_the_engine():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    demand = demand_for(shape, parse_model_term("llama:16k"), gpu=H100)
    assert demand.weights_bytes == shape.weight_bytes()
    assert demand.kv_bytes_per_token == 131_072 and demand.context_tokens == 16384
    card = vllm.evaluate(
        shape, shape.precision, Layout(engine="vllm", gpu_class=H100.name), H100, PlanRequest(context_tokens=16384), "m"
    ).cards[0]
    # weights + KV + fixed per card = what vLLM charges one card at that context
    assert demand.weights_bytes + demand.kv_bytes_per_token * 16384 + demand.fixed_bytes_per_card == card.total


def test_recurrent_state_is_fixed_not_per_token():
    shape = shape_of("nvidia__Nemotron-H-56B-Base-8K")
    demand = demand_for(shape, parse_model_term("nemotron:4096"), gpu=H100, engine="vllm")
    assert demand.kv_bytes_per_token == 10 * 2 * 8 * 128 * 2  # only the 10 attention layers grow
    assert demand.fixed_bytes_per_card > shape.kv_bytes(0)  # the Mamba state sits in the fixed part


def test_llamacpp_footprint():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    demand = demand_for(shape, parse_model_term("llama"), gpu=None, engine="llamacpp", precision="Q4_K_M")
    assert 4 * GiB < demand.weights_bytes < 5 * GiB
    assert demand.kv_bytes_per_token == 131_072  # f16 K and V rows, 32 layers
    assert demand.context_tokens == 8192


def test_fleet_cards_and_budgets():
    offer = fleet_cards(parse_cluster("1x2xl40s-48g + 1x1xh100-80g"), usable_fraction=0.9)
    assert [c.index for c in offer.cards] == [0, 1, 2]
    assert offer.cards[2].usable_bytes == int(H100.memory_bytes * 0.9)
    assert offer.labels[0].endswith("(l40s-48g)") and offer.unified_budget_bytes is None
    mac = fleet_cards(parse_cluster("1xuma-128g"))
    assert mac.cards == () and mac.unified_budget_bytes == 96 * GiB
    cpu = fleet_cards(parse_cluster("1xcpu-64g"))
    assert cpu.unified_budget_bytes == int(64 * GiB * 0.85)


def test_unique_names():
    assert unique_names(["a", "b", "a"]) == ["a", "b", "a#2"]


def test_place_cli_json_and_refusal_on_a_mac(capsys, tmp_path):
    status = main(
        [
            "place",
            "--cluster",
            "1xuma-64g",
            "--offline",
            "--json",
            "--model",
            "meta-llama/Meta-Llama-3.1-8B:8k",
            "--model",
            "meta-llama/Meta-Llama-3.1-70B:8k",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert status == 3
    assert [i["model"] for i in out["instances"]] == ["meta-llama/Meta-Llama-3.1-8B"]
    assert out["refused"][0]["model"] == "meta-llama/Meta-Llama-3.1-70B"


def test_place_cli_checks_a_manual_plan(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"models": {"meta-llama/Meta-Llama-3.1-8B": {"cards": [0]}, "Qwen/Qwen3-32B": {"cards": [0]}}})
    )
    status = main(
        [
            "place",
            "--cluster",
            "1x2xl40s-48g",
            "--offline",
            "--plan",
            str(plan),
            "--model",
            "meta-llama/Meta-Llama-3.1-8B",
            "--model",
            "Qwen/Qwen3-32B",
        ]
    )
    err = capsys.readouterr().err
    assert status == 2 and "pinned to card 0 needs" in err and "GiB" in err


def test_place_direct_on_real_footprints():
    shapes = {name: shape_of(name) for name in ("meta-llama__Meta-Llama-3.1-8B", "Qwen__Qwen3-0.6B")}
    demands = [
        demand_for(s, parse_model_term(f"{n}:4096"), gpu=H100, rank=i) for i, (n, s) in enumerate(shapes.items())
    ]
    result = place(demands, fleet_cards(parse_cluster("1x1xh100-80g")).cards)
    assert len(result.instances) == 2 and {i.cards for i in result.instances} == {(0,)}  # they share the card


def test_busy_cards_offer_only_what_is_free():
    offer = fleet_cards(parse_cluster("1x4xrtx4090-24g,free=2 + 1x2xl40s-48g,free=0.5"), usable_fraction=0.9)
    rtx = shipped_catalogue().resolve("rtx4090-24g").memory_bytes
    l40s = shipped_catalogue().resolve("l40s-48g").memory_bytes
    assert [c.usable_bytes for c in offer.cards[:4]] == [int(rtx * 0.9)] * 2 + [0, 0]
    assert offer.labels[3].endswith(", busy")
    assert offer.cards[4].usable_bytes == min(int(l40s * 0.9), offer.cards[4].total_bytes // 2)
