"""llama.cpp options in plan(): one card, partial offload, RPC, CPU, unified memory, exact GGUF figures."""

from __future__ import annotations

import pytest
from support.command_check import parse_line
from support.corpus import shape_of
from support.llamacpp_headers import header_for

from explorer.artifacts.offer import original_artifact, plan_artifacts, what_if_artifact
from explorer.engines.llamacpp import engine, launch
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.model import llama_model_from_gguf
from explorer.engines.llamacpp.offload import seats_from_cards
from explorer.engines.llamacpp.settings import LlamaCppSettings
from explorer.engines.request import PlanRequest
from explorer.gguf.shape import shape_from_gguf
from explorer.model.artifacts import Artifact
from explorer.plan.planner import plan, recheck
from explorer.sources.checkpoints import shipped_checkpoints
from explorer.sources.shipped import parse_cluster
from explorer.units import GiB

LLAMA = ("llamacpp",)


def _plan(name, spec, **req):
    req.setdefault("engines", LLAMA)
    return plan(shape_of(name), parse_cluster(spec), PlanRequest(**req))


def test_partial_offload_finds_the_largest_ngl_and_charges_ram():
    result = _plan(
        "meta-llama__Meta-Llama-3.1-70B", "1x1xrtx4090-24g,ram=128g", context_tokens=8192, precision="Q4_K_M"
    )
    gpu = next(o for o in result.options if not o.layout.cpu)
    ev = gpu.evaluation
    assert 0 < ev.layers_on_host < 80 and ev.n_gpu_layers == 81 - ev.layers_on_host
    assert f"-ngl {ev.n_gpu_layers}" in ev.command
    assert ev.host.weights > 15 * GiB  # the layers left on the host are charged to its RAM
    assert gpu.per_card.fits and gpu.per_card.total > 20 * GiB
    assert f"{ev.layers_on_host} layers on CPU" in gpu.label
    # one more layer on the GPU would not fit: ngl is the largest that does
    model = launch.llama_model(shape_of("meta-llama__Meta-Llama-3.1-70B"), gpu.artifact)
    more = launch.settings_for(PlanRequest(context_tokens=8192), ngl=ev.n_gpu_layers + 1)
    devices = [s.device for s in seats_from_cards(ev.cards)]
    assert not llamacpp_memory(model, more, devices).fits()


def test_cpu_only_cluster_gives_the_cpu_option():
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1xcpu-64g", context_tokens=4096, precision="Q4_K_M")
    (cpu,) = result.options
    assert cpu.layout.cpu and cpu.per_card.role == "host"
    assert cpu.per_card.weights == cpu.evaluation.host.weights  # per_card holds the host's figures
    assert " -ngl 0" in cpu.evaluation.command  # llama.cpp 0c1e57098's default -ngl is auto, not none


def test_unified_memory_mac():
    result = _plan("meta-llama__Meta-Llama-3.1-70B", "1xuma-128g", context_tokens=8192, precision="Q4_K_M")
    mac = next(o for o in result.options if o.layout.unified)
    metal = mac.evaluation.cards[0]
    assert metal.usable == 96 * GiB  # Metal's working set: 3/4 of 128 GiB
    assert mac.evaluation.host.usable < int(128 * GiB * 0.85)  # the GPU's share comes out of the same RAM


def test_rpc_across_nodes_when_one_node_is_too_small():
    result = _plan(
        "meta-llama__Meta-Llama-3.1-70B", "3x1xrtx4090-24g@lan,ram=64g", context_tokens=8192, precision="Q4_K_M"
    )
    rpc = next(o for o in result.options if o.layout.rpc)
    assert rpc.layout.nodes == 2 and "--rpc" in rpc.evaluation.command
    assert any(x.rule == "more-than-needed" and x.layout.nodes == 3 for x in result.rejected)


def test_quantised_v_without_flash_attention_is_refused():
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1x1xh100-80g", kv_dtype="q4_0", flash_attn="off")
    assert not result.options
    assert any(x.rule == "llamacpp-config" for x in result.rejected)


