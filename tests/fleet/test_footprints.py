"""Footprints from the engines' accounting, the fleet's cards, and ``explorer place``."""

from __future__ import annotations

import json

import pytest
from support.command_check import parse_line
from support.corpus import load_config, shape_of

from explorer.cli import main
from explorer.engines import vllm
from explorer.engines.layouts import Layout
from explorer.engines.registry import engine_named
from explorer.engines.request import PlanRequest
from explorer.errors import PlacementError
from explorer.fleet.footprints import demand_for, fleet_artifact, fleet_cards, published_gguf, unique_names
from explorer.fleet.place import check_plan, parse_model_term, parse_plan_text, place, validate_plan
from explorer.model.shapes import shape_from_config
from explorer.sources.resolve import load_model
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.units import GiB

H100 = shipped_catalogue().resolve("h100-80g")
#: its config says float32 (tests/engines/test_load_dtype.py works its 1,334,628,352 parameters out)
GRANITE = "ibm-granite__granite-3.1-1b-a400m-instruct"


def test_vllm_footprint_matches_the_engine():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    demand = demand_for(shape, parse_model_term("llama:16k"), gpu=H100)
    assert demand.weights_bytes == shape.weight_bytes() + 131_072 * 128 * 2  # and vLLM's RoPE cache
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


# --- issue 15 -----------------------------------------------------------------------------------------


def test_tensor_parallel_engines_give_even_splitting_demands():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    for engine, even in (("vllm", True), ("sglang", True), ("llamacpp", False)):
        demand = demand_for(
            shape,
            parse_model_term("llama"),
            gpu=H100,
            engine=engine,
            precision="Q4_K_M" if engine == "llamacpp" else None,
        )
        assert demand.even_split is even
        # Llama-3.1-8B: 32 attention heads, 8 KV heads; vLLM and SGLang take a tp size that divides the heads
        assert demand.widths == ((1, 2, 4, 8, 16, 32) if even else ())
    offer = fleet_cards(parse_cluster("1x1xh100-80g + 1x1xrtx4090-24g"))
    assert [c.gpu_class for c in offer.cards] == ["h100-80g", "rtx4090-24g"]


def test_a_64_head_model_is_never_split_over_three_cards():
    """Qwen2.5-72B at 32k on four A100s: three cards hold it by bytes, but vLLM refuses tp 3 ("Total number of
    attention heads (64) must be divisible by tensor parallel size (3)"): the placement takes four."""
    shape = shape_of("Qwen__Qwen2.5-72B")
    a100 = shipped_catalogue().resolve("a100-80g")
    demand = demand_for(shape, parse_model_term("qwen:32k"), gpu=a100)
    offer = fleet_cards(parse_cluster("1x4xa100-80g"))
    assert demand.weights_bytes + 32768 * demand.kv_bytes_per_token + 3 * demand.fixed_bytes_per_card < sum(
        c.usable_bytes for c in offer.cards[:3]
    )
    (inst,) = place([demand], offer.cards).instances
    assert inst.cards == (0, 1, 2, 3)


def test_a_manual_plan_is_charged_against_each_cards_total():
    """lilbee's placement_from_spec: 2 L40S with 10 % free (a fleet already running). The cards offer
    int(48,305,799,168 × 0.1) = 4,830,579,916 bytes free now, but a plan of what runs there is charged against
    int(48,305,799,168 × 0.9) = 43,475,219,251 bytes a card: the resident models are not counted twice."""
    offer = fleet_cards(parse_cluster("1x2xl40s-48g,free=0.1"))
    assert [c.usable_bytes for c in offer.cards] == [4_830_579_916] * 2
    assert [c.usable_bytes for c in offer.plan_cards] == [43_475_219_251] * 2
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    demand = demand_for(shape, parse_model_term("llama:8k"), gpu=offer.gpu, name="llama")
    plan = parse_plan_text(json.dumps({"models": {"llama": {"cards": [0]}}}), fmt="json")
    assert check_plan(plan, [demand], offer.cards)[0].kind == "overflow"
    assert not check_plan(plan, [demand], offer.plan_cards)


