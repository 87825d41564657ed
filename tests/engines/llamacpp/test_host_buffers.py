"""Which host buffer each weight lands in (CPU, CPU_REPACK, AMX) per CPU build, worked by hand.

The rules are llama.cpp 0c1e57098's (explorer/engines/llamacpp/host_buffers.py
cites the functions); tests/engines/llamacpp/test_amx.py holds them to llama.cpp's
own AMX code on 417 cases. Here: single tensors, the granitehybrid worked
example of docs/notes/llamacpp_memory.md, the MLA abort per tensor type
(the four variants the AMX simulation build was run on), and how a GPU
or ``--no-repack`` turns the extra buffers off.
"""

from __future__ import annotations

import copy
import re

import pytest
from support.llamacpp_compare import mib
from support.llamacpp_headers import header_for, spec_header
from support.llamacpp_models import SPECS

from explorer.engines.llamacpp.host_buffers import SCHED_ASSERT, amx_alloc_bytes, host_buffer, weight_op
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.model import llama_model_from_gguf
from explorer.engines.llamacpp.settings import Device, LlamaCppSettings
from explorer.errors import LlamaCppAbortError, LlamaCppConfigError
from explorer.gguf.constants import GGMLQuantizationType
from explorer.gguf.header import TensorInfo
from explorer.units import GiB


def tensor(name: str, type_name: str, *shape: int) -> TensorInfo:
    return TensorInfo(
        name=name, ggml_type=int(GGMLQuantizationType[type_name]), type_name=type_name, shape=shape, offset=0
    )


@pytest.mark.parametrize(
    ("name", "dims", "op"),
    [
        ("token_embd.weight", 2, "GET_ROWS"),
        ("blk.0.ffn_up_exps.weight", 3, "MUL_MAT_ID"),
        ("blk.0.attn_q.weight", 2, "MUL_MAT"),
        ("blk.0.attn_k_b.weight", 3, "MUL_MAT"),
        ("output.weight", 2, "MUL_MAT"),
        ("blk.0.attn_norm.weight", 1, "OTHER"),
        ("blk.0.ssm_conv1d.weight", 2, "OTHER"),
        ("blk.0.exp_probs_b.bias", 1, "OTHER"),
    ],
)
def test_the_op_llama_cpp_probes_each_weight_with(name, dims, op):
    assert weight_op(name, dims) == op


def test_amx_allocation_sizes():
    # Q8_0 [512, 8192]: 8192 rows x 16 blocks x (34 + 4 compensation bytes) = 4,980,736 (nbytes 4,456,448)
    assert amx_alloc_bytes(tensor("output.weight", "Q8_0", 512, 8192)) == 4_980_736
    # Q4_K [1024, 512]: 512 x 4 x (144 + 4) = 303,104; IQ4_XS [256, 64]: 64 x 1 x (136 + 2) = 8,832
    assert amx_alloc_bytes(tensor("w.weight", "Q4_K", 1024, 512)) == 303_104
    assert amx_alloc_bytes(tensor("w.weight", "IQ4_XS", 256, 64)) == 8_832
    # Q6_K and Q4_0 pack with no extra bytes: their nbytes
    for t in (tensor("w.weight", "Q6_K", 256, 32), tensor("w.weight", "Q4_0", 64, 32)):
        assert amx_alloc_bytes(t) == t.n_bytes
    # a 3-D packed weight: one ne0 x ne1 slice, 32 x 2 x 38 = 2,432 of its 8,704 bytes; F16 all of them
    assert amx_alloc_bytes(tensor("blk.0.attn_v_b.weight", "Q8_0", 64, 32, 4)) == 2_432
    assert amx_alloc_bytes(tensor("blk.0.attn_k_b.weight", "F16", 16, 32, 4)) == 16 * 32 * 4 * 2