def test_exact_gguf_artifact_per_card_is_llamacpp_buffers():
    header = header_for("llama_gqa")
    shape = shape_from_gguf(header, name="llama_gqa")
    artifact = Artifact(
        name="llama_gqa.gguf",
        format="gguf",
        quant="mixed",
        size_bytes=header.tensor_bytes_total,
        size_source="header",
        files=("llama_gqa.gguf",),
        gguf_header=header,
    )
    request = PlanRequest(context_tokens=2048, engines=LLAMA)
    result = plan(shape, parse_cluster("1xcpu-8g"), request, artifacts=[artifact])
    (cpu,) = result.options
    mem = llamacpp_memory(llama_model_from_gguf(header), launch.settings_for(request, ngl=0))
    card = cpu.per_card
    assert card.weights == mem.host.model_bytes and card.kv_cache == mem.host.kv_bytes
    assert card.activations == mem.host.compute_bytes
    assert card.overhead == mem.host.output_bytes + mem.host.other_bytes
    assert cpu.evaluation.command.startswith("llama-server -m llama_gqa.gguf -c 2048")


def test_no_mmap_is_the_load_mode_llama_cpp_takes():
    """llama.cpp 0c1e57098 has no --no-mmap (tests/data/engine_args/llamacpp.json): reading the weights into
    buffers is ``--load-mode none``. The batch sizes the plan assumed are written out."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    request = PlanRequest(context_tokens=2048, engines=LLAMA, mmap=False)
    result = plan(shape, parse_cluster("1x1xh100-80g"), request)
    command = result.options[0].evaluation.command
    assert "--load-mode none" in command and "--no-mmap" not in command
    assert " -b 2048 -ub 512 " in command


def test_recheck_keeps_ngl_and_grows_kv():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    result = plan(shape, parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=4096, engines=LLAMA))
    opt = result.options[0]
    longer = recheck(shape, opt, PlanRequest(context_tokens=16384, engines=LLAMA))
    assert longer.evaluation.n_gpu_layers == opt.evaluation.n_gpu_layers
    assert longer.per_card.weights == opt.per_card.weights
    assert longer.per_card.kv_cache == 4 * opt.per_card.kv_cache


@pytest.mark.parametrize(
    "name",
    [
        "Qwen__Qwen3-30B-A3B",
        "google__gemma-2-9b-it",
        "nvidia__Nemotron-H-56B-Base-8K",
        "deepseek-ai__DeepSeek-V3",
        "openai__gpt-oss-20b",
    ],
)
def test_architectures_plan_without_crashing(name):
    result = _plan(name, "1x8xh100-80g + 1xcpu-512g", context_tokens=4096, precision="Q4_K_M")
    for o in result.options:
        assert o.per_card.total <= o.per_card.usable


def test_max_concurrency_is_the_most_parallel_sequences_that_fit():
    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    result = plan(
        shape, parse_cluster("1x1xrtx4090-24g"), PlanRequest(context_tokens=8192, precision="Q4_K_M", engines=LLAMA)
    )
    gpu = next(o for o in result.options if not o.layout.cpu)
    n = gpu.evaluation.max_concurrency
    assert n > 1
    model = launch.llama_model(shape, gpu.artifact)
    devices = [s.device for s in seats_from_cards(gpu.evaluation.cards)]
    host = int(gpu.node.host_ram_bytes * 0.85)

    def at(k):
        s = launch.settings_for(PlanRequest(context_tokens=8192, concurrency=k), ngl=gpu.evaluation.n_gpu_layers)
        return llamacpp_memory(model, s, devices).fits(host)

    assert at(n) and not at(n + 1)


def _gguf_artifact(name: str) -> tuple:
    header = header_for(name)
    artifact = Artifact(
        name=f"{name}.gguf",
        format="gguf",
        quant="mixed",
        size_bytes=header.tensor_bytes_total,
        size_source="header",
        files=(f"{name}.gguf",),
        gguf_header=header,
    )
    return shape_from_gguf(header, name=name), artifact


def test_a_node_with_amx_plans_llamacpps_amx_buffers():
    shape, artifact = _gguf_artifact("llama_gqa")
    request = PlanRequest(context_tokens=2048, engines=LLAMA)
    cards = {}
    for cpu in ("avx2", "amx"):
        (option,) = plan(shape, parse_cluster(f"1xcpu-8g,cpu={cpu}"), request, artifacts=[artifact]).options
        settings = launch.settings_for(request, ngl=0, cpu=cpu)
        mem = llamacpp_memory(llama_model_from_gguf(artifact.gguf_header), settings)
        assert option.per_card.weights == mem.host.model_bytes
        cards[cpu] = mem.host
    assert cards["avx2"].repack_bytes > 0 and cards["avx2"].amx_bytes == 0
    assert cards["amx"].amx_bytes > 0 and cards["amx"].repack_bytes == 0


def test_an_mla_launch_llamacpp_aborts_on_is_refused_with_the_assert_and_the_workaround():
    shape, artifact = _gguf_artifact("deepseek2_mla")  # attn_k_b F16: AMX holds it
    request = PlanRequest(context_tokens=2048, engines=LLAMA)
    assert plan(shape, parse_cluster("1xcpu-8g"), request, artifacts=[artifact]).options
    result = plan(shape, parse_cluster("1xcpu-8g,cpu=amx"), request, artifacts=[artifact])
    assert not result.options
    (refusal,) = [x for x in result.rejected if x.rule == "llamacpp-abort"]
    assert "GGML_ASSERT(*cur_backend_id != -1)" in refusal.reason and "--no-repack" in refusal.reason


def test_what_if_mla_on_an_amx_host_follows_the_quants_k_b_and_v_b_types():
    # DeepSeek-V3: attn_k_b rows of qk_nope = 128 values do not fill Q4_K's 256-value blocks, so
    # llama-quant.cpp stores it as Q5_0 (not AMX); attn_v_b stays Q4_K: in AMX, it aborts only with FA
    def rules(precision: str, fa: str) -> list[str]:
        result = _plan(
            "deepseek-ai__DeepSeek-V3", "1xcpu-1024g,cpu=amx", context_tokens=4096, precision=precision, flash_attn=fa
        )
        return [o.layout.label for o in result.options] or [x.rule for x in result.rejected]

    assert rules("Q4_K_M", "off") == ["CPU"]
    assert rules("Q4_K_M", "on") == ["llamacpp-abort"]
    assert rules("Q8_0", "off") == ["llamacpp-abort"]  # Q8_0 attn_k_b: AMX holds it


def test_quant_f16_on_a_bf16_model_is_planned_as_an_f16_gguf():
    """Issue 24: ``--quant F16 --engine llamacpp`` on a bf16 model was refused ("a what-if of fp16 safetensors");
    casting the model's own weights to an F16 GGUF is routine (convert_hf_to_gguf.py --outtype f16)."""
    from explorer.artifacts.offer import plan_artifacts

    shape = shape_of("meta-llama__Meta-Llama-3.1-8B")
    (artifact,) = plan_artifacts(shape, [], quant="F16")
    assert artifact.quant == "fp16" and artifact.what_if and "--outtype f16" in artifact.note
    result = plan(shape, parse_cluster("1x1xl40s-48g"), PlanRequest(engines=("llamacpp",)), artifacts=[artifact])
    assert "format" not in result.pruned
    best = result.options[0]
    assert (best.precision, best.layout.gpu_class, best.layout.cpu) == ("F16", "l40s-48g", False)
    # two bytes a weight: the GGUF holds 8,030,261,248 weights (2 B each; the norms' few F32 add 0.3 MB), 14.96 GiB,
    # of which token_embd (128,256 × 4,096 × 2 B = 0.98 GiB) stays in host memory as llama.cpp keeps it
    on_card = best.per_card.weights
    on_host = best.evaluation.host.weights
    assert on_card + on_host == pytest.approx(8_030_261_248 * 2, rel=1e-3)
    assert on_host == 128_256 * 4_096 * 2


