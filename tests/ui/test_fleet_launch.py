"""explorer.ui.fleet_launch: each instance of a placement gets its node, its GPUs and the engine's command."""

from __future__ import annotations

from collections import Counter

from support.command_check import parse_line
from support.corpus import shape_of

from explorer.artifacts.checkpoints import CONVERT_MARK
from explorer.errors import LlamaCppConfigError
from explorer.fleet.footprints import demand_for, fleet_cards
from explorer.fleet.place import parse_model_term, place
from explorer.fleet.records import ModelDemand
from explorer.fleet.result import Instance
from explorer.hardware.cluster_dict import cluster_from_dict
from explorer.sources.resolve import load_model
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui.fleet_launch import instance_lines, launch_rows

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
    # vLLM: the largest share, 20 GiB of 44.99 GiB = 0.4446, rounded up to 0.45; the cards are GPUs 1, 2 of node 1;
    # the batch sizes are vLLM's defaults on a card under 70 GiB (the footprint's): 256 sequences, 2,048 tokens
    assert instance_lines(split, "Qwen/Qwen3-8B", offer, engine="vllm", port=8003) == [
        "l40s-48g#1: CUDA_VISIBLE_DEVICES=1,2 vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --max-model-len 8192 "
        "--gpu-memory-utilization 0.45 --max-num-seqs 256 --max-num-batched-tokens 2048 --port 8003"
    ]
    # SGLang: the same share as its static fraction, the cards its tp
    assert instance_lines(split, "Qwen/Qwen3-8B", offer, engine="sglang", port=8003) == [
        "l40s-48g#1: CUDA_VISIBLE_DEVICES=1,2 python -m sglang.launch_server --model-path Qwen/Qwen3-8B "
        "--context-length 8192 --mem-fraction-static 0.45 --tp-size 2 --port 8003"
    ]
    # llama.cpp: the shards (charge less the fixed 2 GiB) are 18 and 8 GiB: a 0.692 / 0.308 split
    assert instance_lines(split, "Qwen/Qwen3-8B-GGUF", offer, engine="llamacpp", port=8003) == [
        "l40s-48g#1: CUDA_VISIBLE_DEVICES=1,2 llama-server -hf Qwen/Qwen3-8B-GGUF -c 8192 -b 2048 -ub 512 -ngl 999 "
        "--tensor-split 0.692,0.308 --port 8003"
    ]


def test_an_instance_across_nodes_is_a_line_a_node():
    """Cards 3 (node 0, GPU 3) and 4 (node 1, GPU 0), the second launch across nodes of the placement: vLLM runs
    a rank a node (the head's address named, its master port 29501 + 100), llama.cpp an rpc-server on node 1,
    listed first in the split (llama.cpp puts RPC devices before local GPUs): shards 8 and 10 GiB, 0.444 / 0.556."""
    offer = fleet_cards(parse_cluster("2x4xl40s-48g"))
    across = Instance(model="m", replica=0, cards=(3, 4), split_bytes=(12 * GiB, 10 * GiB),
                      fixed_bytes_per_card=2 * GiB, context_tokens=4096, ratio_rule="proportional")  # fmt: skip
    head, rank1 = instance_lines(across, "/models/m", offer, engine="vllm", port=8000, copy=1)
    assert head.startswith("l40s-48g#0: CUDA_VISIBLE_DEVICES=3 vllm serve /models/m --tensor-parallel-size 2 ")
    assert head.endswith("--nnodes 2 --node-rank 0 --master-addr <l40s-48g#0> --master-port 29601 --port 8000")
    assert rank1.startswith("l40s-48g#1: CUDA_VISIBLE_DEVICES=0 vllm serve /models/m ")
    assert rank1.endswith("--nnodes 2 --node-rank 1 --master-addr <l40s-48g#0> --master-port 29601 --headless")
    assert "ray" not in head
    # SGLang: a rank a node meeting at the head's --dist-init-addr, moved 100 for the second launch across nodes
    head, rank1 = instance_lines(across, "/models/m", offer, engine="sglang", port=8000, copy=1)
    assert head.endswith("--tp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr <l40s-48g#0>:5100 --port 8000")
    assert rank1.startswith("l40s-48g#1: CUDA_VISIBLE_DEVICES=0 python -m sglang.launch_server --model-path /models/m ")
    assert rank1.endswith("--nnodes 2 --node-rank 1 --dist-init-addr <l40s-48g#0>:5100")
    assert instance_lines(across, "/models/m.gguf", offer, engine="llamacpp", port=8000) == [
        "l40s-48g#0: CUDA_VISIBLE_DEVICES=3 llama-server -m /models/m.gguf -c 4096 -b 2048 -ub 512 -ngl 999 "
        "--tensor-split 0.444,0.556 --rpc <l40s-48g#1>:50052 --port 8000",
        "l40s-48g#1: CUDA_VISIBLE_DEVICES=0 rpc-server -H 0.0.0.0 -p 50052",
    ]


