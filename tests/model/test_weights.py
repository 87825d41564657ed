"""Weight bytes against published checkpoints: explorer's sizing of a quantised checkpoint held against the bytes
its own files state (``tests/data/published_checkpoints/<name>``: the real config.json and its safetensors index's
metadata, or a tensor inventory's summary, with a PROVENANCE file naming the repository, commit and path of each)."""

from __future__ import annotations

import json

import pytest
from support.corpus import DATA, shape_of

from explorer.artifacts.offer import computed_disk_bytes
from explorer.model.shapes import shape_from_config
from explorer.model.weights import weight_breakdown

PUBLISHED = DATA / "published_checkpoints"


def _published(name: str):
    """(shape, the index's total_size) of a published checkpoint."""
    folder = PUBLISHED / name
    config = json.loads((folder / "config.json").read_text())
    total = json.loads((folder / "index_metadata.json").read_text())["metadata"]["total_size"]
    return shape_from_config(config, name=name), total


def test_autoround_awq_qwen36_27b_is_sized_byte_for_byte_as_its_index_states():
    # Qwen3.6-27B quantised by auto-round and exported as AWQ (int4, group 128, asymmetric): each quantised
    # rows × cols matrix stores qweight rows·cols/2 bytes, qzeros (cols/128)·rows/2 and fp16 scales
    # (cols/128)·rows·2; everything else is float16, 2 bytes a parameter. The index's total_size counts the
    # tensors of its 13 shards (no file headers) and leaves out the MTP layer, which the checkpoint keeps in a
    # 14th file (model_extra_tensors.safetensors): explorer counts it apart, as vLLM loads it only to speculate.
    shape, total = _published("autoround-awq__Qwen3.6-27B")
    parts = weight_breakdown(shape, shape.precision)
    assert shape.precision.method == "awq"
    assert total == 26_025_400_800
    # embed_tokens 248,320 × 5,120 × 2; lm_head the same + the final norm's 5,120 × 2
    assert parts.embedding_bytes == 2_542_796_800
    assert parts.head_bytes == 2_542_796_800 + 10_240
    # vision tower 460,730,096 parameters × 2 (tests/model/architectures/test_vision.py works them out)
    assert parts.vision_bytes == 921_460_192
    assert parts.decoder_bytes == 20_018_336_768
    assert shape.weight_bytes() == total  # exact: 0 bytes apart
    # the MTP layer: one gated full-attention layer (q 12,288 × 5,120, k and v 1,024 × 5,120, o 5,120 × 6,144,
    # q/k norms 256 each), its MLP 3 × 17,408 × 5,120, two layer norms, fc 5,120 × 10,240 and three norms of
    # 5,120: 424,699,392 parameters in float16, not in total_size
    assert parts.mtp_bytes == 424_699_392 * 2


def test_the_skip_list_names_the_delta_nets_unfused_projections():
    # modules_to_not_convert lists "linear_attn.in_proj_b" and "linear_attn.in_proj_a" (every layer) and
    # "model.language_model.layers.0.linear_attn.in_proj_a"; the checkpoint stores them as float16 .weight
    shape, _ = _published("autoround-awq__Qwen3.6-27B")
    tensors = {t.module.rsplit(".", 1)[-1]: t for t in shape.decoder[0].tensors if t.linear}
    assert shape.precision.format_for(tensors["in_proj_b"], 0) is None
    assert shape.precision.format_for(tensors["in_proj_a"], 0) is None
    assert shape.precision.tensor_bytes(tensors["in_proj_b"], 0) == 48 * 5120 * 2  # one row per value head
    # in_proj_qkv (2 × 16 × 128 keys + 48 × 128 values = 10,240 rows) is quantised: AWQ int4 g128
    qkv = shape.precision.tensor_bytes(tensors["in_proj_qkv"], 0)
    assert qkv == 10240 * 5120 // 2 + 40 * 10240 // 2 + 40 * 10240 * 2