def test_a_context_past_the_trained_one_is_refused_as_the_serving_engines_refuse_it():
    """Qwen3-30B-A3B states max_position_embeddings 40,960 and no rope scaling, so n_ctx_train is 40,960. llama.cpp
    would load ``-c 131072`` with a warning alone and answer badly past 40,960 tokens; the walk refuses it
    (``context-limit``) as vLLM's and SGLang's refuse it, and plans 40,960 itself."""
    past = _plan("Qwen__Qwen3-30B-A3B", "1x1xh200-141g", context_tokens=131072, precision="Q8_0")
    assert not past.options
    (refusal,) = past.rejected
    assert refusal.rule == "context-limit" and refusal.engine == "llamacpp"
    assert "trained context of 40,960 tokens" in refusal.reason and "YaRN" in refusal.reason
    at = _plan("Qwen__Qwen3-30B-A3B", "1x1xh200-141g", context_tokens=40960, precision="Q8_0")
    assert at.options and "-c 40960" in at.options[0].evaluation.command


def test_past_trained_context_holds_a_header_without_a_length_to_none():
    assert engine.past_trained_context(0, 10**6) is None  # n_ctx_train unknown: no limit to hold
    assert engine.past_trained_context(131072, 131072) is None
    assert "131,073 exceeds the model's trained context of 131,072" in engine.past_trained_context(131072, 131073)


