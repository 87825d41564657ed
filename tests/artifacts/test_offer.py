"""explorer.artifacts.offer: a repository's files -> artifacts, with honest size labels.

Headers are real GGUF headers built with ``gguf_factory``; shapes come from
the real config corpus.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.corpus import load_config, shape_of
from support.gguf_factory import VT, Typed, build_gguf, llama_like, llama_metadata

from explorer.artifacts.checkpoints import GGUFFile, PublishedCheckpoint
from explorer.artifacts.offer import (
    build_offer,
    computed_disk_bytes,
    gguf_sets,
    native_gguf,
    original_artifact,
    original_weight_files,
    plan_artifacts,
    what_if_artifact,
    what_if_artifacts,
)
from explorer.artifacts.weight_formats import weight_formats
from explorer.errors import NothingToPlanError
from explorer.gguf.header import parse_gguf_header
from explorer.model.shapes import shape_from_config
from explorer.sources.checkpoints import shipped_checkpoints

LLAMA_8B = "meta-llama__Meta-Llama-3.1-8B"


def header(name: str, *, file_type: int = 15, split: tuple[int, int] | None = None, tensors=None):
    """A parsed GGUF header named ``name``; ``split=(no, count)`` (0-based no) writes the split keys."""
    extra = {"general.file_type": Typed(file_type, VT.UINT32)}
    if split:
        extra |= {"split.no": Typed(split[0], VT.UINT16), "split.count": Typed(split[1], VT.UINT16)}
    tensors = tensors if tensors is not None else llama_like()
    return parse_gguf_header(build_gguf(llama_metadata(**extra), tensors, with_data=False), name=name)


def test_split_sets_are_grouped_and_projectors_attached():
    files = {
        "m-Q4_K_M-00001-of-00003.gguf": 10,
        "m-Q4_K_M-00002-of-00003.gguf": 20,
        "m-Q4_K_M-00003-of-00003.gguf": 30,
        "m-Q8_0.gguf": 100,
        "mmproj-m-f32.gguf": 9,
        "mmproj-m-f16.gguf": 5,
        "README.md": 1,
    }
    offer = build_offer(files)
    assert [a.name for a in offer] == ["m-Q8_0.gguf", "m-Q4_K_M-00001-of-00003.gguf"]  # largest first
    q8, q4 = offer
    assert q4.files == ("m-Q4_K_M-00001-of-00003.gguf", "m-Q4_K_M-00002-of-00003.gguf", "m-Q4_K_M-00003-of-00003.gguf")
    assert (q4.size_bytes, q4.size_source, q4.quant, q4.format) == (60, "fetched", "Q4_K_M", "gguf")
    assert (q8.quant, q8.size_bytes) == ("Q8_0", 100)
    assert q4.projector == q8.projector == "mmproj-m-f16.gguf"  # F16 preferred over F32
    assert not any("mmproj" in a.name for a in offer)
    assert gguf_sets(files) == [q4.files, ("m-Q8_0.gguf",)]


def test_original_weights_sum_the_checkpoint_files_only():
    shape = shape_of(LLAMA_8B)
    files = {
        "config.json": 800,
        "model-00001-of-00002.safetensors": 4_976_698_672,
        "model-00002-of-00002.safetensors": 1_050_673_280,
        "consolidated.safetensors": 16_060_522_368,
        "original/consolidated.00.pth": 16_060_617_592,
    }
    (original,) = build_offer(files, shape=shape, params_by_dtype={"BF16": 8_030_261_248})
    assert original.files == ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    assert (original.size_bytes, original.size_source) == (4_976_698_672 + 1_050_673_280, "fetched")
    assert original.quant == "bf16" and dict(original.params_by_dtype) == {"BF16": 8_030_261_248}
    assert original.label == "original (bf16)" and not original.what_if
    # a repo with only consolidated.safetensors offers that; the index's shard list wins over names
    assert original_weight_files({"consolidated.safetensors": 1}) == ["consolidated.safetensors"]
    assert original_weight_files(files, shards=["a.safetensors"]) == ["a.safetensors"]


def test_sizes_are_computed_only_when_nothing_was_fetched():
    shape = shape_of(LLAMA_8B)
    (computed,) = build_offer({"config.json": 800}, shape=shape)
    assert computed.size_source == "computed" and computed.size_bytes == shape.weight_bytes() == 16_060_522_496
    # a listed shard of unknown size (0) is not a fetched size: the whole is computed
    (partial,) = build_offer({"config.json": 800, "model.safetensors": 0}, shape=shape)
    assert partial.size_source == "computed" and partial.files == ("model.safetensors",)
    # DeepSeek-V3 stores its multi-token-prediction layer: on disk, so in the computed size
    v3 = shape_of("deepseek-ai__DeepSeek-V3")
    assert computed_disk_bytes(v3) > v3.weight_bytes()
    # a GGUF file of unknown size and no header: computed from the quant's average bits, if the quant is known
    offer = build_offer({"config.json": 1, "x-Q4_K_M.gguf": 0, "x-weird.gguf": 0}, shape=shape)
    gguf = [a for a in offer if a.format == "gguf"]
    assert [(a.quant, a.size_source) for a in gguf] == [("Q4_K_M", "computed")]
    assert gguf[0].size_bytes == shape.weight_bytes("Q4_K_M")


def test_header_names_the_quant_and_sizes_when_the_listing_cannot():
    h = header("x-Q8_0.gguf", file_type=15)  # the header says Q4_K_M; it wins over the file name
    (a,) = build_offer({"x-Q8_0.gguf": 0}, gguf_headers={"x-Q8_0.gguf": h})
    assert (a.quant, a.size_source) == ("Q4_K_M", "header")
    assert a.size_bytes == h.header_bytes + h.tensor_bytes_total and a.gguf_header is h
    (b,) = build_offer({"x-Q8_0.gguf": 5 << 30}, gguf_headers={"x-Q8_0.gguf": h})
    assert (b.size_bytes, b.size_source) == (5 << 30, "fetched")  # a listed size beats the header's


def test_split_set_headers_merge_only_when_every_part_was_read():
    tensors = llama_like()
    names = ("s-00001-of-00002.gguf", "s-00002-of-00002.gguf")
    parts = [header(names[0], split=(0, 2), tensors=tensors[:10]), header(names[1], split=(1, 2), tensors=tensors[10:])]
    files = dict.fromkeys(names, 1 << 20)
    (whole,) = build_offer(files, gguf_headers=dict(zip(names, parts, strict=True)))
    assert whole.gguf_header is not None and len(whole.gguf_header.tensors) == len(tensors)
    (first_only,) = build_offer(files, gguf_headers={names[0]: parts[0]})
    assert first_only.gguf_header is None and first_only.quant == "Q4_K_M"  # named by the first part's header
    assert first_only.size_bytes == 2 << 20


def test_a_repo_with_nothing_to_plan():
    with pytest.raises(NothingToPlanError, match="README.md"):
        build_offer({"README.md": 10, ".gitattributes": 1, "mmproj-only.gguf": 3})
    with pytest.raises(NothingToPlanError):
        build_offer({"config.json": 10})  # a config but no shape to plan with


def test_what_if_artifacts():
    shape = shape_of(LLAMA_8B)
    whatifs = what_if_artifacts(shape)
    # bf16 is the checkpoint's own; fp8 with none published is the engine's online per-tensor fp8
    assert [a.quant for a in whatifs] == ["fp8 per-tensor, online", "int4 AWQ g128"]
    assert all(a.what_if and a.size_source == "computed" and a.format == "safetensors" for a in whatifs)
    fp8, awq = whatifs
    assert shape.weight_bytes() > fp8.size_bytes > awq.size_bytes > 0
    assert fp8.size_bytes == shape.weight_bytes("fp8-online")
    gptq = what_if_artifacts(shape, ("int4-gptq", "bf16"))
    assert [a.quant for a in gptq] == ["int4 GPTQ g128"] and gptq[0].size_bytes > awq.size_bytes  # g_idx costs
    v3 = shape_of("deepseek-ai__DeepSeek-V3")  # an fp8 checkpoint: bf16 is a what-if, fp8 is not
    assert [a.quant for a in what_if_artifacts(v3)] == ["bf16", "int4 AWQ g128"]


def test_float32_asked_of_a_float32_checkpoint_is_a_what_if():
    # vLLM and SGLang load a float32 checkpoint at 16 bits at --dtype auto: keeping it float32 is a --dtype,
    # so the what-if stays one (what_if=True), sized at 4 bytes a parameter; bf16 asked of a bf16 model is the original
    granite = shape_of("ibm-granite__granite-3.1-1b-a400m-instruct")
    kept = what_if_artifact(granite, "fp32")
    assert (kept.name, kept.quant, kept.what_if, kept.size_bytes) == ("original", "fp32", True, 1_334_628_352 * 4)
    assert "own float32 weights kept at float32" in kept.note
    assert "convert_hf_to_gguf.py --outtype f32" in kept.note  # its default, auto, writes F16 from float32
    assert not what_if_artifact(shape_of(LLAMA_8B), "bf16").what_if


# --- what-if precisions name a real checkpoint (issue 13 §4) --------------------------------------

AWQ_70B = PublishedCheckpoint(
    repo="hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4",
    base_model="meta-llama/Meta-Llama-3.1-70B-Instruct",
    format="awq",
    bits=4,
    stands_in=True,
    verified="card",
)
GGUF_70B = PublishedCheckpoint(
    repo="bartowski/Meta-Llama-3.1-70B-Instruct-GGUF",
    base_model="meta-llama/Meta-Llama-3.1-70B-Instruct",
    format="gguf",
    files=(GGUFFile(name="Meta-Llama-3.1-70B-Instruct-Q4_K_M.gguf", quant="Q4_K_M", size_bytes=42_520_398_400),),
    stands_in=True,
    verified="files",
)


def test_a_what_if_with_a_published_checkpoint_names_its_repo_and_real_size():
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    awq, q4 = what_if_artifacts(shape, ("int4-awq", "Q4_K_M"), (AWQ_70B, GGUF_70B))
    assert (awq.repo, awq.name, awq.format, awq.what_if) == (AWQ_70B.repo, AWQ_70B.repo, "safetensors", True)
    assert awq.size_source == "computed"  # the card gives no bytes: sized from the shape, and said so
    assert "stands in for meta-llama__Meta-Llama-3.1-70B" in awq.note
    # the GGUF file's real size (bartowski's listing), not the shape's estimate
    assert (q4.repo, q4.files, q4.size_bytes, q4.size_source) == (
        GGUF_70B.repo,
        ("Meta-Llama-3.1-70B-Instruct-Q4_K_M.gguf",),
        42_520_398_400,
        "fetched",
    )


def test_a_what_if_without_one_says_so():
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    awq, fp8 = what_if_artifacts(shape, ("int4-gptq", "fp8"), (AWQ_70B,))
    assert awq.repo is None and awq.note.endswith("no published int4 GPTQ g128 checkpoint of "
                                                  "meta-llama__Meta-Llama-3.1-70B known: quantise it yourself")  # fmt: skip
    assert fp8.repo is None and fp8.note.endswith(
        "vLLM and SGLang quantise it while loading (--quantization fp8: fp8 weights with one scale a tensor)"
    )


def test_the_online_fp8_what_if_counts_one_scale_a_tensor_not_128_blocks():
    """vLLM's ``--quantization fp8`` over bf16 weights (``Fp8OnlineLinearMethod``: ``weight_block_size = None``,
    ``ops.scaled_fp8_quant(weight)``) keeps one fp32 scale a matrix. Llama-3.1-8B, one layer's seven matrices:
    128 × 128 blocks would store q 32·32 + k 8·32 + v 8·32 + o 32·32 + gate 112·32 + up 112·32 + down 32·112
    = 13,312 scales (53,248 B); per tensor 7 (28 B). Over 32 layers: 1,703,936 − 896 = 1,703,040 B fewer."""
    shape = shape_of(LLAMA_8B)
    online = what_if_artifact(shape, "fp8")
    assert online.quant == "fp8 per-tensor, online" and online.repo is None
    assert shape.weight_bytes("fp8") - online.size_bytes == 1_703_040
    assert online.size_bytes == shape.weight_bytes("fp8-online") == 9_081_201_536


# --- a published fp8 checkpoint is labelled and sized by its own scheme --------------------------------------------


def test_nvidias_modelopt_fp8_checkpoint_counts_one_fp32_scale_a_matrix():
    """nvidia/Llama-3.1-8B-Instruct-FP8 is ModelOpt ``quant_algo: FP8``: one fp32 weight scale a matrix (vLLM
    ``modelopt.py``), not 128 × 128 blocks. Llama-3.1-8B's 32 layers × 7 matrices × 4 B = 896 B of scales; blocks
    would store 13,312 scales a layer (53,248 B; 1,703,936 B in all): 1,703,040 B more. The fp8 weights are
    32 × (4096·4096 q + 1024·4096 k + 1024·4096 v + 4096·4096 o + 3 · 14336·4096) = 6,979,321,856 B; embeddings and
    lm_head bf16 2 × 128,256 · 4096 · 2 = 2,101,346,304 B; norms (65 × 4096) · 2 = 532,480 B."""
    shape = shape_of(LLAMA_8B)
    (published,) = (c for c in shipped_checkpoints("meta-llama/Meta-Llama-3.1-8B") if c.format == "fp8")
    assert (published.repo, published.scheme) == ("nvidia/Llama-3.1-8B-Instruct-FP8", "tensor-modelopt")
    fp8 = what_if_artifact(shape, "fp8", (published,))
    assert (fp8.quant, fp8.repo, fp8.size_source) == ("fp8 per-tensor (ModelOpt)", published.repo, "computed")
    assert fp8.size_bytes == 6_979_321_856 + 32 * 7 * 4 + 2_101_346_304 + 532_480 == 9_081_201_536
    assert shape.weight_bytes("fp8") - fp8.size_bytes == 1_703_040
    assert shape.precision_of(fp8).name == "fp8 per-tensor (ModelOpt)"  # the label resolves back to the scheme


def test_the_70b_modelopt_checkpoint_is_per_tensor_and_loads_as_its_config_says():
    """Llama-3.1-70B, a layer's block scales: q 64·64 + k 8·64 + v 8·64 + o 64·64 + gate, up, down 224·64 each
    = 52,224 (208,896 B); per tensor 7 (28 B). Over 80 layers: 16,711,680 − 2,240 = 16,709,440 B fewer."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-70B")
    fp8 = what_if_artifact(shape, "fp8", shipped_checkpoints("meta-llama/Meta-Llama-3.1-70B"))
    assert (fp8.repo, fp8.quant) == ("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8 per-tensor (ModelOpt)")
    assert shape.weight_bytes("fp8") - fp8.size_bytes == 16_709_440
    precision = shape.precision_of(fp8)
    assert precision.source == "published" and weight_formats(precision) == ("fp8",)  # not fp8-block