def _msmodelslim_qwen38():
    """(shape, verified metadata) of the msModelSlim W8A8 Qwen3.8-27B: its config assembled from the metadata's
    text and vision configs, with the quant_description its tensor inventory implies (see its PROVENANCE)."""
    meta = json.loads((PUBLISHED / "msmodelslim-w8a8__Qwen3.8-27B" / "verified_metadata.json").read_text())
    types = meta["text_config"]["layer_types"]
    linear = [i for i, kind in enumerate(types) if kind == "linear_attention"]
    description = {
        f"model.language_model.layers.{i}.linear_attn.{m}.weight": "FLOAT"
        for i in linear
        for m in ("out_proj", "in_proj_a", "in_proj_b")
    }
    description["mtp.fc.weight"] = "FLOAT"
    config = {
        "architectures": [meta["architecture"]],
        "model_type": "qwen3_5",
        "tie_word_embeddings": False,
        "text_config": meta["text_config"],
        "vision_config": meta["vision_config"],
        "quantization_config": {"quant_method": "w8a8_int8", "quant_description": description},
    }
    return shape_from_config(config, name="msmodelslim-w8a8__Qwen3.8-27B"), meta


def test_msmodelslim_w8a8_qwen38_27b_is_sized_within_one_percent_of_its_tensor_bytes():
    shape, meta = _msmodelslim_qwen38()
    parts = weight_breakdown(shape, shape.precision)
    assert shape.params == meta["total_parameter_elements"] == 27_781_427_952  # every tensor's elements, exact
    # tensor_data_bytes counts every tensor (MTP included). The MTP layer as stored: q/k/v/o and its MLP int8
    # (372,244,480 weights, 59,392 rows × fp32 scale + offset), fc 5,120 × 10,240 and 26,112 norm weights in bf16
    mtp = 372_244_480 + 59_392 * 8 + 52_428_800 * 2 + 26_112 * 2
    assert parts.mtp_bytes == mtp == 477_629_440
    served = meta["tensor_data_bytes"] - mtp
    assert served == 31_650_879_808
    # The decoder byte for byte: 22,817,013,760 int8 weights (48 delta-net layers × 351,272,960 + 16 attention
    # layers × 372,244,480), 3,653,632 rows × (4 + 4) bytes of scale and offset, and the rest of its
    # 24,353,196,544 parameters in bf16
    assert parts.decoder_bytes == 22_817_013_760 + 3_653_632 * 8 + (24_353_196_544 - 22_817_013_760) * 2
    # What explorer misses: the vision tower, which it keeps in bf16 (921,460,192 bytes), while this checkpoint
    # quantises each block's qkv, proj and fc1 (27 × 10,266,624 int8 weights, 240,624 rows × 8 bytes, their
    # 240,624 biases fp32) and keeps the other 183,290,624 parameters in bf16: 646,667,584 bytes
    tower = 277_198_848 + 240_624 * 8 + 240_624 * 4 + 183_290_624 * 2
    assert parts.vision_bytes - tower == 274_792_608
    assert shape.weight_bytes() - served == 274_792_608
    assert shape.weight_bytes() == pytest.approx(served, rel=0.009)  # +0.87 %


def test_deepseek_v3_fp8_block_with_its_fp8_mtp_layer_is_its_weight_files_to_two_parts_in_100000():
    # DeepSeek-V3 (fp8, 128 × 128 block scales): its 163 safetensors files hold 688,586,727,753 bytes
    # (published_checkpoints/deepseek-ai__DeepSeek-V3/PROVENANCE). explorer: the served weights plus the MTP layer
    # (layer 61), whose attention and experts are fp8 like the rest (vLLM deepseek_mtp.py builds it with the
    # checkpoint's quant_config), its eh_proj, embed_tokens and shared_head.head bf16. Before, the MTP layer was
    # sized in bf16: 700,077,434,720 (+1.67 %). The 11.9 MB left are the 163 files' JSON headers (~73 kB each),
    # which the file sizes count and the tensors do not.
    meta = json.loads((PUBLISHED / "deepseek-ai__DeepSeek-V3" / "sizes.json").read_text())
    shape = shape_of("deepseek-ai__DeepSeek-V3")
    parts = weight_breakdown(shape, shape.precision)
    assert meta["weight_file_bytes"] == 688_586_727_753
    assert parts.total_bytes + parts.mtp_bytes == computed_disk_bytes(shape) == 688_574_809_152
    assert meta["weight_file_bytes"] - computed_disk_bytes(shape) == 11_918_601  # 163 headers, about 73,120 bytes each
    assert computed_disk_bytes(shape) == pytest.approx(meta["weight_file_bytes"], rel=2e-5)