def test_gpt_oss_original_plans_as_the_converters_bf16_gguf_with_its_mxfp4_experts():
    """Issue 26: gpt-oss's original weights convert to a BF16 GGUF whose experts stay MXFP4 (12.8 GiB for
    gpt-oss-20b), not a Q4_K_M that re-quantises the 2,880-column experts to Q5_0 (a larger file)."""
    shape = shape_of("openai__gpt-oss-20b")
    result = _plan("openai__gpt-oss-20b", "1x1xt4-16g", context_tokens=4096)
    best = result.options[0]
    assert (best.precision, best.layout.cpu, best.evaluation.n_gpu_layers) == ("BF16", False, 25)
    assert launch.gguf_quant_for(shape, best.artifact) == "BF16"
    # 24 layers of MXFP4 experts (423,014,400 B each) and BF16 attention (53,084,160 B each), the BF16 output
    # (201,088 × 2,880 × 2 = 1,158,266,880 B) and the small tensors: about 11.7 GiB on the card
    big = 24 * (423_014_400 + 53_084_160) + 1_158_266_880
    assert big < best.per_card.weights < big * 1.01
    assert "--outtype bf16" in best.evaluation.command


#: its config says float32: 1,334,628,352 parameters (tests/engines/test_load_dtype.py works them out)
GRANITE = "ibm-granite__granite-3.1-1b-a400m-instruct"
GRANITE_PARAMS = 1_334_628_352


def test_a_float32_checkpoint_plans_as_the_f16_gguf_the_printed_conversion_writes():
    """convert_hf_to_gguf.py's default ``--outtype auto`` writes F16 for a checkpoint with no bf16 or fp16 matrix at
    llama.cpp 0c1e57098 (conversion/base.py), BF16 before; the plan sizes that F16 GGUF and the command names the
    type, so either converter writes what was planned. It was planned as an F32 GGUF: 5,338,513,408 B of weights."""
    shape = shape_of(GRANITE)
    original = original_artifact(shape)
    assert launch.gguf_quant_for(shape, original) == "F16" and launch.nominal_bits_for(shape, original) == 16
    result = plan(shape, parse_cluster("1x1xh100-80g"), PlanRequest(engines=LLAMA), artifacts=[original])
    best = result.options[0]
    assert (best.precision, best.layout.cpu, best.nominal_bits) == ("F16", False, 16)
    # 2 bytes a weight: the layers and the output, a copy of the tied embedding, on the card, 1,334,628,352 × 2 =
    # 2,669,256,704 B (5,338,513,408 as F32); token_embd itself (49,155 × 1,024 × 2 = 100,669,440 B) stays on the
    # host, as llama.cpp keeps it (docs/notes/llamacpp_memory.md §5: a tied output is allocated twice)
    assert best.per_card.weights == GRANITE_PARAMS * 2 == 2_669_256_704
    assert best.evaluation.host.weights == 49_155 * 1_024 * 2 == 100_669_440
    line = parse_line(best.evaluation.command)
    assert not line.problems, line.problems
    assert line.value("-m") == f"<{GRANITE} converted to a F16 GGUF (convert_hf_to_gguf.py --outtype f16)>"


