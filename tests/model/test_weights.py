"""Weight bytes against published checkpoints: explorer's sizing of a quantised checkpoint held against the bytes
its own safetensors index states (``tests/data/published_checkpoints/<name>``: the real config.json, the index's
metadata and a PROVENANCE file naming the repository, commit and path each was read from)."""

from __future__ import annotations

import json

from support.corpus import DATA

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