def test_metas_405b_fbgemm_checkpoint_keeps_its_attention_and_end_mlps_in_bf16():
    """Meta's Llama-3.1-405B-Instruct-FP8 (fbgemm_fp8): fp8 with an fp32 scale a row, every attention projection and
    layers 0 and 125's MLPs left bf16. Its what-if is byte for byte the precision its own config gives."""
    shape = shape_of("meta-llama__Meta-Llama-3.1-405B")
    fp8 = what_if_artifact(shape, "fp8", shipped_checkpoints("meta-llama/Meta-Llama-3.1-405B"))
    assert fp8.repo.startswith("meta-llama/") and fp8.quant == "fp8 per-channel (FBGEMM)"
    skip = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(126) for p in "qkvo"]
    skip += [f"model.layers.{i}.mlp.{p}_proj" for i in (0, 125) for p in ("gate", "up", "down")]
    config = load_config("meta-llama__Meta-Llama-3.1-405B")
    config["quantization_config"] = {"quant_method": "fbgemm_fp8", "modules_to_not_convert": [*skip, "lm_head"]}
    assert fp8.size_bytes == shape_from_config(config, name=shape.name).weight_bytes()
    # bf16 attention (126 × (16384·16384·2 + 1024·16384·2) × 2 B) and end MLPs: far above the block what-if's size
    assert fp8.size_bytes - shape.weight_bytes("fp8") > 126 * (2 * 16384 * 16384 + 2 * 1024 * 16384)


