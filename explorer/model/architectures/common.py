"""Building blocks shared by the architecture builders.

A builder reads a :class:`~explorer.model.config_reader.ConfigView` and returns
:class:`ArchParts`: the decoder layers (each with its cache spec and its
tensors), the embeddings, the head, the vision tower, any multi-token
prediction layers, and what is approximate about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.model.config_reader import ConfigView
from explorer.model.kv_cache import FullAttention, LayerCache
from explorer.model.tensors import Role, Split, Tensor, embedding, linear, norm, vector
from explorer.model.tie_defaults import default_tied


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One decoder layer.

    Attributes:
        cache: what it keeps per token / per sequence.
        tensors: its parameters.
        moe: whether it routes tokens to experts.
    """

    cache: LayerCache
    tensors: tuple[Tensor, ...]
    moe: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MoESpec:
    """A mixture-of-experts model's routing.

    Attributes:
        experts: routed experts per MoE layer.
        shared_experts: always-active experts per MoE layer.
        experts_per_token: routed experts each token uses.
        moe_intermediate_size: a routed expert's hidden width.
        shared_intermediate_size: the shared experts' total hidden width (0 if none).
        moe_layers: layers that route to experts.
        dense_layers: layers with a plain MLP instead.
        first_dense_layers: leading dense layers (``first_k_dense_replace``).
    """

    experts: int
    shared_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_intermediate_size: int
    moe_layers: int
    dense_layers: int
    first_dense_layers: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class VisionSpec:
    """A vision tower, as the engines' tensor-parallel rules need it.

    Attributes:
        model_type: the tower's own model_type, when given.
        heads: attention heads of the tower.
        layers: its transformer layers.
        hidden_size: its width.
        params: its parameter count (an estimate unless stated exact).
    """

    model_type: str
    heads: int
    layers: int
    hidden_size: int
    params: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchParts:
    """Everything a builder found in a config.

    Attributes:
        family: the builder's name.
        layers: the decoder layers in order.
        embeddings: token (and position) embeddings.
        head: the final norm and LM head (no LM head when tied).
        vision: the vision tower and projector tensors.
        mtp: multi-token-prediction layers stored in the checkpoint.
        moe: routing, for a mixture of experts.
        vision_spec: the tower's heads and size.
        exact: whether the parameter count follows the architecture exactly.
        notes: what was assumed, and why.
    """

    family: str
    layers: tuple[Layer, ...]
    embeddings: tuple[Tensor, ...]
    head: tuple[Tensor, ...]
    vision: tuple[Tensor, ...] = ()
    mtp: tuple[Tensor, ...] = ()
    moe: MoESpec | None = None
    vision_spec: VisionSpec | None = None
    exact: bool = True
    notes: tuple[str, ...] = ()


@dataclass
class Dims:
    """The sizes most decoders share, read once from the config.

    Attributes:
        hidden: model width.
        layers: decoder layers.
        heads: query heads.
        kv_heads: key/value heads (= heads when the config does not say).
        head_dim: per-head width (explicit, or hidden / heads).
        intermediate: dense MLP width (0 when absent).
        vocab: vocabulary size.
        tied: whether the LM head shares the token embedding.
        notes: assumptions made while reading.
    """

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    notes: list[str] = field(default_factory=list)


def read_dims(view: ConfigView, *, tied_default: bool = False, intermediate_default: int | None = None) -> Dims:
    """Read the common sizes, raising one error that names every missing key."""
    hidden = view.require("hidden_size")
    layers = view.require("layers")
    heads = view.require("heads")
    vocab = view.require("vocab")
    view.raise_if_missing()
    notes: list[str] = []
    kv_heads = view.alias_int("kv_heads", minimum=1)
    if kv_heads is None:
        if view.get_bool("multi_query", "multi_query_attention"):
            kv_heads = view.get_int("multi_query_group_num", default=1, minimum=1) or 1
        else:
            kv_heads = heads
    head_dim = view.alias_int("head_dim", minimum=1)
    if head_dim is None:
        head_dim = hidden // heads
        if hidden % heads:
            notes.append(f"head_dim derived as hidden_size // heads = {head_dim} (not exact: {hidden} % {heads} ≠ 0)")
    intermediate = view.alias_int("intermediate")
    if intermediate is None:
        intermediate = intermediate_default if intermediate_default is not None else 0
    # an absent key takes the config class's default in transformers, which differs by architecture
    tied = view.get_bool(
        "tie_word_embeddings", default=default_tied((view.text_model_type(), view.model_type()), tied_default)
    )
    return Dims(
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        vocab=vocab,
        tied=tied,
        notes=notes,
    )


