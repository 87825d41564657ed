"""A floor under the time of one decode step: the engines' fixed cost per layer, whatever the bandwidth.

At batch 1 a small model's roofline step on a fast card is a few hundred
microseconds, below what the kernels of a layer take to launch and
synchronise. Measured decode rates set a floor per layer and engine kind;
the estimate is never faster than ``dense layers × dense floor + MoE layers
× MoE floor`` a step (the bound stays the roofline's):

- llama.cpp: 0.1 ms a dense layer (ollama on an RTX 4090: Llama 3.2 3B at
  334.67 tokens/s, 0.107 ms a layer over 28), 0.15 ms a MoE layer (gpt-oss
  20b at 279.65 tokens/s, 0.149 ms over 24; geerlingguy/ai-benchmarks);
- vLLM and SGLang (CUDA graphs): 0.2 ms a dense layer (vLLM's CI, Llama-3.1-8B
  on an H200 at batch 8: 6.5 ms a step over 32 layers); a MoE layer of a model
  split over several cards 0.55 ms (SGLang 0.4.1, DeepSeek-V3 on 8 GPUs at
  batch 1: 30.29 tokens/s, 33.0 ms over 3 dense and 58 MoE layers,
  sglang#2643; 26 tokens/s in vllm#11539): the experts' all-to-all or
  all-reduce a layer on 8 cards is most of it. On one card a MoE layer has no
  collective: 0.15 ms, as llama.cpp's. vLLM serves Qwen3-Coder-30B-A3B AWQ on
  one RTX 5090 at a median 7.06 ms a token under load (48 layers: at most
  0.147 ms a layer; r/LocalLLaMA, "Qwen3 Coder family on RTX 5090 and PRO
  6000", vllm bench serve), so 0.55 ms there would cap it 3.7× too slow.

The rows are in tests/data/published_speeds.csv and docs/notes/speed_model.md.
"""

from __future__ import annotations

#: engine → (seconds a dense layer, a MoE layer on one card, a MoE layer split over several cards) of one
#: decode step at the least
LAYER_FLOOR_S: dict[str, tuple[float, float, float]] = {
    "llamacpp": (1.0e-4, 1.5e-4, 1.5e-4),
    "vllm": (2.0e-4, 1.5e-4, 5.5e-4),
    "sglang": (2.0e-4, 1.5e-4, 5.5e-4),
}


def decode_floor_s(shape, engine: str, cards: int = 1) -> float:
    """The least time one decode step of ``shape`` takes on ``engine`` over ``cards`` cards (0 for an engine
    without a floor)."""
    dense, moe_one, moe_split = LAYER_FLOOR_S.get(engine, (0.0, 0.0, 0.0))
    moe = moe_split if cards > 1 else moe_one
    moe_layers = shape.moe.moe_layers if shape.moe else 0
    return (shape.layers - moe_layers) * dense + moe_layers * moe