def test_place_cli_checks_a_plan_against_totals(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"models": {"meta-llama/Meta-Llama-3.1-8B": {"cards": [0]}}}))
    argv = [
        "place",
        "--cluster",
        "1x2xl40s-48g,free=0.1",
        "--offline",
        "--plan",
        str(plan),
        "--model",
        "meta-llama/Meta-Llama-3.1-8B",
    ]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["instances"][0]["cards"] == [0]


def test_the_context_floor_reaches_the_demand():
    shape = shape_of("Qwen__Qwen3-32B")
    demand = demand_for(shape, parse_model_term("Qwen/Qwen3-32B:32k/8k"), gpu=H100)
    assert (demand.context_tokens, demand.min_context_tokens) == (32768, 8192)


def test_place_cli_prints_each_instances_launch_lines(capsys):
    """Two 8B models on two L40S: each on its own card with its own port, vLLM asked for the share it was charged
    (the JSON carries the same rows as the text)."""
    argv = ["place", "--cluster", "1x2xl40s-48g", "--offline", "--model", "Qwen/Qwen3-8B",
            "--model", "meta-llama/Meta-Llama-3.1-8B"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    lines = [line.strip() for line in text.split("launch (")[1].splitlines()[1:] if line.strip()]
    assert [line.split(" vllm serve ")[0] for line in lines] == [
        "l40s-48g#0: CUDA_VISIBLE_DEVICES=0",
        "l40s-48g#0: CUDA_VISIBLE_DEVICES=1",
    ]
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["8000", "8001"]
    assert all("--gpu-memory-utilization 0." in line and "--max-num-seqs" in line for line in lines)
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["launch"]
    assert [r["command"] for r in rows] == lines


def test_weights_the_engine_cannot_run_on_the_card_are_refused_with_the_reason():
    shape = shape_of("deepseek-ai__DeepSeek-R1")
    term = parse_model_term("deepseek-ai/DeepSeek-R1")
    a100 = shipped_catalogue().get("a100-80g")
    with pytest.raises(PlacementError, match="sglang has no fp8-block kernel for ampere cards"):
        demand_for(shape, term, gpu=a100, engine="sglang")
    # its int4 AWQ what-if runs there
    assert demand_for(shape, term, gpu=a100, engine="sglang", precision="int4-awq").weights_bytes > 0


@pytest.mark.parametrize(
    ("engine", "gpu", "dtype"),
    [("vllm", "h100-80g", "bfloat16"), ("vllm", "t4-16g", "float16"), ("sglang", "h100-80g", "float16")],
)
def test_a_float32_checkpoint_is_charged_at_the_dtype_the_engine_loads_it_at(engine, gpu, dtype):
    """vLLM loads granite's float32 checkpoint at bf16 on an H100, fp16 on a T4; SGLang at fp16 everywhere
    (explorer.engines.load_dtype): 2 bytes a weight either way, and the launch says which."""
    demand = demand_for(shape_of(GRANITE), parse_model_term("granite:4096"), gpu=shipped_catalogue().resolve(gpu),
                        engine=engine)  # fmt: skip
    # 1,334,628,352 × 2 + the RoPE cache at 16 bits (131,072 positions × 64 × 2 = 16,777,216) = 2,686,033,920,
    # not 5,338,513,408 + 33,554,432 at float32; KV 24 layers × 2 × 8 heads × 64 × 2 bytes = 49,152 a token
    assert demand.weights_bytes == 1_334_628_352 * 2 + 131_072 * 64 * 2 == 2_686_033_920
    assert demand.kv_bytes_per_token == 24 * 2 * 8 * 64 * 2 == 49_152
    assert demand.load_flags == (f"--dtype {dtype}",)


def test_a_float32_gemma2_stays_float32_on_a_t4_and_says_so():
    # gemma2 never runs at fp16 in vLLM and a T4 has no bf16: float32 kept, 4 bytes a weight, which --dtype auto
    # would not keep (it would refuse), so the launch writes --dtype float32
    config = load_config("google__gemma-2-9b-it")
    config["torch_dtype"] = "float32"
    shape = shape_from_config(config, name="gemma-2-fp32")
    demand = demand_for(shape, parse_model_term("gemma:4096"), gpu=shipped_catalogue().resolve("t4-16g"))
    # 9,241,705,984 parameters × 4 + the RoPE cache (8,192 positions × 256 × 4 = 8,388,608)
    assert demand.weights_bytes == 9_241_705_984 * 4 + 8_192 * 256 * 4 == 36_975_212_544
    assert demand.load_flags == ("--dtype float32",)


def test_a_what_if_made_while_loading_is_launched_with_its_flag():
    # fp8 made from the bf16 weights while loading: charged at fp8, launched with --quantization fp8; the model's
    # own bf16 weights need no flag
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    term = parse_model_term("llama:4096")
    assert demand_for(shape, term, gpu=H100, precision="fp8").load_flags == ("--quantization fp8",)
    assert demand_for(shape, term, gpu=H100).load_flags == ()


@pytest.mark.parametrize(("engine", "dtype"), [("vllm", "float16"), ("sglang", "float16")])
def test_place_cli_launches_a_float32_checkpoint_at_its_load_dtype(capsys, tmp_path, engine, dtype):
    """The launch line of a placed float32 checkpoint loads it at the dtype its footprint was charged at, and
    the engine's argument table takes it (tests/data/engine_args)."""
    (tmp_path / "granite").mkdir()
    (tmp_path / "granite" / "config.json").write_text(json.dumps(load_config(GRANITE)))
    argv = ["place", "--cluster", "1x1xt4-16g", "--offline", "--engine", engine, "--model", f"{tmp_path}/granite:4096"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"][0]["weights_bytes"] == 2_686_033_920 and out["models"][0]["load_flags"] == [f"--dtype {dtype}"]
    (line,) = out["launch"][0]["command"].split("\n")
    parsed = parse_line(line)
    assert not parsed.problems, parsed.problems
    assert parsed.value("--dtype") == dtype


@pytest.mark.parametrize(("engine", "flag"), [("vllm", "fp8"), ("sglang", "fp8_e4m3")])
def test_the_kv_cache_type_a_demand_was_sized_at_is_launched(engine, flag):
    # Llama-3.1-8B's KV: 32 layers × 2 × 8 heads × 128 × 2 bytes = 131,072 a token at bf16, 65,536 at fp8; the
    # launch asks the engine for that cache, each in its own spelling
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    demand = demand_for(shape, parse_model_term("llama:4096"), gpu=H100, engine=engine, kv_dtype="fp8")
    assert demand.kv_bytes_per_token == 32 * 2 * 8 * 128 == 65_536
    assert demand.load_flags == (f"--kv-cache-dtype {flag}",)


def test_every_instance_of_a_float32_checkpoint_carries_its_load_flags():
    """Placed by the planner (two replicas) or by a manual plan, each instance launches at the dtype the demand was
    charged at: --dtype float16 for granite's float32 checkpoint on a T4."""
    offer = fleet_cards(parse_cluster("1x2xt4-16g"))
    demand = demand_for(shape_of(GRANITE), parse_model_term("granite:4096x2"), gpu=offer.gpu, name="granite")
    placed = place([demand], offer.cards).instances
    plan = parse_plan_text(json.dumps({"models": {"granite": {"cards": [1]}}}), fmt="json")
    checked = validate_plan(plan, [demand], offer.plan_cards).instances
    assert len(placed) == 2 and len(checked) == 1
    assert {i.load_flags for i in (*placed, *checked)} == {("--dtype float16",)}


#: the placeholder a llama.cpp launch names granite's weights by: converted at the type its footprint was sized at
GRANITE_F16 = f"<{GRANITE} converted to a F16 GGUF (convert_hf_to_gguf.py --outtype f16)>"


def test_a_llamacpp_demand_is_the_gguf_its_launch_names():
    """granite's float32 checkpoint converts to an F16 GGUF (convert_hf_to_gguf.py --outtype auto at 0c1e57098): 2
    bytes a weight, 2,669,256,704 B (5,338,513,408 when it was planned as F32); the load flags name that GGUF and
    the conversion's outtype, and the KV cache it was sized at: q8_0, 24 layers × 2 × 512 values × 34/32 bytes =
    26,112 a token (49,152 at f16), with flash attention on, which llama.cpp needs for a quantised V."""
    term = parse_model_term("ibm-granite/granite-3.1-1b-a400m-instruct:4096")
    l40s = shipped_catalogue().resolve("l40s-48g")
    plain = demand_for(shape_of(GRANITE), term, gpu=l40s, engine="llamacpp")
    assert plain.weights_bytes == 1_334_628_352 * 2 == 2_669_256_704
    assert (plain.kv_bytes_per_token, plain.load_flags) == (49_152, (f"-m {GRANITE_F16}",))
    q8 = demand_for(shape_of(GRANITE), term, gpu=l40s, engine="llamacpp", kv_dtype="q8_0")
    assert q8.kv_bytes_per_token == 24 * 2 * 512 * 34 // 32 == 26_112
    assert q8.load_flags == (f"-m {GRANITE_F16}", "-ctk q8_0 -ctv q8_0", "-fa on")
    # a bf16 checkpoint converts to BF16; an int4 what-if nobody publishes is a visible placeholder, as the planner's
    llama = shape_of("meta-llama__Meta-Llama-3.1-8B")  # the corpus names it meta-llama__Meta-Llama-3.1-8B
    assert demand_for(llama, term, gpu=l40s, engine="llamacpp").load_flags == (
        f"-m <{llama.name} converted to a BF16 GGUF (convert_hf_to_gguf.py --outtype bf16)>",
    )
    assert demand_for(llama, term, gpu=l40s, engine="llamacpp", precision="Q4_K_M").load_flags == (
        f"-m <{llama.name} at Q4_K_M GGUF: no published checkpoint known>",
    )


def test_place_cli_launches_llamacpp_on_the_gguf_and_kv_cache_it_sized(capsys, tmp_path):
    """``explorer place --engine llamacpp``: a safetensors checkpoint's line loads the GGUF it converts to (it wrote
    ``-m <the folder>``, which llama-server cannot load), a .gguf file's line loads the file, and both carry the KV
    cache they were sized at; every flag is one llama-server takes at 0c1e57098 (tests/data/engine_args)."""
    from support.llamacpp_models import SPECS, write_gguf

    (tmp_path / "granite").mkdir()
    (tmp_path / "granite" / "config.json").write_text(json.dumps(load_config(GRANITE)))
    gguf = write_gguf(SPECS["llama_gqa"], tmp_path / "llama_gqa.gguf")
    argv = ["place", "--cluster", "1x2xl40s-48g", "--offline", "--engine", "llamacpp", "--kv-dtype", "q8_0",
            "--model", f"{tmp_path}/granite:4096", "--model", f"{gguf}:4096"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"][0]["weights_bytes"] == 2_669_256_704
    lines = [parse_line(row["command"]) for row in out["launch"]]
    assert [line.problems for line in lines] == [[], []]
    # the placeholder names the model as its config does (the folder's name), the file by its path
    assert [line.value("-m") for line in lines] == [GRANITE_F16.replace(GRANITE, "granite"), str(gguf)]
    for line in lines:
        assert [line.value(f) for f in ("-c", "-ngl", "-b", "-ub")] == ["4096", "999", "2048", "512"]
        assert [line.value(f) for f in ("-ctk", "-ctv", "-fa")] == ["q8_0", "q8_0", "on"]
        assert line.value("-hf") is None


def test_a_gguf_repository_is_placed_at_the_file_its_launch_loads(capsys):
    """Qwen/Qwen3-8B-GGUF publishes Q3_K_M to Q8_0 files. The fleet sized its config's bf16 weights (17.2 GiB on
    an L40S at 8,192 tokens) and launched ``-hf Qwen/Qwen3-8B-GGUF``, which loads Q4_K_M: now it sizes the file
    that id loads without a quant (Q4_K_M, else Q8_0, else the first: llama.cpp's find_best_model), 5,007,015,154
    B as published, and names it; ``--quant Q8_0`` takes that file of the repository."""
    model = load_model("Qwen/Qwen3-8B-GGUF", offline=True)
    assert [a.quant for a in model.artifacts] == ["Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]
    assert published_gguf(model.artifacts).files == ("Qwen3-8B-Q4_K_M.gguf",)
    llamacpp = engine_named("llamacpp")
    assert fleet_artifact(model.shape, llamacpp, precision="Q8_0", offered=model.artifacts).files == (
        "Qwen3-8B-Q8_0.gguf",
    )
    assert fleet_artifact(model.shape, llamacpp, precision="Q2_K", offered=model.artifacts).what_if  # none offered
    assert published_gguf(load_model("Qwen/Qwen3-8B", offline=True).artifacts) is None  # safetensors
    argv = ["place", "--cluster", "1x1xl40s-48g", "--offline", "--engine", "llamacpp", "--model", "Qwen/Qwen3-8B-GGUF"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"][0]["weights_bytes"] == published_gguf(model.artifacts).size_bytes == 5_007_015_154
    (line,) = [parse_line(row["command"]) for row in out["launch"]]
    assert not line.problems, line.problems
    assert (line.value("--hf-repo"), line.value("--hf-file")) == ("Qwen/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf")
    # vLLM runs safetensors: the same id is sized at its config's weights, as before
    vllm_demand = demand_for(model.shape, parse_model_term("Qwen/Qwen3-8B-GGUF"), gpu=H100, offered=model.artifacts)
    assert vllm_demand.weights_bytes > 2 * 5_007_015_154


def _place_json(capsys, *argv: str) -> dict:
    assert main(["place", "--offline", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_published_awq_checkpoint_is_placed_and_launched_as_the_plan_loads_it(capsys):
    """``--quant int4-awq`` of Llama 3.1 70B: the plan loads hugging-quants' AWQ-INT4 checkpoint (of the Instruct
    model, same shapes); the fleet launched ``vllm serve meta-llama/Meta-Llama-3.1-70B``, the bf16 weights (131
    GiB) on a card charged for 37 GiB. Now it launches the checkpoint the plan names, sized as the plan sizes it:
    80 layers × 855,638,016 linear weights at 4 bits (34,225,520,640 B) + fp16 scales and int4 zeros a group of
    128 (1,069,547,520 + 267,386,880 B) + the bf16 embeddings and lm_head (2 × 2,101,346,304 B) + the norms
    (2,637,824 B) + vLLM's RoPE cache (131,072 positions × 128 × 2 B = 33,554,432 B) = 39,801,339,904 B."""
    out = _place_json(capsys, "--cluster", "1x8xh100-80g", "--model", "meta-llama/Meta-Llama-3.1-70B", "--quant",
                      "int4-awq")  # fmt: skip
    (model,) = out["models"]
    assert (
        model["weights_bytes"]
        == 34_225_520_640 + 1_069_547_520 + 267_386_880 + 2 * 2_101_346_304 + 2_637_824 + (33_554_432)
        == 39_801_339_904
    )
    assert model["model_ref"] == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"
    assert "stands in for meta-llama/Meta-Llama-3.1-70B" in model["note"]
    (row,) = out["launch"]
    line = parse_line(row["command"])
    assert not line.problems, line.problems
    assert row["command"].split("vllm serve ")[1].split()[0] == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"
    assert line.value("--quantization") is None  # the checkpoint's own config says AWQ
    plan = main(["plan", "meta-llama/Meta-Llama-3.1-70B", "--offline", "--cluster", "1x1xh100-80g", "--engine",
                 "vllm", "--quant", "int4-awq", "--json"])  # fmt: skip
    assert plan == 0
    option = json.loads(capsys.readouterr().out)["options"][0]
    assert option["repo"] == model["model_ref"] and option["per_card"]["weights"] == model["weights_bytes"]


def test_a_published_gguf_quant_is_placed_at_its_repository_file(capsys):
    """``--quant Q8_0`` of Llama 3.1 8B with llama.cpp: the plan loads bartowski's Q8_0 file (of the Instruct
    model); the fleet printed ``-m <… at Q8_0 GGUF: no published checkpoint known>``. Sized as the plan sizes a
    GGUF it has no header of, the Q8_0 mix over the shape: 8,029,995,008 matrix and embedding weights at 34 bytes a
    block of 32 (8,531,869,696 B) + 266,240 norm weights at 2 B = 8,532,402,176 B (the file: 8,540,775,840 B)."""
    out = _place_json(capsys, "--cluster", "1x8xh100-80g", "--engine", "llamacpp", "--model",
                      "meta-llama/Meta-Llama-3.1-8B", "--quant", "Q8_0")  # fmt: skip
    (model,) = out["models"]
    assert model["weights_bytes"] == 8_029_995_008 * 34 // 32 + 266_240 * 2 == 8_532_402_176
    (row,) = out["launch"]
    line = parse_line(row["command"])
    assert not line.problems, line.problems
    assert (line.value("--hf-repo"), line.value("--hf-file")) == (
        "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
        "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf",
    )
    assert line.value("-m") is None


def test_a_precision_nobody_publishes_is_the_plans_what_if_and_says_so(capsys):
    """Qwen3-8B has no published GPTQ checkpoint: the fleet sizes the plan's what-if (int4 GPTQ g128 from the
    shape) and its launch names the placeholder the plan prints, never ``vllm serve Qwen/Qwen3-8B`` (the bf16
    weights); its note says so. The published AWQ of the same model loads from Qwen/Qwen3-8B-AWQ."""
    out = _place_json(capsys, "--cluster", "1x1xh100-80g", "--model", "Qwen/Qwen3-8B", "--quant", "int4-gptq")
    (model,) = out["models"]
    assert model["model_ref"] == "<Qwen/Qwen3-8B at int4 GPTQ g128: no published checkpoint known>"
    assert model["note"] == "no published int4 GPTQ g128 checkpoint of Qwen/Qwen3-8B known: quantise it yourself"
    assert model["model_ref"] in out["launch"][0]["command"]
    awq = _place_json(capsys, "--cluster", "1x1xh100-80g", "--model", "Qwen/Qwen3-8B", "--quant", "int4-awq")
    assert awq["launch"][0]["command"].split("vllm serve ")[1].startswith("Qwen/Qwen3-8B-AWQ ")
    assert awq["models"][0]["note"] == ""  # Qwen's own checkpoint of this very model


def test_an_engine_that_cannot_load_the_precisions_checkpoint_refuses_it_as_the_plan_does():
    """vLLM serves no GGUF, llama.cpp no AWQ safetensors: the plan refuses both (rule ``format``); the fleet sized
    vLLM at Q8_0 and launched the bf16 repository, and llama.cpp at a converted Q4_K_M. Now both say why."""
    model = load_model("meta-llama/Meta-Llama-3.1-8B", offline=True)
    term = parse_model_term("meta-llama/Meta-Llama-3.1-8B")
    with pytest.raises(PlacementError, match="vLLM does not load bartowski/Meta-Llama-3.1-8B-Instruct-GGUF's Q8_0"):
        demand_for(model.shape, term, gpu=H100, precision="Q8_0", checkpoints=model.checkpoints)
    with pytest.raises(PlacementError, match="llama.cpp does not load hugging-quants/.*-AWQ-INT4's int4 AWQ g128"):
        demand_for(model.shape, term, gpu=H100, engine="llamacpp", precision="int4-awq", checkpoints=model.checkpoints)


def test_a_refused_format_names_the_engine_that_loads_it():
    """A crash hunt (explorer place --cluster 1x1xrtx4090-24g --model Qwen/Qwen3-0.6B:Q4_K_M) ended on 'vLLM
    does not load unsloth/Qwen3-0.6B-GGUF's Q4_K_M' though the user never chose vLLM (place's default) and
    ``--engine llamacpp`` places it (2.0 GiB on the card): the hint now names that flag; llama.cpp refusing AWQ
    names vLLM and SGLang, and on CPUs, where only llama.cpp runs, the GGUF quants alone."""
    model = load_model("Qwen/Qwen3-0.6B", offline=True)
    term = parse_model_term("Qwen/Qwen3-0.6B:Q4_K_M")
    with pytest.raises(PlacementError) as gguf:
        demand_for(model.shape, term, gpu=H100, offered=model.artifacts, checkpoints=model.checkpoints)
    assert gguf.value.hint.startswith("place it with --engine llamacpp, which loads GGUF quants")
    awq = parse_model_term("Qwen/Qwen3-0.6B:int4-awq")
    with pytest.raises(PlacementError) as on_gpus:
        demand_for(model.shape, awq, gpu=H100, engine="llamacpp", checkpoints=model.checkpoints)
    assert on_gpus.value.hint.endswith("or with --engine vllm or sglang, which load safetensors")
    with pytest.raises(PlacementError) as on_cpus:
        demand_for(model.shape, awq, gpu=None, checkpoints=model.checkpoints)
    assert on_cpus.value.hint == "on CPUs llama.cpp runs it: place it at a GGUF quant (Q8_0, Q4_K_M)"


def test_a_term_carries_its_own_precision(capsys):
    """``ID:QUANT`` places that model alone at the precision (llama.cpp's ``-hf REPO:QUANT`` spelling), over
    ``--quant``: the 70B at int4 AWQ from hugging-quants' checkpoint beside Qwen3-8B at ``--quant fp8`` from
    Qwen's own FP8 checkpoint, and a term without one at its own weights."""
    out = _place_json(capsys, "--cluster", "1x8xh100-80g", "--model", "meta-llama/Meta-Llama-3.1-70B:int4-awq:8k",
                      "--model", "Qwen/Qwen3-8B", "--model", "Qwen/Qwen3-0.6B:bf16", "--quant", "fp8")  # fmt: skip
    assert [m["model_ref"] for m in out["models"]] == [
        "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
        "Qwen/Qwen3-8B-FP8",
        None,  # bf16 is Qwen3-0.6B's own precision: its own id
    ]
    assert out["models"][0]["weights_bytes"] == 39_801_339_904  # as worked above
    served = [row["command"].split(" serve ")[1].split()[0] for row in out["launch"]]
    assert served == ["hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-0.6B"]


def test_a_model_whose_own_weights_are_published_as_a_gguf_is_placed_at_that_file(capsys):
    """gpt-oss-20b with llama.cpp and no precision: the plan loads ggml-org's ``gpt-oss-20b-MXFP4.gguf`` (the
    checkpoint's own MXFP4 experts, Q8_0 elsewhere: 12,076,119,168 B from the shape, as
    tests/artifacts/test_conversion works it); the fleet converted the safetensors itself (``-m <… converted …>``).
    The plan's card holds 615,329,280 B less: the Q8_0 token embeddings (201,088 × 2,880 × 34 / 32) stay on the
    host."""
    out = _place_json(capsys, "--cluster", "1x1xt4-16g", "--engine", "llamacpp", "--model", "openai/gpt-oss-20b")
    (model,) = out["models"]
    assert model["weights_bytes"] == 12_076_119_168 == 11_460_789_888 + 201_088 * 2_880 * 34 // 32
    assert model["note"] == "ggml-org/gpt-oss-20b-GGUF publishes openai/gpt-oss-20b's own weights as this GGUF"
    line = parse_line(out["launch"][0]["command"])
    assert not line.problems, line.problems
    assert (line.value("--hf-repo"), line.value("--hf-file")) == ("ggml-org/gpt-oss-20b-GGUF", "gpt-oss-20b-MXFP4.gguf")
    assert main(["plan", "openai/gpt-oss-20b", "--offline", "--cluster", "1x1xt4-16g", "--engine", "llamacpp",
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["options"][0]["per_card"]["weights"] == 11_460_789_888
