"""explorer.artifacts.checkpoints: which published checkpoint a what-if precision loads, and the placeholder."""

from __future__ import annotations

import pytest

from explorer.artifacts.checkpoints import (
    GGUFFile,
    PublishedCheckpoint,
    checkpoint_for,
    checkpoint_from_record,
    checkpoint_record,
    convert_ref,
    loads_published_weights,
    placeholder_ref,
)

BASE = "meta-llama/Meta-Llama-3.1-70B"


def ckpt(repo: str, fmt: str = "awq", **kw) -> PublishedCheckpoint:
    return PublishedCheckpoint(repo=repo, base_model=kw.pop("base_model", BASE), format=fmt, **kw)


def test_the_model_itself_beats_a_stand_in_then_verification_then_publisher():
    stand_in = ckpt("hugging-quants/X-Instruct-AWQ-INT4", stands_in=True, verified="card")
    own_org_name_only = ckpt("meta-llama/X-AWQ", verified="name-only")
    stranger_card = ckpt("someone/X-AWQ", verified="card")
    known_card = ckpt("hugging-quants/X-AWQ", verified="card")
    # a quant of the model itself (not a stand-in) wins; among those the better-verified, then a known publisher
    assert checkpoint_for("awq", [stand_in, own_org_name_only, stranger_card, known_card]) is known_card
    assert checkpoint_for("awq", [stand_in, own_org_name_only]) is own_org_name_only
    assert checkpoint_for("awq", [stand_in]) is stand_in
    assert checkpoint_for("gptq", [stand_in, known_card]) is None  # no GPTQ published


def test_formats_bits_and_gguf_quants_must_match():
    fp8, w8a8 = ckpt("nvidia/X-FP8", "fp8"), ckpt("RedHatAI/X-w8a8", "compressed-tensors")
    assert checkpoint_for("fp8", [w8a8, fp8]) is fp8
    assert checkpoint_for("compressed-tensors", [w8a8, fp8]) is w8a8  # the int8 what-if
    int8 = ckpt("Qwen/X-GPTQ-Int8", "gptq", bits=8)
    assert checkpoint_for("gptq", [int8], bits=4) is None and checkpoint_for("gptq", [int8], bits=8) is int8
    gguf = ckpt("bartowski/X-GGUF", "gguf", files=(GGUFFile(name="X-Q4_K_M.gguf", quant="Q4_K_M", size_bytes=9),))
    assert checkpoint_for("gguf", [gguf], gguf_quant="q4_k_m") is gguf
    assert checkpoint_for("gguf", [gguf], gguf_quant="Q8_0") is None  # the repo has no Q8_0 file
    assert gguf.gguf_file("Q4_K_M").size_bytes == 9


def test_records_round_trip_and_bad_records_are_refused():
    c = ckpt(
        "bartowski/X-GGUF", "gguf", files=(GGUFFile(name="a.gguf", quant="Q4_K_M", size_bytes=5),), verified="files"
    )
    again = checkpoint_from_record(checkpoint_record(c), source="cache")
    assert again == PublishedCheckpoint(**{**{f: getattr(c, f) for f in c.__dataclass_fields__}, "source": "cache"})
    assert checkpoint_from_record({**checkpoint_record(c), "size_bytes": 0}, source="x").size_bytes is None
    with pytest.raises(ValueError, match="known format"):
        checkpoint_from_record({"repo": "a/b", "base_model": "c/d", "format": "exl2"}, source="x")
    with pytest.raises(ValueError, match="whole number"):
        checkpoint_from_record({**checkpoint_record(c), "size_bytes": -3}, source="x")


def test_the_placeholder_is_visible_and_never_a_repo_id():
    ref = placeholder_ref("int4 AWQ g128", BASE)
    assert ref == "<meta-llama/Meta-Llama-3.1-70B at int4 AWQ g128: no published checkpoint known>"
    assert ref.startswith("<") and " " in ref  # a shell would refuse it; no engine would take it for a repo


def test_a_command_runs_as_printed_only_without_a_placeholder():
    published = "vllm serve hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4 --tensor-parallel-size 2"
    unpublished = f"vllm serve {placeholder_ref('int4 AWQ g128', BASE)} --tensor-parallel-size 2"
    converted = f"llama-server -m {convert_ref('BF16', BASE)} -ngl 81"
    assert converted == (
        "llama-server -m <meta-llama/Meta-Llama-3.1-70B converted to a BF16 GGUF "
        "(convert_hf_to_gguf.py --outtype bf16)> -ngl 81"
    )
    assert loads_published_weights(published)
    assert not loads_published_weights(unpublished) and not loads_published_weights(converted)
    # an RPC host placeholder names a machine, not weights: the command still loads what is published
    assert loads_published_weights("llama-server --hf-repo a/b --hf-file m.gguf --rpc <node1>:50052")


def test_the_convert_placeholder_says_the_steps_the_target_type_needs():
    """convert_hf_to_gguf.py --outtype writes f32, f16, bf16, q8_0 (and the ternary tq1_0, tq2_0) itself; a
    K-quant needs llama-quantize after it. explorer's own float names (fp16) are the converter's (f16)."""
    assert convert_ref("fp16", BASE) == (
        "<meta-llama/Meta-Llama-3.1-70B converted to a F16 GGUF (convert_hf_to_gguf.py --outtype f16)>"
    )
    assert convert_ref("Q8_0", BASE).endswith("(convert_hf_to_gguf.py --outtype q8_0)>")
    assert convert_ref("Q4_K_M", BASE) == (
        "<meta-llama/Meta-Llama-3.1-70B converted to a Q4_K_M GGUF "
        "(convert_hf_to_gguf.py, then llama-quantize to Q4_K_M)>"
    )
    assert not loads_published_weights(f"llama-server -m {convert_ref('Q4_K_M', BASE)}")
    assert not loads_published_weights(f"llama-server -m {convert_ref('F16', BASE)}")


def test_an_fp8_scheme_round_trips_and_a_wrong_one_is_refused():
    modelopt = ckpt("nvidia/Llama-3.1-8B-Instruct-FP8", "fp8", scheme="tensor-modelopt")
    record = checkpoint_record(modelopt)
    assert record["scheme"] == "tensor-modelopt" and "scheme" not in checkpoint_record(ckpt("Qwen/X-FP8", "fp8"))
    assert checkpoint_from_record(record, source="shipped") == modelopt
    assert modelopt.what_if_name == "fp8-tensor-modelopt"
    assert ckpt("Qwen/X-FP8", "fp8").what_if_name is None  # block 128 × 128: the fp8 what-if as it is
    with pytest.raises(ValueError, match="not an fp8 scheme"):
        checkpoint_from_record({**record, "scheme": "tensor"}, source="x")
    with pytest.raises(ValueError, match="not an fp8 scheme"):  # a scheme only says how fp8 scales are laid out
        checkpoint_from_record({**record, "format": "awq", "scheme": "tensor-modelopt"}, source="x")
