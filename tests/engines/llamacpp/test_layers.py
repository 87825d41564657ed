"""Layer placement, devices, fitting and the invariants of the llama.cpp memory model.

Placement facts are llama.cpp's (src/llama-model.cpp ``load_tensors``): the
output layer counts inside ``-ngl`` and goes first, token_embd stays on the
host, layers split by cumulative fractions. The property tests (hypothesis)
check that every figure is a non-negative int, that KV and compute never
shrink as n_ctx grows, and that raising ``-ngl`` never grows the host's
weights nor shrinks the devices'.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.corpus import CONFIGS
from support.llamacpp_headers import header_for

from explorer.engines.llamacpp.fit import (
    gpu_layers_fit,
    max_context,
    max_gpu_layers,
    max_sequences,
    proportional_tensor_split,
)
from explorer.engines.llamacpp.layers import HOST, cumulative_splits, layer_devices
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.model import llama_model_from_gguf
from explorer.engines.llamacpp.settings import Device, LlamaCppSettings
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.errors import LlamaCppConfigError, LlamaCppFitError
from explorer.model.shapes import shape_from_config
from explorer.units import GiB, MiB

NAMES = [
    "llama_gqa",
    "llama_tied_q4_0",
    "qwen3moe_moe",
    "gemma3_swa",
    "deepseek2_mla",
    "mamba2_ssm",
    "granitehybrid_hybrid",
]
GPU = Device(name="gpu0", kind="gpu", memory_bytes=24 * GiB)
TWO = (Device(name="gpu0", memory_bytes=24 * GiB), Device(name="gpu1", memory_bytes=8 * GiB))


def model(name: str = "llama_gqa"):
    return llama_model_from_gguf(header_for(name))


def test_output_is_offloaded_first_and_counts_inside_ngl():
    # 4 layers: -ngl 1 offloads only the output (il = 4), -ngl 5 everything (gguf-parser #42 counted it outside)
    s = LlamaCppSettings()
    assert layer_devices(4, 1, [GPU], s) == (HOST, HOST, HOST, HOST, 0)
    assert layer_devices(4, 2, [GPU], s) == (HOST, HOST, HOST, 0, 0)
    assert layer_devices(4, 5, [GPU], s) == (0, 0, 0, 0, 0)
    assert layer_devices(4, 99, [GPU], s) == (0,) * 5
    assert layer_devices(4, 0, [GPU], s) == (HOST,) * 5
    assert layer_devices(4, 5, [], s) == (HOST,) * 5  # no offload device: -ngl does nothing


def test_layers_split_by_cumulative_fractions_in_single_precision():
    s = LlamaCppSettings(tensor_split=(3.0, 1.0))
    # splits [0.75, 1.0]; layer il goes to upper_bound(splits, il / 5)
    assert cumulative_splits((3.0, 1.0)) == (0.75, 1.0)
    assert layer_devices(4, 5, TWO, s) == (0, 0, 0, 0, 1)
    # by free memory (24 and 8 GiB) when no split is given: the same 3:1
    assert layer_devices(4, 5, TWO, LlamaCppSettings()) == (0, 0, 0, 0, 1)
    assert layer_devices(4, 5, TWO, LlamaCppSettings(split_mode="none", main_gpu=1)) == (1,) * 5
    with pytest.raises(LlamaCppConfigError, match="2 offload device"):
        layer_devices(4, 5, TWO, LlamaCppSettings(tensor_split=(1.0, 1.0, 1.0)))


def test_full_offload_puts_weights_kv_and_logits_on_the_device():
    m = model()
    mem = llamacpp_memory(m, LlamaCppSettings(n_ctx=2048, n_batch=512, flash_attn="off"), [GPU])
    (d,) = mem.devices
    assert d.model_bytes == m.weight_bytes - m.token_embd_bytes  # token_embd stays on the host
    assert mem.host.model_bytes == m.token_embd_bytes and mem.host.repack_bytes == 0
    assert d.kv_bytes == 4 * MiB and mem.host.kv_bytes == 0
    assert d.phase == "logits" and mem.host.phase == "input"
    assert mem.host.output_bytes == 32000 * 4


def test_tied_output_is_duplicated_on_the_output_device():
    m = model("llama_tied_q4_0")
    mem = llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=1), [GPU])
    assert mem.devices[0].model_bytes == m.output_norm_bytes + m.token_embd_bytes
    cpu = llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=0, mmap=False))
    assert cpu.host.repack_bytes == sum(la.host.avx2.repack_bytes for la in m.layers) + m.token_embd_bytes


def test_hybrid_is_charged_kv_only_for_its_attention_layers():
    m = model("granitehybrid_hybrid")  # layers 0 and 2 recurrent, 1 and 3 attention (gguf-parser #28)
    mem = llamacpp_memory(m, LlamaCppSettings(n_ctx=4096, flash_attn="on"))
    kv, rs = mem.caches
    assert kv.layers == (1, 3) and rs.layers == (0, 2)
    assert kv.total_bytes == 2 * 4096 * (128 * 2 + 128 * 2)


def test_kv_offload_off_keeps_the_cache_on_the_host():
    mem = llamacpp_memory(model(), LlamaCppSettings(n_ctx=2048, offload_kqv=False), [GPU])
    assert mem.devices[0].kv_bytes == 0 and mem.host.kv_bytes == 4 * MiB


def test_gpu_host_buffer_disables_repacking_unless_no_host():
    m = model()
    assert llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=0), [GPU]).host.repack_bytes == 0
    assert llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=0, no_host=True), [GPU]).host.repack_bytes > 0


def test_unified_memory_counts_device_and_host_together():
    m = model()
    mac = Device(name="M2", kind="metal", memory_bytes=128 * MiB)
    mem = llamacpp_memory(m, LlamaCppSettings(n_ctx=512, n_batch=512), [mac])
    assert mem.fits(None)
    assert not mem.fits(mem.host.total_bytes + mem.devices[0].total_bytes - 1)
    assert mem.fits(mem.host.total_bytes + mem.devices[0].total_bytes)


def test_pipeline_parallel_keeps_input_copies():
    m = model()
    s = LlamaCppSettings(n_ctx=2048, n_batch=512)
    mem = llamacpp_memory(m, s, TWO)
    assert mem.pipeline_parallel
    single = llamacpp_memory(m, replace(s, pipeline_copies=1), TWO)
    assert mem.devices[0].compute_bytes > single.devices[0].compute_bytes


def test_refusals_carry_llamacpps_reason():
    with pytest.raises(LlamaCppConfigError, match="quantized V cache requires flash_attn"):
        llamacpp_memory(model(), LlamaCppSettings(type_v="q8_0", flash_attn="off"))
    with pytest.raises(LlamaCppConfigError, match="different K"):
        llamacpp_memory(model("deepseek2_mla"), LlamaCppSettings(type_k="q8_0", type_v="f16", flash_attn="on"))
    with pytest.raises(LlamaCppConfigError, match="unsupported cache type"):
        llamacpp_memory(model(), LlamaCppSettings(type_k="q3_k"))


def test_max_gpu_layers_and_context():
    m = model()
    s = LlamaCppSettings(n_ctx=2048, n_batch=512)
    small = Device(name="small", memory_bytes=40 * MiB)
    ngl = max_gpu_layers(m, s, [small])
    assert llamacpp_memory(m, replace(s, n_gpu_layers=ngl), [small]).fits()
    assert ngl == m.n_layer + 1 or not llamacpp_memory(m, replace(s, n_gpu_layers=ngl + 1), [small]).fits()
    assert max_gpu_layers(m, s, [GPU]) == m.n_layer + 1
    with pytest.raises(LlamaCppFitError):
        max_gpu_layers(m, s, [small], host_bytes=1 * MiB)
    ctx = max_context(m, s, [Device(name="d", memory_bytes=120 * MiB)], limit_tokens=65536)
    assert (
        ctx % 256 == 0 and llamacpp_memory(m, replace(s, n_ctx=ctx), [Device(name="d", memory_bytes=120 * MiB)]).fits()
    )
    assert not llamacpp_memory(m, replace(s, n_ctx=ctx + 256), [Device(name="d", memory_bytes=120 * MiB)]).fits()


def test_the_ngl_search_hands_back_its_allocation():
    m, s, small = model(), LlamaCppSettings(n_ctx=2048, n_batch=512), Device(name="small", memory_bytes=40 * MiB)
    fitted = gpu_layers_fit(m, s, [small])
    assert fitted.settings.n_gpu_layers == max_gpu_layers(m, s, [small]) < m.n_layer + 1  # a partial offload
    assert fitted == llamacpp_memory(m, replace(s, n_gpu_layers=fitted.settings.n_gpu_layers), [small])


@pytest.mark.parametrize("name", ["llama_gqa", "gemma3_swa", "deepseek2_mla"])
def test_max_sequences_from_a_known_allocation_is_the_largest_that_fits(name):
    """The search starts at the KV cache's own estimate (``_sequences_guess``); the answer is still the largest
    count whose allocation fits, found here by trying every count, on a card and on the host alone, each with
    room for about 20 more sequences' caches."""
    m, context = model(name), 4096
    s = LlamaCppSettings(n_ctx=context, n_batch=512)
    one = llamacpp_memory(m, s, [GPU])
    card = Device(name="card", memory_bytes=one.devices[0].total_bytes + 20 * one.devices[0].kv_bytes)
    cpu = llamacpp_memory(m, s)
    host = cpu.host.total_bytes + 20 * (cpu.host.kv_bytes + cpu.host.output_bytes)
    for devices, host_bytes in (((card,), None), ((), host)):

        def fits(n, devices=devices, host_bytes=host_bytes):
            return llamacpp_memory(m, replace(s, n_seq=n, n_ctx=n * context), devices).fits(host_bytes)

        brute = max(n for n in range(1, 65) if fits(n))
        assert 10 < brute < 22
        known = llamacpp_memory(m, s, devices)
        assert max_sequences(m, s, devices, host_bytes, context_tokens=context, limit=64, known=known) == brute


