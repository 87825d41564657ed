"""explorer.artifacts.weight_formats: which weight formats a precision stores, as the weight-support table names them."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.artifacts.weight_formats import weight_formats
from explorer.model.quant_config import what_if_precision


def test_weight_formats_of_real_checkpoints_and_what_ifs():
    assert weight_formats(shape_of("deepseek-ai__DeepSeek-R1").precision) == ("fp8-block",)
    assert weight_formats(shape_of("openai__gpt-oss-120b").precision) == ("mxfp4",)
    assert weight_formats(shape_of("meta-llama__Meta-Llama-3.1-8B").precision) == ()  # bf16: always runs
    assert weight_formats(what_if_precision("int4-awq")) == ("awq",)
    assert weight_formats(what_if_precision("int8")) == ("int8",)
    assert weight_formats(what_if_precision("nvfp4")) == ("nvfp4",)
    assert weight_formats(what_if_precision("Q4_K_M")) == ()  # GGUF: llama.cpp runs it everywhere