@pytest.mark.parametrize(
    ("t", "avx2", "avx512", "amx"),
    [
        (tensor("blk.0.attn_q.weight", "Q8_0", 512, 512), "CPU", "CPU", "AMX"),
        (tensor("blk.0.ffn_up.weight", "Q4_K", 512, 1024), "CPU_REPACK", "CPU_REPACK", "AMX"),
        # rows not a multiple of 32 (2200 % 32 = 24) but of 8: AMX refuses, CPU_REPACK takes it
        (tensor("blk.0.ffn_up.weight", "Q4_K", 512, 2200), "CPU_REPACK", "CPU_REPACK", "CPU_REPACK"),
        (tensor("blk.0.ssm_in.weight", "Q8_0", 512, 2192), "CPU", "CPU", "CPU"),  # 2192 % 32 = 16
        (tensor("blk.0.ffn_up_exps.weight", "Q4_K", 512, 256, 8), "CPU_REPACK", "CPU_REPACK", "CPU_REPACK"),
        (tensor("token_embd.weight", "Q4_0", 512, 8192), "CPU", "CPU", "CPU"),
        (tensor("blk.0.ffn_down.weight", "Q2_K", 1024, 512), "CPU", "CPU_REPACK", "CPU_REPACK"),
        (tensor("blk.0.ffn_down.weight", "IQ4_NL", 1024, 512), "CPU_REPACK", "CPU_REPACK", "CPU_REPACK"),
        (tensor("output.weight", "F16", 4096, 32000), "CPU", "CPU", "AMX"),
        (tensor("output.weight", "BF16", 4096, 32000), "CPU", "CPU", "CPU"),
        (tensor("blk.0.attn_k_b.weight", "F16", 64, 256, 8), "CPU", "CPU", "AMX"),  # any number of dims
    ],
)
def test_buffer_of_each_weight_per_build(t, avx2, avx512, amx):
    assert [host_buffer(t, cpu) for cpu in ("avx2", "avx512", "amx")] == [avx2, avx512, amx]


def test_worked_example_granitehybrid_on_an_amx_host():
    m = llama_model_from_gguf(header_for("granitehybrid_hybrid"))
    mem = llamacpp_memory(m, LlamaCppSettings(n_ctx=1024, cpu="amx"))
    # AMX: the tied Q8_0 output copy 4,980,736 + attn_q/output 4 x 512 x 16 x 38 = 1,245,184
    # + attn_k/v 4 x 128 x 16 x 38 = 311,296 + ffn_gate/up 8 x 1024 x 2 x 148 = 2,424,832
    # + ffn_down 4 x 512 x 4 x 148 = 1,212,416 + ssm_out 2 x 512 x 4 x 148 = 606,208 = 10,780,672 (10.28 MiB);
    # ssm_in [512, 2192] stays in CPU (2192 % 32 = 16). CPU_Mapped: token_embd (first) to output_norm (last)
    assert mem.host.amx_bytes == 10_780_672 and mem.host.repack_bytes == 0
    assert (mib(mem.host.amx_bytes), mib(mem.host.mapped_bytes)) == ("10.28", "11.86")  # the figures
    # the host keeps the tensors left in CPU hot plus the AMX copies: the file's 12,435,840 bytes less the
    # moved blocks' own bytes (Q8_0 1,556,480 x 34/38 = 1,392,640; Q4_K 4,243,456 x 144/148 = 4,128,768;
    # the tied copy's original, token_embd, stays) plus 10,780,672
    assert sum(t.n_bytes for t in header_for("granitehybrid_hybrid").tensors) == 12_435_840
    assert mem.host.model_bytes == 12_435_840 - 1_392_640 - 4_128_768 + 10_780_672


def test_an_output_moved_to_amx_shrinks_the_mapped_range():
    # llama_gqa's Q8_0 output.weight is the file's last tensor: in AMX it leaves CPU_Mapped's range
    m = llama_model_from_gguf(header_for("llama_gqa"))
    avx2, amx = (llamacpp_memory(m, LlamaCppSettings(n_ctx=512, cpu=cpu)).host for cpu in ("avx2", "amx"))
    assert (mib(avx2.mapped_bytes), mib(amx.mapped_bytes)) == ("32.24", "15.63")


