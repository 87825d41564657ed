"""What llama.cpp's allocations depend on: a model as llama.cpp loads it.

A :class:`LlamaModel` holds, per repeating block, llama.cpp's own cache rows
(not vLLM's: MLA keeps K rows of ``kv_lora_rank + n_rot`` and no V; the
recurrent state is f32) and the block's exact weight bytes, plus the bytes
of ``token_embd``, ``output`` and ``output_norm`` and the sizes the compute
buffer grows with. Two constructors:

- :func:`llama_model_from_gguf`: exact, from the header's tensor infos
  (``exact=True``);
- :func:`explorer.engines.llamacpp.whatif.llama_model_from_shape`: a what-if from a :class:`ModelShape` at a
  GGUF quant (``Q4_K_M``), through ``shape.resolve_precision`` and
  :func:`explorer.model.weights.weight_breakdown` (``exact=False``).

Host buffers: each block, the output group and a tied output's copy of
``token_embd`` carry a :class:`~explorer.engines.llamacpp.host_buffers.HostPlacement`,
where their tensors land on the host (CPU, CPU_REPACK, AMX) in each CPU
build (:mod:`explorer.engines.llamacpp.host_buffers`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from explorer.engines.llamacpp.host_buffers import NOWHERE, HostPlacement, place
from explorer.gguf.header import GGUFHeader, TensorInfo
from explorer.gguf.hparams import read_hparams

AttnKind = Literal["full", "swa", "chunked", "mla", "none"]

#: what-if quants whose matmul weights are mostly a repackable type (share of the matrix bytes)
REPACK_SHARE = {"Q4_0": 1.0, "IQ4_NL": 1.0, "MXFP4": 1.0, "MXFP4_MOE": 1.0, "Q4_K_S": 0.95, "Q4_K_M": 0.8}


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaLayer:
    """One repeating block, as llama.cpp allocates it.

    Attributes:
        attn: the attention cache kind: ``full``, ``swa``, ``chunked``, ``mla`` or ``none``.
        n_head: query heads.
        n_head_kv: KV heads (0: no attention cache).
        k_row: K values per cache cell (``n_embd_k_gqa``; MLA: kv_lora_rank + n_rot).
        v_row: V values per cache cell (``n_embd_v_gqa``; 0 for MLA, whose V is a view of K).
        window: sliding-window tokens (0: global).
        r_row: recurrent conv/shift state values per sequence (f32; 0: not recurrent).
        s_row: recurrent ssm/wkv state values per sequence (f32).
        weight_bytes: the block's tensors, bytes.
        host: where its tensors land when the block stays on the host, per CPU build.
        n_ff: dense FFN width (0: none or MoE).
        moe: whether the block routes to experts.
    """

    attn: AttnKind
    n_head: int
    n_head_kv: int
    k_row: int
    v_row: int
    window: int = 0
    r_row: int = 0
    s_row: int = 0
    weight_bytes: int
    host: HostPlacement
    n_ff: int = 0
    moe: bool = False

    @property
    def has_kv(self) -> bool:
        """Whether the block has an attention cache."""
        return self.attn != "none"

    @property
    def recurrent(self) -> bool:
        """Whether the block keeps a recurrent state."""
        return bool(self.r_row or self.s_row)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class LlamaModel:
    """A model as llama.cpp loads it.

    Attributes:
        name: where it came from.
        arch: ``general.architecture``.
        exact: True when built from a GGUF's tensors; False for a what-if from a shape.
        n_embd: model width.
        n_vocab: vocabulary size.
        n_head: query heads (the most any layer has).
        n_embd_head_k: query/key head width used by the compute graph (MLA: nope + rope).
        n_ctx_train: trained context, tokens.
        layers: the repeating blocks in order.
        token_embd_bytes: the input embeddings (always on the host), bytes.
        output_bytes: the output matrix (0 when tied to ``token_embd``), bytes.
        output_norm_bytes: the final norm and any other non-block tensors, bytes.
        tied_output: whether the output reuses ``token_embd`` (llama.cpp duplicates it per buffer type).
        token_embd_span: ``token_embd``'s byte range in the data section (always in the CPU buffer).
        output_host: where the output group (output and the other non-block tensors) lands on the host.
        tied_copy: where a tied output's copy of ``token_embd`` lands on the host (nothing when it stays in
            CPU: then it is the same tensor).
        n_expert: routed experts (0: dense).
        n_expert_used: experts per token.
        n_ff_exp: a routed expert's width.
        n_ff_shexp: shared experts' total width.
        kv_lora_rank: MLA latent width (0: not MLA).
        q_lora_rank: MLA query compression (0: none).
        n_rot: rotary dims.
        n_embd_head_v_mla: MLA per-head value width.
        ssm_d_inner: Mamba inner width (0: none).
        ssm_d_state: Mamba state size.
        ssm_d_conv: Mamba conv kernel.
        ssm_n_group: Mamba-2 groups.
        ssm_dt_rank: Mamba time-step rank / heads.
        n_tensors: tensors in the file (sizes the graph: ``max(1024, 8 n_tensors)`` nodes).
        notes: what is estimated, and why.
    """

    name: str
    arch: str
    exact: bool
    n_embd: int
    n_vocab: int
    n_head: int
    n_embd_head_k: int
    n_ctx_train: int
    layers: tuple[LlamaLayer, ...]
    token_embd_bytes: int
    output_bytes: int
    output_norm_bytes: int = 0
    tied_output: bool = False
    token_embd_span: tuple[int, int] = (0, 0)
    output_host: HostPlacement
    tied_copy: HostPlacement = NOWHERE
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    n_rot: int = 0
    n_embd_head_v_mla: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_d_conv: int = 0
    ssm_n_group: int = 0
    ssm_dt_rank: int = 0
    n_tensors: int = 0
    notes: tuple[str, ...] = ()
    _mla: bool = field(default=False, init=False, repr=False, compare=False)
    _head_dims: tuple[int, int] = field(default=(0, 0), init=False, repr=False, compare=False)
    _kinds: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # asked on every allocation: computed once here rather than walking the layers each time
        object.__setattr__(self, "_mla", any(layer.attn == "mla" for layer in self.layers))
        attn = [la for la in self.layers if la.n_head_kv]
        object.__setattr__(
            self,
            "_head_dims",
            (
                max((la.k_row // la.n_head_kv for la in attn), default=0),
                max((la.v_row // la.n_head_kv for la in attn), default=0),
            ),
        )

    @property
    def attention_head_dims(self) -> tuple[int, int]:
        """(K, V) values per KV head, the widest over the attention layers (0, 0 without attention)."""
        return self._head_dims

    def layer_kinds(self, layers: tuple[int, ...]) -> tuple[int, ...]:
        """One representative index per distinct kind of layer among ``layers`` (remembered per set)."""
        if layers not in self._kinds:
            if len(self._kinds) > 4096:
                self._kinds.clear()
            reps: dict[tuple, int] = {}
            for il in layers:
                la = self.layers[il]
                reps.setdefault((la.attn, la.n_head, la.k_row, la.v_row, la.s_row, la.n_ff, la.moe, la.window), il)
            self._kinds[layers] = tuple(reps.values())
        return self._kinds[layers]

    @property
    def n_layer(self) -> int:
        """Repeating blocks."""
        return len(self.layers)

    @property
    def is_mla(self) -> bool:
        """Whether the attention cache is MLA's latent."""
        return self._mla

    @property
    def weight_bytes(self) -> int:
        """Every tensor once (``llama_model_size``): a tied output is not counted twice."""
        return (
            self.token_embd_bytes
            + sum(la.weight_bytes for la in self.layers)
            + self.output_bytes
            + self.output_norm_bytes
        )