def test_a_float32_what_if_keeps_the_f32_gguf_it_asks_for():
    # --quant fp32: the user asks for float32 kept, 4 bytes a weight, converted with --outtype f32
    shape = shape_of(GRANITE)
    kept = what_if_artifact(shape, "fp32")
    assert kept.what_if and launch.gguf_quant_for(shape, kept) == "F32" and launch.nominal_bits_for(shape, kept) == 32
    best = plan(shape, parse_cluster("1x1xh100-80g"), PlanRequest(engines=LLAMA), artifacts=[kept]).options[0]
    assert best.per_card.weights == GRANITE_PARAMS * 4 == 5_338_513_408
    assert "--outtype f32" in best.evaluation.command


@pytest.mark.parametrize(
    ("type_k", "type_v", "flash_attn", "flags"),
    [
        ("f16", "f16", "auto", []),  # llama-server's defaults: nothing to write
        ("q8_0", "q8_0", "auto", ["-ctk q8_0 -ctv q8_0", "-fa on"]),  # a quantised V needs flash attention
        ("q4_0", "f16", "auto", ["-ctk q4_0 -ctv f16"]),  # a quantised K alone does not
        ("q8_0", "q8_0", "on", ["-ctk q8_0 -ctv q8_0", "-fa on"]),
        ("f16", "f16", "off", ["-fa off"]),
    ],
)
def test_cache_flags_are_the_kv_cache_the_launch_was_sized_at(type_k, type_v, flash_attn, flags):
    settings = LlamaCppSettings(type_k=type_k, type_v=type_v, flash_attn=flash_attn)
    assert launch.cache_flags(settings) == flags
    # each one llama-server takes at 0c1e57098 (tests/data/engine_args/llamacpp.json: -ctk/-ctv's choices, -fa's)
    line = parse_line(" ".join(["llama-server -m model.gguf", *flags]))
    assert not line.problems, line.problems
    assert (line.value("-ctk"), line.value("-ctv")) == ((type_k, type_v) if flags and flags[0].startswith("-ctk")
                                                          else (None, None))  # fmt: skip


def test_the_planners_line_turns_flash_attention_on_for_the_quantised_v_it_sized():
    result = _plan("meta-llama__Meta-Llama-3.1-8B", "1x1xl40s-48g", kv_dtype="q8_0", precision="Q4_K_M")
    line = parse_line(result.options[0].evaluation.command)
    assert not line.problems, line.problems
    assert (line.value("-ctk"), line.value("-ctv"), line.value("-fa")) == ("q8_0", "q8_0", "on")


def test_gpt_oss_20b_on_a_t4_loads_ggml_orgs_mxfp4_gguf_rather_than_a_conversion():
    """llama.cpp's own guide runs ``-hf ggml-org/gpt-oss-20b-GGUF``: with that file in the offer the first option
    loads it (a command that runs as printed), and the original's conversion is refused as ``published-gguf``.
    Its weights: 12,076,119,168 bytes (MXFP4 experts, Q8_0 elsewhere), not the BF16 conversion's 13,761,264,768."""
    shape = shape_of("openai__gpt-oss-20b")
    artifacts = plan_artifacts(shape, [original_artifact(shape)], checkpoints=shipped_checkpoints("openai/gpt-oss-20b"))
    result = plan(shape, parse_cluster("1x1xt4-16g"), PlanRequest(engines=LLAMA), artifacts=artifacts, speed=False)
    best = result.options[0]
    assert (best.tier, best.artifact.quant, best.artifact.repo) == (1, "MXFP4", "ggml-org/gpt-oss-20b-GGUF")
    assert "--hf-repo ggml-org/gpt-oss-20b-GGUF --hf-file gpt-oss-20b-MXFP4.gguf" in best.evaluation.command
    assert launch.llama_model(shape, best.artifact).weight_bytes == 12_076_119_168
    assert all(o.artifact.format == "gguf" for o in result.options)
    (refused,) = [r for r in result.rejected if r.rule == "published-gguf"]
    assert refused.reason.startswith("ggml-org/gpt-oss-20b-GGUF's gpt-oss-20b-MXFP4.gguf holds these weights")
