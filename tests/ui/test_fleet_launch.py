"""explorer.ui.fleet_launch: each instance of a placement gets its node, its GPUs and the engine's command."""

from __future__ import annotations

from explorer.fleet.footprints import fleet_cards
from explorer.fleet.place import place
from explorer.fleet.records import ModelDemand
from explorer.fleet.result import Instance
from explorer.sources.shipped import parse_cluster
from explorer.ui.fleet_launch import launch_command, launch_rows

GiB = 1024**3


def test_cards_are_named_by_node_and_index():
    offer = fleet_cards(parse_cluster("2x4xl40s-48g"))
    assert offer.places == tuple((f"l40s-48g#{n}", i) for n in range(2) for i in range(4))
    assert fleet_cards(parse_cluster("1x1xm4-max-128g")).places == ()  # a unified pool has no cards


def test_commands_ask_for_exactly_what_was_charged():
    offer = fleet_cards(parse_cluster("2x4xl40s-48g"))  # l40s-48g: 46,068 MiB a card
    total = offer.cards[0].total_bytes
    assert total == 46_068 * 1024**2
    split = Instance(model="m", replica=0, cards=(5, 6), split_bytes=(20 * GiB, 10 * GiB),
                     fixed_bytes_per_card=2 * GiB, context_tokens=8192, ratio_rule="proportional")  # fmt: skip
    # vLLM: the largest share, 20 GiB of 44.99 GiB = 0.4446, rounded up to 0.45; the cards are GPUs 1, 2 of node 1
    assert launch_command(split, "Qwen/Qwen3-8B", offer, engine="vllm", port=8003) == (
        "CUDA_VISIBLE_DEVICES=1,2 vllm serve Qwen/Qwen3-8B --max-model-len 8192 --port 8003 "
        "--gpu-memory-utilization 0.45 --tensor-parallel-size 2"
    )
    # SGLang: the same share as its static fraction, the cards its tp
    assert launch_command(split, "Qwen/Qwen3-8B", offer, engine="sglang", port=8003) == (
        "CUDA_VISIBLE_DEVICES=1,2 python -m sglang.launch_server --model-path Qwen/Qwen3-8B --context-length 8192 "
        "--port 8003 --mem-fraction-static 0.45 --tp-size 2"
    )
    # llama.cpp: the shards (charge less the fixed 2 GiB) are 18 and 8 GiB: a 0.692 / 0.308 split
    assert launch_command(split, "Qwen/Qwen3-8B-GGUF", offer, engine="llamacpp", port=8003) == (
        "CUDA_VISIBLE_DEVICES=1,2 llama-server -hf Qwen/Qwen3-8B-GGUF -c 8192 -ngl 999 --port 8003 "
        "--tensor-split 0.692,0.308"
    )
    across = Instance(model="m", replica=0, cards=(3, 4), split_bytes=(10 * GiB, 10 * GiB),
                      fixed_bytes_per_card=0, context_tokens=4096, ratio_rule="proportional")  # fmt: skip
    cmd = launch_command(across, "/models/m.gguf", offer, engine="vllm", port=8000)
    assert not cmd.startswith("CUDA_VISIBLE_DEVICES") and cmd.endswith("--distributed-executor-backend ray")
    assert launch_command(across, "/models/m.gguf", offer, engine="llamacpp", port=8000).startswith(
        "llama-server -m /models/m.gguf -c 4096"
    )


def test_one_row_an_instance_each_on_its_own_port():
    offer = fleet_cards(parse_cluster("1x2xl40s-48g"))
    demands = [ModelDemand(name="a", weights_bytes=10 * GiB, replicas=2), ModelDemand(name="b", weights_bytes=5 * GiB)]
    placement = place(demands, offer.cards)
    rows = launch_rows(placement, offer, {"a": "org/a", "b": "org/b"}, engine="vllm")
    assert [(r["model"], r["replica"]) for r in rows] == [("a", "0"), ("a", "1"), ("b", "0")]
    assert [r["command"].split("--port ")[1].split()[0] for r in rows] == ["8000", "8001", "8002"]
    assert all(r["where"].startswith("l40s-48g#0 GPUs ") for r in rows)
    assert rows[0]["command"].split()[3] == "org/a"  # CUDA_VISIBLE_DEVICES=… vllm serve org/a