def _dense_ffn(infos: list[TensorInfo]) -> int:
    """A block's dense FFN width: the rows of its ``ffn_up`` (or ``ffn_gate``) matrix, 0 without one."""
    for t in infos:
        if t.name.endswith(("ffn_up.weight", "ffn_gate.weight")) and len(t.shape) > 1:
            return t.shape[1]
    return 0


def _span(infos: list[TensorInfo]) -> tuple[int, int]:
    return (min(t.offset for t in infos), max(t.offset + t.n_bytes for t in infos)) if infos else (0, 0)


def llama_model_from_gguf(header: GGUFHeader) -> LlamaModel:
    """The exact :class:`LlamaModel` of a parsed GGUF header.

    Raises:
        GGUFShapeError: the header lacks an architecture, layers or width.
    """
    hp = read_hparams(header)
    blocks: list[list[TensorInfo]] = [[] for _ in range(hp.n_layer)]
    embd: list[TensorInfo] = []
    out: list[TensorInfo] = []
    rest: list[TensorInfo] = []
    for t in header.tensors:
        b = t.block
        if b is not None:
            blocks[min(b, hp.n_layer - 1)].append(t)
        elif t.name.startswith(("token_embd.", "pos_embd.", "token_types.")):
            embd.append(t)
        elif t.name.startswith("output."):
            out.append(t)
        else:
            rest.append(t)
    layers = []
    for il in range(hp.n_layer):
        kv = hp.n_head_kv[il] if hp.has_kv(il) else 0
        attn: AttnKind = "none"
        k_row = v_row = 0
        if kv:
            attn = (
                "mla"
                if hp.is_mla
                else ("chunked" if hp.swa_type == "chunked" else "swa")
                if hp.swa_layers[il]
                else "full"
            )
            k_row = hp.head_k(il) * kv
            v_row = 0 if hp.is_mla else hp.head_v(il) * kv
        rec = hp.recurrent_layers[il]
        moe = any("_exps" in t.name for t in blocks[il])
        layers.append(
            LlamaLayer(
                attn=attn,
                n_head=hp.n_head[il],
                n_head_kv=kv,
                k_row=k_row,
                v_row=v_row,
                window=hp.n_swa if attn in ("swa", "chunked") else 0,
                r_row=hp.n_embd_r if rec else 0,
                s_row=hp.n_embd_s if rec else 0,
                weight_bytes=sum(t.n_bytes for t in blocks[il]),
                host=place(blocks[il]),
                n_ff=_dense_ffn(blocks[il]),
                moe=moe,
            )
        )
    token_embd = next((t for t in embd if t.name == "token_embd.weight"), None)
    return LlamaModel(
        name=header.name,
        arch=hp.arch,
        exact=True,
        n_embd=hp.n_embd,
        n_vocab=hp.n_vocab,
        n_head=max(hp.n_head),
        n_embd_head_k=hp.n_embd_head_k_mla if hp.is_mla else hp.n_embd_head_k,
        n_ctx_train=hp.n_ctx_train,
        layers=tuple(layers),
        token_embd_bytes=sum(t.n_bytes for t in embd),
        output_bytes=sum(t.n_bytes for t in out),
        output_norm_bytes=sum(t.n_bytes for t in rest),
        tied_output=not out,
        token_embd_span=_span(embd),
        output_host=place(out + rest),
        tied_copy=place([token_embd], tied_copy=True) if token_embd is not None and not out else NOWHERE,
        n_expert=hp.n_expert,
        n_expert_used=hp.n_expert_used,
        n_ff_exp=hp.n_ff_exp,
        n_ff_shexp=hp.n_ff_shexp,
        kv_lora_rank=hp.kv_lora_rank if hp.is_mla else 0,
        q_lora_rank=hp.q_lora_rank,
        n_rot=hp.n_rot,
        n_embd_head_v_mla=hp.n_embd_head_v_mla,
        ssm_d_inner=hp.ssm_d_inner,
        ssm_d_state=hp.ssm_d_state,
        ssm_d_conv=hp.ssm_d_conv,
        ssm_n_group=hp.ssm_n_group,
        ssm_dt_rank=hp.ssm_dt_rank,
        n_tensors=len(header.tensors),
        notes=hp.notes,
    )