def test_llamacpp_loads_the_gguf_and_kv_cache_its_footprint_named():
    """The instance's load flags (a llama.cpp footprint's: the converted GGUF, its KV cache) replace the id as the
    model and follow the split on the head's line; the RPC server on the other node takes none of them."""
    offer = fleet_cards(parse_cluster("2x4xl40s-48g"))
    gguf = "-m <org/m converted to a F16 GGUF (convert_hf_to_gguf.py --outtype f16)>"
    across = Instance(model="m", replica=0, cards=(3, 4), split_bytes=(12 * GiB, 10 * GiB),
                      fixed_bytes_per_card=2 * GiB, context_tokens=4096, ratio_rule="proportional",
                      load_flags=(gguf, "-ctk q8_0 -ctv q8_0", "-fa on"))  # fmt: skip
    head, rpc = instance_lines(across, "org/m", offer, engine="llamacpp", port=8000)
    assert head == (
        f"l40s-48g#0: CUDA_VISIBLE_DEVICES=3 llama-server {gguf} -c 4096 -b 2048 -ub 512 -ngl 999 "
        "--tensor-split 0.444,0.556 --rpc <l40s-48g#1>:50052 -ctk q8_0 -ctv q8_0 -fa on --port 8000"
    )
    assert rpc == "l40s-48g#1: CUDA_VISIBLE_DEVICES=0 rpc-server -H 0.0.0.0 -p 50052"
    parsed = parse_line(head)
    assert not parsed.problems and parsed.value("-hf") is None, parsed.problems


def test_one_row_an_instance_each_on_its_own_port():
    offer = fleet_cards(parse_cluster("1x2xl40s-48g"))
    demands = [ModelDemand(name="a", weights_bytes=10 * GiB, replicas=2), ModelDemand(name="b", weights_bytes=5 * GiB)]
    placement = place(demands, offer.cards)
    rows = launch_rows(placement, offer, {"a": "org/a", "b": "org/b"}, engine="vllm")
    assert [(r["model"], r["replica"]) for r in rows] == [("a", "0"), ("a", "1"), ("b", "0")]
    assert [r["command"].split("--port ")[1].split()[0] for r in rows] == ["8000", "8001", "8002"]
    assert all(r["where"].startswith("l40s-48g#0 GPUs ") for r in rows)
    assert rows[0]["command"].split()[4] == "org/a"  # l40s-48g#0: CUDA_VISIBLE_DEVICES=… vllm serve org/a


def test_a_tight_model_gets_no_launch_line_but_says_how_far_short_it_is():
    """Two L40S (44.99 GiB each, 40.49 GiB usable at 0.9): a 30 GiB model takes card 0, a 60 GiB model fits
    nowhere and is placed tight over both. Its server would run out of memory, so the row says why instead of a
    command; the first model's line keeps port 8000 and the engine's command."""
    offer = fleet_cards(parse_cluster("1x2xl40s-48g"))
    demands = [
        ModelDemand(name="a", weights_bytes=30 * GiB, rank=0),
        ModelDemand(name="b", weights_bytes=60 * GiB, rank=1),
    ]
    placement = place(demands, offer.cards)
    (short,) = placement.tight
    rows = launch_rows(placement, offer, {"a": "org/a", "b": "org/b"}, engine="vllm")
    assert rows[0]["command"].endswith("--port 8000") and "vllm serve org/a" in rows[0]["command"]
    cards = ", ".join(map(str, short.cards))
    assert rows[1]["command"].startswith(
        f"# not launched: b is {short.shortfall_bytes / GiB:.1f} GiB short on card(s) {cards}"
    )
    assert "vllm serve" not in rows[1]["command"]


def test_ports_count_up_on_each_node():
    """Two nodes of one L40S each, two models of one card each: each is the first server on its node, port 8000."""
    offer = fleet_cards(parse_cluster("2x1xl40s-48g"))
    demands = [ModelDemand(name="a", weights_bytes=30 * GiB), ModelDemand(name="b", weights_bytes=30 * GiB)]
    rows = launch_rows(place(demands, offer.cards), offer, {}, engine="vllm")
    assert sorted(r["command"].split(":", 1)[0] for r in rows) == ["l40s-48g#0", "l40s-48g#1"]
    assert [r["command"].rsplit(" ", 1)[1] for r in rows] == ["8000", "8000"]


