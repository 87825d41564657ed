"""llama.cpp's hyper-parameters of a GGUF model, read the way ``llama_model::load_hparams`` reads them.

One pure function, :func:`read_hparams`, turns a parsed :class:`GGUFHeader`
into a :class:`GGUFHParams`: the sizes both :mod:`explorer.gguf.shape` (a
ModelShape) and :mod:`explorer.engines.llamacpp.model` (llama.cpp's allocations)
are built from. Per-layer facts are resolved here, per architecture, as
llama.cpp decides them (src/llama-model.cpp, src/models/<arch>.cpp,
src/llama-hparams.cpp, commit 0c1e57098):

- ``attention.head_count_kv`` (and ``head_count``, ``feed_forward_length``)
  may be one number or one per layer; 0 KV heads means no attention there.
- Sliding-window layers: ``llama_hparams::set_swa_pattern(n)`` marks layer
  ``il`` SWA when ``n == 0 or il % n < n - 1``; gemma2 uses n = 2, gemma3 6
  (or ``attention.sliding_window_pattern``, a number or a per-layer bool
  array), cohere2 4, gpt-oss 2, llama4 4 (chunked, window 8192).
  Phi-3's window is read but disabled by llama.cpp ("Phi SWA is currently
  disabled"); llama/mistral never read one.
- Recurrent layers: mamba/mamba2/rwkv* are all recurrent; jamba,
  granitehybrid, lfm2 and nemotron_h are recurrent where ``n_head_kv`` is 0
  (nemotron_h: and ``n_ff`` is 0 too, else an MLP-only block); qwen3next and
  kimi-linear keep full attention every ``full_attention_interval`` (4)
  layers; falcon-h1 has both in every layer.
- Recurrent state rows (``llama_hparams::n_embd_r / n_embd_s``, f32):
  Mamba ``(d_conv - 1)(d_inner + 2 n_group d_state)`` and ``d_state d_inner``;
  RWKV ``token_shift_count n_embd`` and ``n_embd wkv_head_size``; LFM2
  ``n_embd (l_cache - 1)`` and 0.
- MLA (``is_mla``): ``attention.key_length_mla`` and ``value_length_mla``
  present; the cache then holds K rows of ``kv_lora_rank + n_rot`` only.
- Gemma 4 (src/models/gemma4.cpp): sliding layers have heads of
  ``attention.key_length_swa`` / ``value_length_swa``, full layers of
  ``key_length`` / ``value_length`` (``llama_hparams::n_embd_head_k(il)``); the
  last ``attention.shared_kv_layers`` layers reuse an earlier layer's cache
  (``n_layer_kv_from_start``) and get none of their own.

An architecture llama.cpp's table here does not know still gets values
(the generic keys), with ``approximate`` set and the reason in ``notes``.

Every number is checked as it is read, before anything is built from it: a
count past its plausible maximum (:func:`explorer.limits.check_count`: 1,024
layers, 2^23 tokens of vocabulary…) or below 0 is a GGUFLimitError naming the
key, the value and the cap; a NaN or infinite float a GGUFValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import GGUFLimitError, GGUFShapeError, GGUFValueError
from explorer.gguf.header import GGUFHeader
from explorer.limits import check_count, check_finite

#: archs whose every layer is recurrent
RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
#: hybrids whose recurrent layers are those with no KV heads (llama-model.cpp: recurrent_layer_arr)
HYBRID_BY_KV = frozenset({"jamba", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe", "plamo2"})
#: hybrids with full attention every `full_attention_interval` layers
HYBRID_BY_INTERVAL = frozenset({"qwen3next", "qwen35", "qwen35moe", "kimi-linear"})
#: hybrids with attention and a recurrent mixer in every layer
HYBRID_PARALLEL = frozenset({"falcon-h1"})

#: (default pattern, default window, kind) of archs that use SWA (src/models/<arch>.cpp load_arch_hparams);
#: a pattern key in the file overrides the default pattern; window 0: read from attention.sliding_window
SWA_ARCHS: dict[str, tuple[int, int, str]] = {
    "gemma2": (2, 4096, "standard"),
    "gemma3": (6, 0, "standard"),
    "gemma3n": (5, 0, "standard"),
    "gemma-embedding": (6, 0, "standard"),
    "cohere2": (4, 0, "standard"),
    "gpt-oss": (2, 0, "standard"),
    "exaone4": (4, 0, "standard"),
    "olmo2": (4, 0, "standard"),
    "smallthinker": (4, 0, "standard"),
    "llama4": (4, 8192, "chunked"),
    "gemma4": (6, 0, "standard"),
}
#: archs whose sliding-window key llama.cpp reads and then ignores
SWA_DISABLED = frozenset({"phi3"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GGUFHParams:
    """What llama.cpp reads from a GGUF's key/values, per layer where it varies.

    Attributes:
        arch: ``general.architecture``.
        n_layer: repeating blocks (``block_count``).
        n_embd: model width.
        n_vocab: vocabulary size (tokenizer tokens, ``vocab_size`` or token_embd rows).
        n_ctx_train: trained context (``context_length``), tokens.
        n_head: query heads per layer.
        n_head_kv: KV heads per layer (0: no attention cache in that layer).
        n_ff: dense FFN width per layer (0: none, or MoE only).
        n_embd_head_k: K head width (``key_length``; MLA: kv_lora_rank + n_rot); a full layer's when sliding
            layers have their own.
        n_embd_head_v: V head width (``value_length``; MLA: kv_lora_rank).
        n_embd_head_k_swa: a sliding layer's K head width (``key_length_swa``; 0: ``n_embd_head_k``).
        n_embd_head_v_swa: a sliding layer's V head width (``value_length_swa``; 0: ``n_embd_head_v``).
        n_layer_kv_from_start: layers from this one on reuse an earlier layer's cache (``shared_kv_layers``).
        n_rot: rotary dims (``rope.dimension_count``).
        swa_layers: per layer, whether it is sliding-window.
        n_swa: the window, tokens (0: no SWA).
        swa_type: ``none``, ``standard`` or ``chunked``.
        recurrent_layers: per layer, whether it keeps a recurrent state.
        n_embd_r: recurrent conv/shift state values per sequence per layer (f32).
        n_embd_s: recurrent ssm/wkv state values per sequence per layer (f32).
        n_expert: routed experts (0: dense).
        n_expert_used: experts per token.
        n_expert_shared: shared experts.
        n_ff_exp: a routed expert's width.
        n_ff_shexp: the shared experts' width, all of them together.
        n_layer_dense_lead: leading dense blocks of an MoE.
        n_nextn: trailing NextN/MTP blocks (``nextn_predict_layers``): loaded, but given no cache.
        is_mla: whether the cache is MLA's latent (K only).
        kv_lora_rank: MLA latent width.
        q_lora_rank: MLA query compression (0: none).
        n_embd_head_k_mla: MLA per-head query/key width (nope + rope).
        n_embd_head_v_mla: MLA per-head value width.
        ssm_d_conv: Mamba conv kernel.
        ssm_d_inner: Mamba inner width.
        ssm_d_state: Mamba state size.
        ssm_dt_rank: Mamba time-step rank (Mamba-2: heads).
        ssm_n_group: Mamba-2 groups.
        rope_scaling: ``"yarn ×4"``-style description, "" if none.
        approximate: whether any value is a guess.
        notes: what was guessed, and why.
    """

    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    n_ff: tuple[int, ...]
    n_embd_head_k: int
    n_embd_head_v: int
    n_rot: int
    swa_layers: tuple[bool, ...]
    n_swa: int
    swa_type: str
    recurrent_layers: tuple[bool, ...]
    n_embd_r: int
    n_embd_s: int
    n_expert: int = 0
    n_expert_used: int = 0
    n_expert_shared: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    n_layer_dense_lead: int = 0
    n_nextn: int = 0
    is_mla: bool = False
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    n_embd_head_k_mla: int = 0
    n_embd_head_v_mla: int = 0
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    ssm_n_group: int = 0
    rope_scaling: str = ""
    approximate: bool = False
    notes: tuple[str, ...] = ()
    n_embd_head_k_swa: int = 0
    n_embd_head_v_swa: int = 0
    n_layer_kv_from_start: int = -1

    def has_kv(self, il: int) -> bool:
        """Whether layer ``il`` has an attention cache (KV heads, not purely recurrent, not NextN, not KV-shared)."""
        if il >= self.n_layer - self.n_nextn or 0 <= self.n_layer_kv_from_start <= il:
            return False
        return self.n_head_kv[il] > 0 and (not self.recurrent_layers[il] or self.arch in HYBRID_PARALLEL)

    def head_k(self, il: int) -> int:
        """Layer ``il``'s K head width (``llama_hparams::n_embd_head_k(il)``)."""
        return self.n_embd_head_k_swa if self.swa_layers[il] and self.n_embd_head_k_swa else self.n_embd_head_k

    def head_v(self, il: int) -> int:
        """Layer ``il``'s V head width (``llama_hparams::n_embd_head_v(il)``)."""
        return self.n_embd_head_v_swa if self.swa_layers[il] and self.n_embd_head_v_swa else self.n_embd_head_v


