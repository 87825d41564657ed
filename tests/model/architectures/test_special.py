"""explorer.model.architectures.special: DeepSeek-V4's blocks, worked by hand from transformers' DeepseekV4 classes."""

from __future__ import annotations

from support.corpus import shape_of

from explorer.units import GiB

FLASH = "deepseek-ai__DeepSeek-V4-Flash"
#: V4-Flash: hidden 4,096, 64 heads of 512, q_lora 1,024, o_lora 1,024 in 8 groups, 256 experts of 2,048, hc 4
ATTENTION = (
    1024 * 4096  # wq_a
    + 1024  # q_norm
    + 64 * 512 * 1024  # wq_b
    + 512 * 4096  # wkv: one KV head, K reused as V
    + 512  # kv_norm
    + 8 * 1024 * (64 * 512 // 8)  # wo_a: 8 groups of 4,096 inputs to 1,024 each
    + 4096 * 8 * 1024  # wo_b
    + 64  # attn_sink, one a head
)
CSA_COMPRESSOR = 2 * (2 * 512 * 4096) + 4 * 2 * 512 + 512  # overlapping windows: twice the width; ape; norm
INDEXER = 64 * 128 * 1024 + 64 * 4096 + 2 * (2 * 128 * 4096) + 4 * 2 * 128 + 128
HCA_COMPRESSOR = 2 * (512 * 4096) + 128 * 512 + 512
MOE = 256 * 4096 + 256 * 3 * 4096 * 2048 + 3 * 4096 * 2048  # gate, routed experts, shared expert
REST = 2 * 4096 + 2 * (24 * 4 * 4096 + 24 + 3)  # two norms, two hyper-connections ((2 + 4) × 4 mixes)


def test_v4_flash_blocks_by_kind():
    """Layers 0–2 route by a token-id hash (a 129,280 × 6 table, no score bias); layers 0–1 keep no compressed
    history (ratio 0), even layers from 2 compress by 4 with the Lightning Indexer, odd ones by 128."""
    shape = shape_of(FLASH)
    block = [sum(t.elements for t in shape.decoder[i].tensors) for i in range(5)]
    assert block[0] == ATTENTION + MOE + REST + 129_280 * 6 == 6_577_192_054
    assert block[2] == ATTENTION + CSA_COMPRESSOR + INDEXER + MOE + REST + 129_280 * 6 == 6_596_334_326
    assert block[3] == ATTENTION + HCA_COMPRESSOR + MOE + REST + 256 == 6_580_676_982
    assert block[4] == ATTENTION + CSA_COMPRESSOR + INDEXER + MOE + REST + 256 == 6_595_558_902
    assert [shape.decoder[i].cache.ratio for i in range(5)] == [0, 0, 4, 128, 4]
    # the head: final norm, untied lm_head 129,280 × 4,096 and the hyper-connection head (4 × 16,384 + 4 + 1)
    assert sum(t.elements for t in shape.head) == 4096 + 129_280 * 4096 + 4 * 16_384 + 4 + 1
    assert shape.params == 284_334_567_511  # DeepSeek: 284B total


def test_v4_flash_is_still_approximate_for_its_mtp_layer():
    shape = shape_of(FLASH)
    assert shape.approximate and any("multi-token-prediction layer is not sized" in n for n in shape.notes)
    # fp4 experts (expert_dtype) at 4.25 bits, FP8 blocks elsewhere, bf16 compressors: 144.75 GiB
    assert round(shape.weight_bytes() / GiB, 2) == 144.75