def test_a_node_of_two_classes_fixes_the_device_order_the_split_assumes():
    """The issue's mixed node (card 0 an RTX 4090, card 1 an L40S), an instance split L40S first: the line runs on
    GPUs 1,0 in the node's own numbering (CUDA_DEVICE_ORDER=PCI_BUS_ID, not CUDA's fastest first), so the 29 GiB
    shard goes to the L40S: shards 29 and 14 GiB, 0.674 / 0.326."""
    mixed = {
        "nodes": [{"name": "mix", "gpus": [{"class": "rtx4090-24g", "count": 1}, {"class": "l40s-48g", "count": 1}]}]
    }
    offer = fleet_cards(cluster_from_dict(mixed, shipped_catalogue()))
    inst = Instance(model="m", replica=0, cards=(1, 0), split_bytes=(30 * GiB, 15 * GiB), fixed_bytes_per_card=GiB,
                    context_tokens=4096, ratio_rule="proportional")  # fmt: skip
    assert instance_lines(inst, "m.gguf", offer, engine="llamacpp", port=8000) == [
        "mix: CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1,0 llama-server -m m.gguf -c 4096 -b 2048 -ub 512 "
        "-ngl 999 --tensor-split 0.674,0.326 --port 8000"
    ]
    one_class = fleet_cards(parse_cluster("1x2xl40s-48g"))
    assert "CUDA_DEVICE_ORDER" not in instance_lines(inst, "m.gguf", one_class, engine="llamacpp", port=8000)[0]


#: fleets the placement sweep lays models on: one node, two nodes on a fabric, two without, one big card
FLEETS = ("1x4xl40s-48g", "2x4xl40s-48g@ib0", "2x2xt4-16g", "1x1xh100-80g")


def _demands(even: bool) -> list[ModelDemand]:
    """Models from 5 to 250 GiB of weights with 4K to 32K of context (128 KiB of KV a token), some with replicas:
    small ones on a card, large ones split over cards and nodes."""
    return [
        ModelDemand(
            name=f"m{gib}",
            weights_bytes=gib * GiB,
            fixed_bytes_per_card=GiB,
            kv_bytes_per_token=128 * 1024,
            context_tokens=context,
            replicas=replicas,
            even_split=even,
        )
        for gib, context, replicas in ((5, 4096, 3), (14, 8192, 2), (40, 32768, 1), (70, 8192, 1), (250, 4096, 1))
    ]


def test_every_fleet_command_is_one_the_engine_takes_on_its_devices_and_ports():
    """The fleet's sibling of tests/plan/test_command_sweep: every line of every placed instance is read by the
    engine's argument table (tests/data/engine_args), names its devices, and a node never serves two servers
    on one port, nor meets two launches at one port; the memory share and batch sizes are written."""
    checked = 0
    for spec in FLEETS:
        offer = fleet_cards(parse_cluster(spec))
        for engine in ("vllm", "sglang", "llamacpp"):
            even = engine != "llamacpp"  # vLLM's and SGLang's tensor parallelism splits evenly
            for demands in (_demands(even), _demands(even)[:2]):
                placement = place(demands, offer.cards)
                rows = launch_rows(placement, offer, {}, engine=engine)
                # a tight model's row is a comment saying how far short it is, never a command
                tight = {t.model for t in placement.tight}
                assert {r["model"] for r in rows if r["command"].startswith("# not launched")} == tight
                lines = [line for r in rows if r["model"] not in tight for line in r["command"].split("\n")]
                parsed = [parse_line(line) for line in lines]
                ports = Counter()
                for p in parsed:
                    assert not p.problems, (spec, engine, p.problems)
                    assert p.env.get("CUDA_VISIBLE_DEVICES"), (spec, p)
                    served = p.value("--port") or (p.value("-p") if p.engine == "rpc-server" else None)
                    ports[(p.where, p.value("--master-port") and f"m{p.value('--master-port')}", served)] += 1
                    if p.engine == "vllm":
                        assert p.value("--gpu-memory-utilization") and p.value("--max-num-seqs")
                    if p.engine == "sglang":
                        assert p.value("--mem-fraction-static")
                    if p.engine == "llamacpp":
                        assert (p.value("-b"), p.value("-ub"), p.value("-ngl")) == ("2048", "512", "999")
                    checked += 1
                assert all(n == 1 for (_w, _m, port), n in ports.items() if port), (spec, engine, ports)
    assert checked >= 60, checked  # 67 lines at this writing: the tight models (250 GiB on small fleets) have none