def _checked(header: GGUFHeader, key: str, value: int | float) -> int:
    """A number read from the file as a count: finite, ≥ 0 and at most its key's plausible maximum."""
    where, full = header.name or "GGUF", f"{header.architecture}.{key}"
    check_finite(value, full, where=where, error=GGUFValueError)
    return check_count(int(value), full, where=where, error=GGUFLimitError)


def _int(header: GGUFHeader, key: str, default: int | None = None) -> int | None:
    value = header.arch_get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return _checked(header, key, value)


def _per_layer(header: GGUFHeader, key: str, n_layer: int, default: int) -> tuple[int, ...]:
    """A key that is one number or one per layer (llama.cpp ``get_key_or_arr``)."""
    value = header.arch_get(key)
    if isinstance(value, tuple) and value and all(isinstance(v, (int, float)) for v in value):
        if len(value) != n_layer:
            raise GGUFShapeError(
                f"{header.name or 'GGUF'}: {header.architecture}.{key} has {len(value)} entries for {n_layer} layers",
                hint="the file's per-layer array does not match block_count; re-convert it",
            )
        return tuple(_checked(header, key, v) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (_checked(header, key, value),) * n_layer
    return (default,) * n_layer


def _vocab(header: GGUFHeader) -> int:
    tokens = header.array_count("tokenizer.ggml.tokens")
    if tokens:
        return _checked(header, "vocab_size", tokens)
    size = _int(header, "vocab_size")
    if size:
        return size
    embd = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    return _checked(header, "vocab_size", embd.shape[1]) if embd is not None and len(embd.shape) > 1 else 0


def _swa(header: GGUFHeader, arch: str, n_layer: int, notes: list[str]) -> tuple[tuple[bool, ...], int, str]:
    window = _int(header, "attention.sliding_window", 0) or 0
    pattern_value = header.arch_get("attention.sliding_window_pattern")
    if arch in SWA_DISABLED:
        if window:
            notes.append(f"{arch}: llama.cpp disables its sliding window ({window}); every layer is global")
        return (False,) * n_layer, 0, "none"
    if arch not in SWA_ARCHS:
        if window:
            notes.append(f"{arch}: sliding_window {window} is not read by llama.cpp for this architecture; global")
        return (False,) * n_layer, 0, "none"
    pattern, default_window, kind = SWA_ARCHS[arch]
    if kind == "chunked":  # llama4: a window key of 0 turns chunking off; otherwise it is always 8192
        if header.arch_get("attention.sliding_window") == 0:
            return (False,) * n_layer, 0, "none"
        window = default_window
    window = window or default_window
    if not window:
        return (False,) * n_layer, 0, "none"
    if isinstance(pattern_value, tuple) and pattern_value and all(isinstance(v, bool) for v in pattern_value):
        flags = tuple(bool(v) for v in pattern_value[:n_layer]) + (False,) * max(0, n_layer - len(pattern_value))
        return flags, window, kind
    if isinstance(pattern_value, int) and not isinstance(pattern_value, bool):
        pattern = _checked(header, "attention.sliding_window_pattern", pattern_value)
    # llama_hparams::set_swa_pattern: il % n < n - 1 (n == 0: every layer)
    return tuple(pattern == 0 or il % pattern < pattern - 1 for il in range(n_layer)), window, kind


def _recurrent(header: GGUFHeader, arch: str, n_head_kv: tuple[int, ...], n_ff: tuple[int, ...]) -> tuple[bool, ...]:
    n = len(n_head_kv)
    if arch in RECURRENT_ARCHS or arch in HYBRID_PARALLEL:
        return (True,) * n
    if arch in ("nemotron_h", "nemotron_h_moe"):
        return tuple(kv == 0 and ff == 0 for kv, ff in zip(n_head_kv, n_ff, strict=True))
    if arch in HYBRID_BY_KV:
        return tuple(kv == 0 for kv in n_head_kv)
    if arch in HYBRID_BY_INTERVAL:
        interval = _int(header, "full_attention_interval", 4) or 4
        return tuple((il + 1) % interval != 0 for il in range(n))
    if _int(header, "ssm.inner_size") and any(kv == 0 for kv in n_head_kv):
        return tuple(kv == 0 for kv in n_head_kv)  # an unknown hybrid: best effort
    return (False,) * n


def _rope_scaling(header: GGUFHeader) -> str:
    kind = header.arch_get("rope.scaling.type")
    factor = header.arch_get("rope.scaling.factor")
    if not isinstance(kind, str) or kind in ("", "none"):
        return ""
    if isinstance(factor, float):
        check_finite(
            factor, f"{header.architecture}.rope.scaling.factor", where=header.name or "GGUF", error=GGUFValueError
        )
    return f"{kind} ×{factor:g}" if isinstance(factor, (int, float)) and factor else kind


def read_hparams(header: GGUFHeader) -> GGUFHParams:
    """llama.cpp's hyper-parameters of a GGUF header.

    Raises:
        GGUFShapeError: no ``general.architecture``, no layers or no width,
            or a per-layer array whose length is not ``block_count``.
    """
    where = header.name or "GGUF"
    arch = header.architecture
    if not arch:
        raise GGUFShapeError(f"{where}: no general.architecture key", hint="this is not a llama.cpp model file")
    notes: list[str] = []
    blocks = [t.block for t in header.tensors if t.block is not None]
    n_layer = _int(header, "block_count") or (_checked(header, "block_count", max(blocks) + 1) if blocks else 0)
    embd = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    n_embd = _int(header, "embedding_length") or (
        _checked(header, "embedding_length", embd.shape[0]) if embd is not None else 0
    )
    if n_layer <= 0 or n_embd <= 0:
        raise GGUFShapeError(
            f"{where}: {arch}.block_count ({n_layer}) or {arch}.embedding_length ({n_embd}) is missing or zero",
            hint="a model file needs both; a vocab-only or adapter GGUF has no model shape",
        )
    n_head = _per_layer(header, "attention.head_count", n_layer, 0)
    n_head_kv = _per_layer(header, "attention.head_count_kv", n_layer, -1)
    n_head_kv = tuple(h if kv < 0 else kv for h, kv in zip(n_head, n_head_kv, strict=True))
    n_ff = _per_layer(header, "feed_forward_length", n_layer, 0)
    head0 = max(n_head) if any(n_head) else 0
    n_embd_head_k = _int(header, "attention.key_length") or (n_embd // head0 if head0 else 0)
    n_embd_head_v = _int(header, "attention.value_length") or n_embd_head_k
    swa_layers, n_swa, swa_type = _swa(header, arch, n_layer, notes)
    recurrent = _recurrent(header, arch, n_head_kv, n_ff)
    d_conv = _int(header, "ssm.conv_kernel", 0) or 0
    d_inner = _int(header, "ssm.inner_size", 0) or 0
    d_state = _int(header, "ssm.state_size", 0) or 0
    n_group = _int(header, "ssm.group_count", 0) or 0
    wkv = _int(header, "wkv.head_size", 0) or 0
    l_cache = _int(header, "shortconv.l_cache", 0) or 0
    if wkv:
        n_embd_r, n_embd_s = (_int(header, "token_shift_count", 2) or 2) * n_embd, n_embd * wkv
    elif l_cache:
        n_embd_r, n_embd_s = n_embd * (l_cache - 1), 0
    else:
        n_embd_r = (d_conv - 1 if d_conv > 0 else 0) * (d_inner + 2 * n_group * d_state)
        n_embd_s = d_state * d_inner
    k_mla = _int(header, "attention.key_length_mla", 0) or 0
    v_mla = _int(header, "attention.value_length_mla", 0) or 0
    approximate = False
    known = (
        arch in RECURRENT_ARCHS | HYBRID_BY_KV | HYBRID_BY_INTERVAL | HYBRID_PARALLEL
        or arch in SWA_ARCHS
        or arch in _PLAIN
    )
    if not known:
        approximate = True
        notes.append(f"architecture {arch!r} is not in explorer's llama.cpp table: read from the generic keys")
    if any(recurrent) and not (n_embd_r or n_embd_s):
        approximate = True
        notes.append(f"{arch}: recurrent layers without ssm/wkv sizes; their state is counted as 0")
    n_expert_shared = _int(header, "expert_shared_count", 0) or 0
    n_ff_exp = _int(header, "expert_feed_forward_length", 0) or 0
    shexp = next((t for t in header.tensors if t.name.endswith("ffn_up_shexp.weight")), None)
    n_ff_shexp = (
        shexp.shape[1]
        if shexp is not None and len(shexp.shape) > 1
        else (_int(header, "expert_shared_feed_forward_length", 0) or n_ff_exp * n_expert_shared)
    )
    return GGUFHParams(
        arch=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_vocab=_vocab(header),
        n_ctx_train=_int(header, "context_length", 0) or 0,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        n_embd_head_k=n_embd_head_k,
        n_embd_head_v=n_embd_head_v,
        n_rot=_int(header, "rope.dimension_count", 0) or n_embd_head_k,
        swa_layers=swa_layers,
        n_swa=n_swa,
        swa_type=swa_type,
        recurrent_layers=recurrent,
        n_embd_r=n_embd_r,
        n_embd_s=n_embd_s,
        n_expert=_int(header, "expert_count", 0) or 0,
        n_expert_used=_int(header, "expert_used_count", 0) or 0,
        n_expert_shared=n_expert_shared,
        n_ff_exp=n_ff_exp,
        n_ff_shexp=n_ff_shexp,
        n_layer_dense_lead=_int(header, "leading_dense_block_count", 0) or 0,
        n_nextn=min(_int(header, "nextn_predict_layers", 0) or 0, n_layer),
        is_mla=bool(k_mla and v_mla),
        kv_lora_rank=_int(header, "attention.kv_lora_rank", 0) or 0,
        q_lora_rank=_int(header, "attention.q_lora_rank", 0) or 0,
        n_embd_head_k_mla=k_mla,
        n_embd_head_v_mla=v_mla,
        ssm_d_conv=d_conv,
        ssm_d_inner=d_inner,
        ssm_d_state=d_state,
        ssm_dt_rank=_int(header, "ssm.time_step_rank", 0) or 0,
        ssm_n_group=n_group,
        rope_scaling=_rope_scaling(header),
        approximate=approximate,
        notes=tuple(notes),
        n_embd_head_k_swa=_int(header, "attention.key_length_swa", 0) or 0,
        n_embd_head_v_swa=_int(header, "attention.value_length_swa", 0) or 0,
        n_layer_kv_from_start=n_layer - shared if (shared := _int(header, "attention.shared_kv_layers", 0)) else -1,
    )


#: plain decoders llama.cpp reads from the generic keys alone (no SWA, no recurrence)
_PLAIN = frozenset(
    {
        "llama",
        "qwen2",
        "qwen2moe",
        "qwen3",
        "qwen3moe",
        "qwen2vl",
        "qwen3vl",
        "qwen3vlmoe",
        "mistral3",
        "phi2",
        "phi3",
        "gemma",
        "granite",
        "granitemoe",
        "deepseek",
        "deepseek2",
        "glm4",
        "glm4moe",
        "command-r",
        "starcoder2",
        "internlm2",
        "olmo",
        "olmoe",
        "stablelm",
        "minicpm",
        "minicpm3",
        "exaone",
        "falcon",
        "gpt2",
        "bloom",
        "mpt",
        "refact",
        "baichuan",
        "orion",
        "chatglm",
        "nemotron",
        "dots1",
        "ernie4_5",
        "ernie4_5-moe",
        "hunyuan-moe",
        "hunyuan-dense",
        "bailingmoe",
        "bailingmoe2",
        "arcee",
        "seed_oss",
        "apertus",
        "grovemoe",
    }
)
