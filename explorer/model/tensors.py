"""The weights a model is made of, as groups of identical tensors.

A :class:`Tensor` is one parameter (``model.layers.{i}.self_attn.q_proj`` /
``weight``) with its shape, how many identical copies there are (routed
experts), what part of the model it is, how tensor parallelism splits it and
whether a quantiser converts it. Everything else — parameter counts, weight
bytes at any precision, a card's share under tensor/expert parallelism,
a pipeline stage's layers — is computed from these records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal[
    "embedding",  # token embeddings
    "position",  # learned position embeddings
    "lm_head",  # output projection to the vocabulary
    "norm",  # norm weights and biases
    "attention",  # q/k/v/o and MLA projections (and their biases)
    "linear_attention",  # gated-delta-net projections, conv, gates
    "ssm",  # Mamba mixer
    "mlp",  # dense feed-forward
    "router",  # MoE gate
    "expert",  # routed experts (count = number of experts)
    "shared_expert",  # always-on experts
    "vision",  # vision tower and projector
    "mtp",  # multi-token-prediction layers (not loaded for plain serving)
    "other",
]

#: how tensor parallelism divides a tensor
#: column: output rows split; row: input columns split; replicated: every
#: card a copy; vocab: rows padded to 64 then split (vLLM's VocabParallelEmbedding);
#: kv: K/V head rows, replicated once tp exceeds the heads; expert_column /
#: expert_row: routed experts, spread whole by expert parallelism, or each
#: expert split by tp on its output (gate/up) or input (down) side without it.
Split = Literal["column", "row", "replicated", "vocab", "kv", "expert_column", "expert_row"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tensor:
    """A group of identical parameters.

    Attributes:
        module: the module path, ``{i}`` standing for the layer index
            (``model.layers.{i}.mlp.down_proj``).
        param: the parameter name (``weight``, ``bias``, ``A_log``...).
        rows: output features (the length, for a vector).
        cols: input features (1 for a vector).
        count: identical copies (routed experts; 1 otherwise).
        role: what part of the model it is.
        split: how tensor parallelism divides it.
        linear: whether it is a Linear weight a quantiser may convert.
        heads: for ``split == "kv"``, the KV heads its rows hold.
    """

    module: str
    param: str = "weight"
    rows: int
    cols: int = 1
    count: int = 1
    role: Role
    split: Split = "replicated"
    linear: bool = False
    heads: int = 0

    @property
    def elements(self) -> int:
        """Parameters in the whole group."""
        return self.rows * self.cols * self.count

    def name(self, layer: int | None = None) -> str:
        """The full parameter name, with the layer index filled in."""
        module = self.module.replace("{i}", str(layer)) if layer is not None else self.module
        return f"{module}.{self.param}"


def linear(
    module: str,
    out_features: int,
    in_features: int,
    *,
    role: Role,
    split: Split,
    bias: bool = False,
    count: int = 1,
    heads: int = 0,
) -> tuple[Tensor, ...]:
    """A Linear layer's weight (and bias): ``out × in`` plus ``out``.

    A column-split layer's bias splits with it; a row-split layer's bias is
    added after the all-reduce, so every card holds all of it.
    """
    weight = Tensor(
        module=module,
        rows=out_features,
        cols=in_features,
        count=count,
        role=role,
        split=split,
        linear=True,
        heads=heads,
    )
    if not bias:
        return (weight,)
    bias_split: Split = "replicated" if split == "row" else split
    return (
        weight,
        Tensor(module=module, param="bias", rows=out_features, count=count, role=role, split=bias_split, heads=heads),
    )


def vector(
    module: str, length: int, *, role: Role = "norm", param: str = "weight", split: Split = "replicated"
) -> Tensor:
    """A 1-D parameter (a norm weight, a bias, ``A_log``...)."""
    return Tensor(module=module, param=param, rows=length, role=role, split=split)


def norm(module: str, size: int, *, bias: bool = False) -> tuple[Tensor, ...]:
    """An RMSNorm (weight) or a LayerNorm (weight and bias)."""
    weight = vector(module, size)
    return (weight, vector(module, size, param="bias")) if bias else (weight,)


def embedding(module: str, vocab: int, hidden: int, *, role: Role = "embedding") -> Tensor:
    """A vocabulary-parallel embedding or LM head: ``vocab × hidden``.

    Neither counts as ``linear``: AWQ, GPTQ, FP8 and NVFP4 checkpoints keep
    them in the model dtype (``lm_head`` is on every quantiser's skip list).
    """
    return Tensor(module=module, rows=vocab, cols=hidden, role=role, split="vocab")