def test_proportional_tensor_split():
    assert proportional_tensor_split([24 * GiB, 8 * GiB]) == (0.75, 0.25)
    with pytest.raises(LlamaCppConfigError):
        proportional_tensor_split([0, 0])


def test_what_if_from_a_config_shape():
    cfg = json.loads((CONFIGS / "meta-llama__Meta-Llama-3.1-8B.json").read_text())
    shape = shape_from_config(cfg, name="Llama-3.1-8B")
    m = llama_model_from_shape(shape, "Q4_K_M")
    assert not m.exact and m.n_layer == 32 and m.layers[0].k_row == 8 * 128
    assert 4.3 * GiB < m.weight_bytes < 5.2 * GiB  # a real Q4_K_M of Llama-3.1-8B is 4.58 GiB
    mem = llamacpp_memory(m, LlamaCppSettings(n_ctx=8192), [GPU])
    assert mem.caches[0].total_bytes == 32 * 8192 * 2 * 1024 * 2  # 1 GiB of f16 KV


# --- properties ---------------------------------------------------------------------------------

SETTINGS = st.builds(
    LlamaCppSettings,
    n_ctx=st.integers(1, 20000),
    n_batch=st.sampled_from([256, 512, 2048]),
    n_ubatch=st.sampled_from([32, 128, 512]),
    n_seq=st.integers(1, 4),
    kv_unified=st.booleans(),
    flash_attn=st.sampled_from(["on", "off", "auto"]),
    type_k=st.sampled_from(["f16", "q8_0"]),
    mmap=st.booleans(),
    swa_full=st.booleans(),
)