def attention(
    prefix: str,
    d: Dims,
    *,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    qkv_bias: bool = False,
    o_bias: bool = False,
    qk_norm: str | None = None,
    q_gate: bool = False,
    names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj"),
) -> tuple[Tensor, ...]:
    """Standard multi-/grouped-query attention projections.

    ``qk_norm`` is ``"head"`` (a norm over one head, Qwen3/Gemma3) or
    ``"full"`` (over all heads, OLMo2). ``q_gate`` doubles the query
    projection for an output gate (Qwen3-Next, Qwen3.5).
    """
    kv = kv_heads or d.kv_heads
    hd = head_dim or d.head_dim
    q, k, v, o = names
    out: list[Tensor] = []
    out += linear(
        f"{prefix}.{q}", d.heads * hd * (2 if q_gate else 1), d.hidden, role="attention", split="column", bias=qkv_bias
    )
    out += linear(f"{prefix}.{k}", kv * hd, d.hidden, role="attention", split="kv", bias=qkv_bias, heads=kv)
    out += linear(f"{prefix}.{v}", kv * hd, d.hidden, role="attention", split="kv", bias=qkv_bias, heads=kv)
    out += linear(f"{prefix}.{o}", d.hidden, d.heads * hd, role="attention", split="row", bias=o_bias)
    if qk_norm == "head":
        out += [vector(f"{prefix}.q_norm", hd), vector(f"{prefix}.k_norm", hd)]
    elif qk_norm == "full":
        out += [vector(f"{prefix}.q_norm", d.heads * hd), vector(f"{prefix}.k_norm", kv * hd)]
    return tuple(out)


def gated_mlp(
    prefix: str,
    hidden: int,
    intermediate: int,
    *,
    role: Role = "mlp",
    bias: bool = False,
    count: int = 1,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
) -> tuple[Tensor, ...]:
    """A SwiGLU/GeGLU MLP: gate and up (``hidden → intermediate``), down back."""
    split_in: Split = "expert_column" if role == "expert" else "column"
    split_out: Split = "expert_row" if role == "expert" else "row"
    gate, up, down = names
    return (
        linear(f"{prefix}.{gate}", intermediate, hidden, role=role, split=split_in, bias=bias, count=count)
        + linear(f"{prefix}.{up}", intermediate, hidden, role=role, split=split_in, bias=bias, count=count)
        + linear(f"{prefix}.{down}", hidden, intermediate, role=role, split=split_out, bias=bias, count=count)
    )


def plain_mlp(
    prefix: str,
    hidden: int,
    intermediate: int,
    *,
    bias: bool = False,
    role: Role = "mlp",
    names: tuple[str, str] = ("up_proj", "down_proj"),
) -> tuple[Tensor, ...]:
    """A two-matrix MLP (GELU, ReLU²): up to ``intermediate`` and back."""
    up, down = names
    return linear(f"{prefix}.{up}", intermediate, hidden, role=role, split="column", bias=bias) + linear(
        f"{prefix}.{down}", hidden, intermediate, role=role, split="row", bias=bias
    )


def router(
    prefix: str, hidden: int, experts: int, *, bias: bool = False, score_bias: bool = False
) -> tuple[Tensor, ...]:
    """An MoE gate (replicated on every card) and its optional score-correction bias."""
    out = [Tensor(module=prefix, rows=experts, cols=hidden, role="router")]
    if bias:
        out.append(Tensor(module=prefix, param="bias", rows=experts, role="router"))
    if score_bias:
        out.append(Tensor(module=prefix, param="e_score_correction_bias", rows=experts, role="router"))
    return tuple(out)


def token_embeddings(d: Dims, module: str = "model.embed_tokens") -> tuple[Tensor, ...]:
    """The token embedding table."""
    return (embedding(module, d.vocab, d.hidden),)


def final_head(
    d: Dims,
    *,
    norm_module: str = "model.norm",
    head_module: str = "lm_head",
    norm_bias: bool = False,
    head_bias: bool = False,
) -> tuple[Tensor, ...]:
    """The final norm, and the LM head unless it is tied to the embeddings."""
    out = list(norm(norm_module, d.hidden, bias=norm_bias))
    if not d.tied:
        out.append(embedding(head_module, d.vocab, d.hidden, role="lm_head"))
        if head_bias:
            out.append(vector(head_module, d.vocab, role="lm_head", param="bias", split="vocab"))
    return tuple(out)


def full_attention_cache(d: Dims, *, kv_heads: int | None = None, head_dim: int | None = None) -> FullAttention:
    """The usual K+V cache of a global-attention layer."""
    hd = head_dim or d.head_dim
    return FullAttention(kv_heads=kv_heads or d.kv_heads, head_dim=hd, v_head_dim=hd)


def as_mtp(tensors: list[Tensor] | tuple[Tensor, ...], rename: tuple[str, str] | None = None) -> tuple[Tensor, ...]:
    """Multi-token-prediction tensors: counted and stored, not served (role ``mtp``). Their projections stay
    ``linear``, so the checkpoint's quantisation sizes them as it sizes the decoder's (DeepSeek-V3 stores its MTP
    layer in fp8, an msModelSlim Qwen3.5 in int8, an AutoRound AWQ names ``mtp`` to keep it in fp16); the router
    never is. ``rename`` (old, new) rewrites a module prefix to the name the checkpoint stores."""
    return tuple(
        Tensor(
            module=t.module.replace(*rename, 1) if rename else t.module,
            param=t.param,
            rows=t.rows,
            cols=t.cols,
            count=t.count,
            role="mtp",
            split=t.split,
            linear=t.linear and t.role != "router",
            heads=t.heads,
        )
        for t in tensors
    )