def test_amd_quark_and_redhat_dynamic_checkpoints_are_labelled_by_their_scheme():
    by_repo = {
        c.repo: c.what_if_name
        for base in ("meta-llama/Meta-Llama-3.1-70B-Instruct", "google/gemma-3-27b-it")
        for c in shipped_checkpoints(base)
        if c.format == "fp8"
    }
    assert by_repo["amd/Meta-Llama-3.1-70B-Instruct-fp8-quark-vllm"] == "fp8-tensor-quark"
    assert by_repo["RedHatAI/gemma-3-27b-it-FP8-dynamic"] == "fp8-channel-dynamic"
    shape = shape_of(LLAMA_8B)
    assert shape.resolve_precision("fp8 per-tensor (Quark)").groups[0].fmt.fp8_scale == "tensor"
    dynamic = shape.resolve_precision("fp8 per-channel, dynamic activations")
    # one fp32 scale a row: down_proj 4096 rows × 14,336 fp8 + 4096 × 4 B
    assert dynamic.tensor_bytes(next(t for t in shape.decoder[0].tensors if t.module.endswith("down_proj")), 0) == (
        4096 * 14336 + 4096 * 4
    )


def test_a_published_gguf_of_the_models_own_weights_joins_its_offer():
    """gpt-oss-20b's MXFP4 experts as ggml-org publishes them (llama.cpp's guide: ``-hf ggml-org/gpt-oss-20b-GGUF``):
    the file's own size, the best-ranked of the three publishers, offered beside the safetensors original."""
    shape = shape_of("openai__gpt-oss-20b")
    checkpoints = shipped_checkpoints("openai/gpt-oss-20b")
    native = native_gguf(shape, checkpoints)
    assert native is not None and not native.what_if
    assert (native.repo, native.files, native.quant) == (
        "ggml-org/gpt-oss-20b-GGUF",
        ("gpt-oss-20b-MXFP4.gguf",),
        "MXFP4",
    )
    assert (native.size_bytes, native.size_source) == (12_109_566_624, "fetched")
    offered = plan_artifacts(shape, [original_artifact(shape)], checkpoints=checkpoints)
    assert [a.format for a in offered] == ["safetensors", "gguf"] and offered[1] == native
    # a precision asked for, or no published file of the own type, offers none
    assert (
        plan_artifacts(shape, [original_artifact(shape)], quant="Q4_K_M", checkpoints=checkpoints)[0].quant == "Q4_K_M"
    )
    assert native_gguf(shape_of("deepseek-ai__DeepSeek-R1"), shipped_checkpoints("deepseek-ai/DeepSeek-R1")) is None


def test_a_stand_in_gguf_is_not_the_models_own_weights():
    shape = shape_of(LLAMA_8B)  # bf16: a BF16 GGUF of the Instruct model stands in for the base, other weights
    stand_in = PublishedCheckpoint(
        repo="someone/Meta-Llama-3.1-8B-Instruct-GGUF",
        base_model="meta-llama/Meta-Llama-3.1-8B-Instruct",
        format="gguf",
        files=(GGUFFile(name="x-BF16.gguf", quant="BF16", size_bytes=16_068_890_912),),
        stands_in=True,
    )
    assert native_gguf(shape, [stand_in]) is None
    assert native_gguf(shape, [replace(stand_in, stands_in=False)]).files == ("x-BF16.gguf",)