def _mem(m, s, devices=()):
    """The memory, or a skipped example when llama.cpp would refuse the settings (MLA with K != V)."""
    try:
        return llamacpp_memory(m, s, devices)
    except LlamaCppConfigError:
        assume(False)


def _ints(mem) -> list[int]:
    out = [
        getattr(mem.host, f)
        for f in (
            "model_bytes",
            "mapped_bytes",
            "loaded_bytes",
            "repack_bytes",
            "kv_bytes",
            "compute_bytes",
            "output_bytes",
            "other_bytes",
        )
    ]
    for d in mem.devices:
        out += [d.model_bytes, d.kv_bytes, d.compute_bytes, d.output_bytes, d.other_bytes]
    return out


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(NAMES), s=SETTINGS, ngl=st.integers(0, 9))
def test_every_figure_is_a_non_negative_int(name, s, ngl):
    mem = _mem(model(name), replace(s, n_gpu_layers=ngl), TWO)
    assert all(isinstance(x, int) and x >= 0 for x in _ints(mem))


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(NAMES), s=SETTINGS, extra=st.integers(1, 9000))
def test_kv_and_compute_never_shrink_as_context_grows(name, s, extra):
    m = model(name)
    a = _mem(m, s)
    b = _mem(m, replace(s, n_ctx=s.n_ctx + extra))
    assert sum(c.total_bytes for c in b.caches) >= sum(c.total_bytes for c in a.caches)
    assert b.host.compute_bytes >= a.host.compute_bytes


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(NAMES), s=SETTINGS, devices=st.sampled_from([(GPU,), TWO]))
def test_raising_ngl_moves_weights_from_host_to_devices(name, s, devices):
    m = model(name)
    prev = None
    for ngl in range(m.n_layer + 2):
        mem = _mem(m, replace(s, n_gpu_layers=ngl), devices)
        gpu = sum(d.model_bytes for d in mem.devices)
        if prev is not None:
            assert mem.host.model_bytes <= prev[0] and gpu >= prev[1]
        prev = (mem.host.model_bytes, gpu)