def test_a_tied_f16_output_is_copied_into_amx():
    header = header_for("gemma3_swa")
    embd = next(t for t in header.tensors if t.name == "token_embd.weight")
    m = llama_model_from_gguf(header)
    assert m.tied_copy.amx.amx_bytes == embd.n_bytes and m.tied_copy.avx2.repack_bytes == 0
    assert m.tied_copy.avx2.cpu_bytes == 0  # left in CPU the copy is token_embd itself


def _mla(k_b: str, v_b: str):
    spec = copy.deepcopy(SPECS["deepseek2_mla"])
    spec["name"] = f"ds2_kb{k_b}_vb{v_b}"
    spec["types"]["attn_k_b"], spec["types"]["attn_v_b"] = k_b, v_b
    return llama_model_from_gguf(spec_header(spec))


@pytest.mark.parametrize(
    ("k_b", "v_b", "aborts_fa_off", "aborts_fa_on"),
    # measured in the AMX simulation build (docs/notes/llamacpp_memory.md, AMX: the abort); F32 is never AMX
    [
        ("F32", "F32", False, False),
        ("F16", "F32", True, True),
        ("F32", "Q8_0", False, True),
        ("F16", "Q8_0", True, True),
    ],
)
def test_mla_aborts_when_amx_holds_k_b_or_v_b_with_flash_attention(k_b, v_b, aborts_fa_off, aborts_fa_on):
    m = _mla(k_b, v_b)
    for fa, aborts in (("off", aborts_fa_off), ("on", aborts_fa_on)):
        s = LlamaCppSettings(n_ctx=1024, flash_attn=fa, cpu="amx")
        if aborts:
            with pytest.raises(LlamaCppAbortError, match=re.escape(SCHED_ASSERT)):
                llamacpp_memory(m, s)
        else:
            llamacpp_memory(m, s)
        llamacpp_memory(m, LlamaCppSettings(n_ctx=1024, flash_attn=fa, cpu="amx", repack=False))  # --no-repack


def test_a_gpu_host_buffer_keeps_amx_out_unless_no_host():
    m = llama_model_from_gguf(header_for("llama_gqa"))
    gpu = [Device(name="gpu0", memory_bytes=24 * GiB)]
    plain = llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=0), gpu).host
    assert llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=0, cpu="amx"), gpu).host == plain
    no_host = llamacpp_memory(m, LlamaCppSettings(n_gpu_layers=0, cpu="amx", no_host=True), gpu).host
    assert no_host.amx_bytes > 0 and no_host.repack_bytes == 0


def test_an_unknown_cpu_is_refused():
    with pytest.raises(LlamaCppConfigError, match="cpu='sse4'"):
        llamacpp_memory(llama_model_from_gguf(header_for("llama_gqa")), LlamaCppSettings(cpu="sse4"))


def test_what_if_amx_takes_the_non_expert_matrices_at_the_packed_size():
    from support.corpus import shape_of

    from explorer.engines.llamacpp.whatif import llama_model_from_shape

    # Llama-3.1-8B at Q8_0: a block is 231,751,680 bytes, of which the two bf16 norms 2 x 4096 x 2 = 16,384
    # stay in CPU; AMX packs the rest at 38/34: 231,735,296 x 38 / 34 = 258,998,272
    dense = llama_model_from_shape(shape_of("meta-llama__Meta-Llama-3.1-8B"), "Q8_0").layers[0].host
    assert (dense.amx.cpu_bytes, dense.amx.amx_bytes) == (16_384, 231_735_296 * 38 // 34)
    assert dense.avx2.repack_bytes == 0  # Q8_0 is repacked on ARM only
    # Qwen3-30B-A3B at Q4_0: routed experts (MUL_MAT_ID) stay in CPU_REPACK, attention and router go to AMX
    moe = llama_model_from_shape(shape_of("Qwen__Qwen3-30B-A3B"), "Q4_0").layers[0].host
    assert moe.amx.repack_bytes + moe.amx.amx_bytes == moe.avx2.repack_bytes  # Q4_0 packs at its own size
    assert 0 < moe.amx.amx_bytes < moe.amx.repack_bytes
