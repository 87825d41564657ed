"""explorer.model.conversion: a checkpoint's precision once convert_hf_to_gguf.py (and llama-quantize) wrote it."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.model.conversion import converted_precision, native_gguf_types

#: one gpt-oss-20b layer's experts at MXFP4: 32 experts × 2,880 columns × (5,760 gate_up + 2,880 down) rows,
#: 17 bytes (16 of nibbles + one e8m0 scale) a block of 32 values = 796,262,400 / 32 × 17
EXPERTS_MXFP4_BYTES = 32 * 2880 * (5760 + 2880) // 32 * 17
#: the same layer's attention matrices at F16: 2,880 × (4,096 q + 512 k + 512 v + 4,096 o) × 2 bytes
ATTENTION_F16_BYTES = 2880 * (4096 + 512 + 512 + 4096) * 2


def test_the_converter_keeps_gpt_oss_mxfp4_experts_at_its_own_types():
    shape = shape_of("openai__gpt-oss-20b")
    for quant in ("F16", "BF16", "Q8_0", "f16"):
        precision = converted_precision(shape, quant)
        assert precision.kept is shape.precision and precision.name.endswith("+ mxfp4 experts")
    layer = shape.decoder[0]
    precision = converted_precision(shape, "F16")
    experts = sum(precision.tensor_bytes(t, 0) for t in layer.tensors if t.role == "expert" and t.cols > 1)
    attention = sum(precision.tensor_bytes(t, 0) for t in layer.tensors if t.role == "attention" and t.cols > 1)
    assert experts == EXPERTS_MXFP4_BYTES == 423_014_400
    assert attention == ATTENTION_F16_BYTES == 53_084_160


def test_the_f16_gguf_of_gpt_oss_20b_is_the_published_12_8_gib():
    # llamacpp__gpt-oss-20b__T4__1 (b8193): CUDA0 model buffer 12,036.68 MiB (every layer and the output),
    # CPU_Mapped 1,104.61 MiB (token_embd 201,088 × 2,880 at F16 = 1,158,266,880 bytes)
    model = llama_model_from_shape(shape_of("openai__gpt-oss-20b"), "F16")
    on_card = sum(layer.weight_bytes for layer in model.layers) + model.output_bytes + model.output_norm_bytes
    assert model.token_embd_bytes == 201_088 * 2880 * 2 == 1_158_266_880
    assert abs(on_card - 12_036.68 * 2**20) / (12_036.68 * 2**20) < 0.005
    # every matrix at F16 would be 37.9 GiB: the experts alone are 24 × 1,592,524,800 bytes
    assert on_card < 12 * 2**30


def test_llama_quantize_requantises_the_experts():
    shape = shape_of("openai__gpt-oss-20b")
    precision = converted_precision(shape, "Q4_K_M")
    assert precision.kept is None and precision == shape.resolve_precision("Q4_K_M")


def test_a_bf16_checkpoint_converts_as_its_what_if():
    shape = shape_of("meta-llama__Llama-3.2-1B")
    assert converted_precision(shape, "F16") == shape.resolve_precision("F16")
    assert converted_precision(shape, "F16").kept is None


def test_a_q8_0_conversion_of_gpt_oss_keeps_the_experts_too():
    # convert_hf_to_gguf.py --outtype q8_0 writes the experts as MXFP4 and the rest at Q8_0 (34 bytes a block of
    # 32): a layer's attention 26,542,080 values → 28,200,960 bytes beside its 423,014,400 bytes of experts
    model = llama_model_from_shape(shape_of("openai__gpt-oss-20b"), "Q8_0")
    layer = model.layers[0].weight_bytes
    assert EXPERTS_MXFP4_BYTES + 26_542_080 * 34 // 32 < layer < EXPERTS_MXFP4_BYTES + 26_542_080 * 34 // 32 + 2**20


def test_an_mxfp4_gguf_of_gpt_oss_holds_its_experts_and_q8_0_elsewhere():
    # llama-quant.cpp MXFP4_MOE: "MoE tensors -> MXFP4, other tensors -> Q8_0", so the published files are the
    # Q8_0 conversion: 12,076,119,168 bytes from the shape against ggml-org's 12,109,566,624-byte file (0.3 % less:
    # its header and metadata); 63,254,703,744 against gpt-oss-120b's 63,387,346,208
    shape = shape_of("openai__gpt-oss-20b")
    for quant in ("MXFP4", "mxfp4_moe"):
        precision = converted_precision(shape, quant)
        assert precision.kept is shape.precision and precision.name == "Q8_0 + mxfp4 experts"
    assert llama_model_from_shape(shape, "MXFP4").weight_bytes == 12_076_119_168
    assert llama_model_from_shape(shape_of("openai__gpt-oss-120b"), "MXFP4").weight_bytes == 63_254_703_744


def test_the_native_gguf_types_are_the_checkpoints_own():
    assert native_gguf_types(shape_of("openai__gpt-oss-20b")) == {"MXFP4", "MXFP4_MOE"}
    assert native_gguf_types(shape_of("meta-llama__Llama-3.2-1B")) == {"BF16"}
    assert native_gguf_types(shape_of("deepseek-ai__DeepSeek-R1")) == set()  # fp8: no GGUF type holds it as is