def test_every_snapshot_models_llamacpp_fleet_line_loads_a_gguf_it_was_sized_at():
    """The 81 models of the shipped snapshot, each placed alone with llama.cpp at q8_0 KV on four 8 × H200 nodes:
    every line is one llama-server takes (tests/data/engine_args), names a GGUF (a GGUF repository's published file,
    --hf-repo/--hf-file; else the converted weights' placeholder with the conversion's steps, ``--outtype`` or
    ``llama-quantize``), never ``-hf`` of a
    safetensors repository (72 lines did, and none carried the KV cache), and carries the q8_0 cache with flash
    attention. phi-2 and granite-3b-code (head size 80) are refused: q8_0's 32-value blocks do not divide it."""
    offer = fleet_cards(parse_cluster("4x8xh200-141g"))
    sources, refused = Counter(), []
    for model_id in load_snapshot().repos:
        model = load_model(model_id, offline=True)
        try:
            demand = demand_for(model.shape, parse_model_term(f"{model_id}:4096"), gpu=offer.gpu, engine="llamacpp",
                                kv_dtype="q8_0", offered=model.artifacts)  # fmt: skip
        except LlamaCppConfigError:
            refused.append(model_id)
            continue
        (row,) = launch_rows(place([demand], offer.cards), offer, {demand.name: model_id}, engine="llamacpp")
        head = parse_line(row["command"].split("\n")[0])
        assert not head.problems, (model_id, head.problems)
        # a repository always with its file (-hf is --hf-repo's short name): never -hf of a safetensors repository
        assert (head.value("--hf-repo") is None) == (head.value("--hf-file") is None), model_id
        assert [head.value(f) for f in ("-ctk", "-ctv", "-fa")] == ["q8_0", "q8_0", "on"], model_id
        published = head.value("--hf-file") is not None
        assert published or CONVERT_MARK in head.value("-m"), (model_id, row["command"])
        sources["published" if published else "converted"] += 1
    assert sorted(refused) == ["ibm-granite/granite-3b-code-instruct-128k", "microsoft/phi-2"]
    assert sources == {"published": 7, "converted": 72}


def test_an_mla_model_split_evenly_splits_its_latent_by_token_too():
    """A placement charges each of a split's cards 1/n of the KV cache; vLLM keeps an MLA latent whole on every
    tp card unless ``--decode-context-parallel-size`` n splits it: Kimi-K2.5 over 8 H200s is placed with it."""
    offer = fleet_cards(parse_cluster("1x8xh200-141g"))
    demand = demand_for(shape_of("moonshotai__Kimi-K2.5"), parse_model_term("moonshotai/Kimi-K2.5:131072"),
                        gpu=offer.gpu)  # fmt: skip
    assert demand.kv_split_widths == (2, 4, 8, 16)  # its tp sizes past 1 (the vision tower has 16 heads)
    (inst,) = place([demand], offer.cards).instances
    assert len(inst.cards) == 8 and inst.kv_shards == 8
    (line,) = instance_lines(inst, "moonshotai/Kimi-K2.5", offer, engine="vllm", port=8000)
    assert "--tensor-parallel-size 8 --decode-context-parallel-size 8 --max-model-len 131072" in line
    # one card, or a width vLLM takes no dcp at, writes none
    demand = ModelDemand(name="m", weights_bytes=GiB, kv_split_widths=(2, 4, 8))
    assert (demand.kv_shards(8), demand.kv_shards(1), demand.kv_shards(3)) == (8, 1, 1)


def test_an_sglang_placement_claims_no_decode_context_split():
    """The kv-split widths are vLLM's ``-dcp`` sizes: SGLang's fleet launch is plain ``--tp-size``, so its Kimi-K2.5
    instance over 8 H200s records no KV split (vLLM's records 8) and its line writes neither flag."""
    offer = fleet_cards(parse_cluster("1x8xh200-141g"))
    shape, term = shape_of("moonshotai__Kimi-K2.5"), parse_model_term("moonshotai/Kimi-K2.5:131072")
    demand = demand_for(shape, term, gpu=offer.gpu, engine="sglang")
    assert demand.kv_split_widths == () and demand_for(shape, term, gpu=offer.gpu).kv_split_widths == (2, 4, 8, 16)
    (inst,) = place([demand], offer.cards).instances
    assert len(inst.cards) == 8 and inst.kv_shards == 1
    (line,) = instance_lines(inst, "moonshotai/Kimi-K2.5", offer, engine="sglang", port=8000)
    assert "--tp-size 8" in line and "--decode-context-parallel-size" not in line
