"""What the engines share: the request, the layouts they consider, per-card memory.

A :class:`Layout` is one way to lay a replica over cards: which class, how
many nodes and cards per node, and the tensor / pipeline / data / expert
parallel sizes. An engine turns a layout into :class:`CardMemory` records,
one per distinct card role (a pipeline stage's card, the host...), each
saying part by part what that card holds, in integer bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from explorer.engines.calibration import Calibration
from explorer.engines.fit_search import largest_fitting
from explorer.engines.setting import declared_settings, setting
from explorer.errors import ImplausibleFigureError
from explorer.hardware.cluster import MAX_GPUS
from explorer.limits import (
    MAX_CONCURRENCY,
    MAX_CONTEXT_TOKENS,
    MAX_HICACHE_RATIO,
    MAX_HOST_GIB,
    MAX_NGL,
    MAX_SPLIT_SHARE,
    MIN_SHARE,
    check_figures,
)
from explorer.model.artifacts import Artifact
from explorer.model.checkpoints import placeholder_ref
from explorer.model.dtypes import KV_CACHE_TYPES, ElementType
from explorer.model.kv_cache import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLAAttention,
    RecurrentState,
    SlidingWindowAttention,
)
from explorer.units import cdiv

EngineName = Literal["vllm", "sglang", "llamacpp"]
#: every engine's name, in the order plans list them (the engines themselves: :mod:`explorer.engines.registry`)
ENGINES: tuple[EngineName, ...] = ("vllm", "sglang", "llamacpp")
#: how each engine's name is written for people
ENGINE_LABELS: dict[EngineName, str] = {"vllm": "vLLM", "sglang": "SGLang", "llamacpp": "llama.cpp"}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    """What the user asks for.

    Attributes:
        context_tokens: the context each sequence must hold (vLLM ``--max-model-len``,
            SGLang ``--context-length``, llama.cpp ``--ctx-size`` per sequence).
        concurrency: sequences that must fit at that context at once.
        kv_dtype: KV cache type (``auto`` = the model's dtype; ``fp8``; llama.cpp ``q8_0``…).
        precision: a what-if weight precision or GGUF quant (None: what the artifact is).
        engines: the engines to consider.
        gpu_memory_utilization: vLLM's share of each card (0.9 by default).
        max_num_batched_tokens: vLLM's prefill chunk (None: vLLM's default for the card).
        max_num_seqs: vLLM's running-sequence cap (None: vLLM's default for the card).
        mem_fraction_static: SGLang's static share (None: SGLang's default for the card).
        chunked_prefill_size: SGLang's prefill chunk (None: its default for the card).
        cuda_graph_max_bs: SGLang's largest CUDA-graph batch (None: its default).
        dp_attention: SGLang ``--enable-dp-attention`` (data-parallel attention).
        speculative: a speculative-decoding algorithm name for SGLang (EAGLE, NGRAM, STANDALONE), or None.
        enable_mixed_chunk: SGLang ``--enable-mixed-chunk``.
        enforce_eager: no CUDA graphs (vLLM ``--enforce-eager``, SGLang ``--disable-cuda-graph``).
        flash_attn: llama.cpp ``-fa`` (``on``/``off``/``auto``).
        n_gpu_layers: llama.cpp ``-ngl`` (None: as many as fit; -1 or past the layers: all of them).
        tensor_split: llama.cpp ``--tensor-split`` fractions (None: proportional to free memory).
        batch_tokens: llama.cpp ``-b``.
        ubatch_tokens: llama.cpp ``-ub``.
        mmap: llama.cpp memory-maps the file (``--no-mmap`` turns it off).
        cpu_offload: layers may stay in host RAM (llama.cpp partial offload, RPC partial offload,
            CPU only); False (``--no-cpu-offload``) keeps every layer on the accelerators.
        host_fraction: share of a node's RAM one replica may be planned to use.
        tensor_parallel_size: the user's tp (vLLM ``--tensor-parallel-size``, SGLang ``--tp-size``);
            None: every split the engine runs is tried.
        pipeline_parallel_size: the user's pp (``--pipeline-parallel-size``, ``--pp-size``); None: any.
        data_parallel_size: replicas in one launch (vLLM ``--data-parallel-size``, SGLang ``--dp-size``
            without DP attention; with ``dp_attention`` the DP attention size); None: 1.
        expert_parallel_size: SGLang ``--ep-size`` (dividing tp; the experts spread over ep groups, each
            expert split by tp / ep); vLLM's expert-parallel group is every rank (tp × dp), so only that size
            is allowed there. None: the engine's default (SGLang 1, vLLM tp × dp for a mixture of experts).
        all2all_backend: the experts' all-to-all, in vLLM's ``--all2all-backend`` spelling: ``deepep_low_latency``
            or ``deepep_high_throughput`` (SGLang ``--moe-a2a-backend deepep --deepep-mode low_latency`` /
            ``normal``), or ``deepep_auto`` (SGLang's ``auto`` only); each rank holds DeepEP's buffers
            (:mod:`explorer.engines.all2all`). None: the engines' default (NCCL collectives, no buffer).
        language_only: SGLang ``--language-only``: the vision encoder runs elsewhere, so its heads
            need not divide tp.
        piecewise_cuda_graph: SGLang ``--enable-piecewise-cuda-graph``.
        piecewise_cuda_graph_max_tokens: SGLang ``--piecewise-cuda-graph-max-tokens`` (tokens; its
            graphs reserve a quarter of a MiB per token). None: not given.
        swap_space_gib: vLLM ``--swap-space``, GiB of host RAM per GPU, refused above 70 % of a node's
            RAM (None: the release's default, 4 up to vLLM 0.11 and none after).
        hierarchical_cache: SGLang ``--enable-hierarchical-cache``: a host KV pool in pinned RAM.
        hicache_ratio: SGLang ``--hicache-ratio``: the host pool's size over the device pool's (2.0).
        hicache_size_gb: SGLang ``--hicache-size``: GB (10^9) of host pool per rank; overrides the ratio.
        vllm_version: the vLLM release to plan for (``0.19.0``; None: the current one); its accounting
            changed between releases (:mod:`explorer.engines.vllm_release`).
        calibrations: figures measured from the user's own engine logs, by engine and card class
            (:mod:`explorer.engines.calibration`).
    """

    # fmt: off
    context_tokens: int = setting(
        4096, kind="int", low=1, high=MAX_CONTEXT_TOKENS, main=True, cli=("--context",),
        flags={"vllm": "--max-model-len", "sglang": "--context-length", "llamacpp": "-c"},
        help="context tokens per sequence")
    concurrency: int = setting(
        1, kind="int", low=1, high=MAX_CONCURRENCY, main=True, cli=("--concurrency", "--parallel"),
        flags={"llamacpp": "-np"}, help="sequences that must fit at that context at once")
    kv_dtype: str = setting(
        "auto", kind="choice", choices=KV_CACHE_TYPES, main=True, cli=("--kv-dtype",), url="kv",
        flags={"vllm": "--kv-cache-dtype", "sglang": "--kv-cache-dtype", "llamacpp": "-ctk"},
        help="KV cache type (auto: the model's dtype)")
    precision: str | None = setting(
        kind="text", optional=True, main=True, cli=("--quant",), launch="none",
        help="what-if precision (bf16, fp8, int8, int4-awq, int4-gptq, nf4) or a GGUF quant")
    engines: tuple[EngineName, ...] = setting(
        ENGINES, kind="engines", main=True, cli=("--engine",), launch="none", help="engine(s) to consider")
    gpu_memory_utilization: float = setting(
        0.9, kind="float", low=MIN_SHARE, high=1, cli=("--gpu-memory-utilization",),
        flags={"vllm": "--gpu-memory-utilization"}, help="share of each card vLLM may use")
    max_num_seqs: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_CONCURRENCY, cli=("--max-num-seqs",), launch="echo",
        flags={"vllm": "--max-num-seqs"}, help="running sequences at most (default: vLLM's for the card)")
    max_num_batched_tokens: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_CONTEXT_TOKENS, cli=("--max-num-batched-tokens",), launch="echo",
        flags={"vllm": "--max-num-batched-tokens"}, help="tokens a step, the prefill chunk (default: vLLM's)")
    mem_fraction_static: float | None = setting(
        kind="float", optional=True, low=MIN_SHARE, high=1, cli=("--mem-fraction-static",),
        flags={"sglang": "--mem-fraction-static"}, help="static share of each card (default: SGLang's own rule)")
    dp_attention: bool = setting(
        False, kind="bool", cli=("--dp-attention",), url="enable-dp-attention",
        flags={"sglang": "--enable-dp-attention"}, help="data-parallel attention")
    speculative: str | None = setting(
        kind="choice", optional=True, choices=("EAGLE", "EAGLE3", "NGRAM", "STANDALONE"), cli=("--speculative",),
        url="speculative-algorithm", launch="echo", flags={"sglang": "--speculative-algorithm"},
        help="speculative decoding algorithm")
    enable_mixed_chunk: bool = setting(
        False, kind="bool", cli=("--enable-mixed-chunk",), launch="echo", flags={"sglang": "--enable-mixed-chunk"},
        help="mix prefill chunks into decode batches")
    chunked_prefill_size: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_CONTEXT_TOKENS, cli=("--chunked-prefill-size",), launch="echo",
        flags={"sglang": "--chunked-prefill-size"}, help="chunked prefill: tokens a chunk (default: SGLang's)")
    cuda_graph_max_bs: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_CONCURRENCY, cli=("--cuda-graph-max-bs",), launch="echo",
        flags={"sglang": "--cuda-graph-max-bs"}, help="largest CUDA-graph batch (default: SGLang's)")
    enforce_eager: bool = setting(
        False, kind="bool", cli=("--enforce-eager",), launch="echo",
        flags={"vllm": "--enforce-eager", "sglang": "--disable-cuda-graph"},
        help="no CUDA graphs")
    piecewise_cuda_graph: bool = setting(
        False, kind="bool", cli=("--piecewise-cuda-graph",), url="enable-piecewise-cuda-graph", launch="echo",
        flags={"sglang": "--enable-piecewise-cuda-graph"}, help="piecewise CUDA graphs")
    piecewise_cuda_graph_max_tokens: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_CONTEXT_TOKENS, cli=("--piecewise-cuda-graph-max-tokens",),
        launch="echo", implies="piecewise_cuda_graph", flags={"sglang": "--piecewise-cuda-graph-max-tokens"},
        help="the piecewise graphs' largest size, tokens (a quarter MiB a token; turns them on)")
    language_only: bool = setting(
        False, kind="bool", cli=("--language-only",), launch="echo", flags={"sglang": "--language-only"},
        help="the vision encoder runs elsewhere: no vision-head divisibility check")
    hierarchical_cache: bool = setting(
        False, kind="bool", cli=("--hierarchical-cache",), url="enable-hierarchical-cache", launch="echo",
        flags={"sglang": "--enable-hierarchical-cache"}, help="a host KV pool in pinned RAM")
    hicache_ratio: float = setting(
        2.0, kind="float", low=0, low_open=True, high=MAX_HICACHE_RATIO, cli=("--hicache-ratio",),
        implies="hierarchical_cache", flags={"sglang": "--hicache-ratio"},
        help="host KV pool over device KV pool (turns the host pool on)")
    hicache_size_gb: float | None = setting(
        kind="float", optional=True, whole=True, low=0, high=MAX_HOST_GIB, cli=("--hicache-size",),
        implies="hierarchical_cache",
        flags={"sglang": "--hicache-size"}, help="host KV pool a rank, GB (10^9 bytes); overrides the ratio")
    swap_space_gib: float | None = setting(
        kind="float", optional=True, low=0, high=MAX_HOST_GIB, cli=("--swap-space",), flags={"vllm": "--swap-space"},
        help="host RAM a GPU, GiB (default: the release's: 4 up to vLLM 0.11, none after; vLLM 0.18 and later "
        "have no such flag: refused there, use --vllm-version 0.17.1)")
    flash_attn: str = setting(
        "auto", kind="choice", choices=("auto", "on", "off"), cli=("--flash-attn",), flags={"llamacpp": "-fa"},
        help="flash attention")
    n_gpu_layers: int | None = setting(
        kind="int", optional=True, low=-1, high=MAX_NGL, cli=("--ngl",), flags={"llamacpp": "-ngl"},
        help="layers on the GPU (default: as many as fit; -1 or past the layers: all of them)")
    tensor_split: tuple[float, ...] | None = setting(
        kind="floats", optional=True, low=0, high=MAX_SPLIT_SHARE, cli=("--tensor-split",),
        flags={"llamacpp": "--tensor-split"}, help="split over the cards, e.g. 3,1 (default: by free memory)")
    batch_tokens: int = setting(
        2048, kind="int", low=1, high=MAX_CONTEXT_TOKENS, cli=("--batch",),
        flags={"llamacpp": "-b"},
        help="logical batch, tokens")
    ubatch_tokens: int = setting(
        512, kind="int", low=1, high=MAX_CONTEXT_TOKENS, cli=("--ubatch",),
        flags={"llamacpp": "-ub"},
        help="physical batch, tokens")
    mmap: bool = setting(
        True, kind="bool", inverted=True, cli=("--no-mmap",), url="load-mode-none", launch="echo",
        flags={"llamacpp": "--load-mode none"},
        help="load the file instead of mapping it")
    cpu_offload: bool = setting(
        True, kind="bool", inverted=True, cli=("--no-cpu-offload",), launch="none",
        help="keep every layer on the accelerators: no llama.cpp partial offload (one node's or over RPC), no CPU")
    host_fraction: float = setting(
        0.85, kind="float", low=MIN_SHARE, high=1, cli=("--host-fraction",), launch="none",
        help="share of a node's RAM one replica may be planned to use")
    tensor_parallel_size: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_GPUS, cli=("--tp",),
        flags={"vllm": "--tensor-parallel-size", "sglang": "--tp-size"},
        help="tensor-parallel size (default: every split)")
    pipeline_parallel_size: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_GPUS, cli=("--pp",),
        flags={"vllm": "--pipeline-parallel-size", "sglang": "--pp-size"},
        help="pipeline-parallel size (default: every split)")
    data_parallel_size: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_GPUS, cli=("--dp",),
        flags={"vllm": "--data-parallel-size", "sglang": "--dp-size"},
        help="data-parallel ranks in one launch: copies of a dense model, or ranks sharing a mixture of experts' "
             "experts with vLLM's expert parallelism (with --dp-attention: its DP attention size)")
    expert_parallel_size: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_GPUS, cli=("--ep",), flags={"sglang": "--ep-size"},
        help="the MoE layers' expert-parallel size within --tp (default: 1, or tp where the block-FP8 rule needs "
             "it); vLLM's expert parallelism always spans tp × dp")
    all2all_backend: str | None = setting(
        kind="choice", optional=True, choices=("deepep_high_throughput", "deepep_low_latency", "deepep_auto"),
        cli=("--all2all-backend",), flags={"vllm": "--all2all-backend", "sglang": "--moe-a2a-backend"},
        help="the experts' all-to-all: DeepEP's buffers held on each rank (SGLang --moe-a2a-backend deepep "
             "--deepep-mode normal / low_latency / auto, auto SGLang only); default: NCCL collectives, no buffer")
    # fmt: on
    @property
    def world_size(self) -> int | None:
        """tp × pp × dp as the user gave them (a missing one counts 1); None when none was given.

        Under DP attention the dp ranks share the tp group's cards, so dp neither multiplies nor counts as given
        (as gpustack reads ``--enable-dp-attention``).
        """
        dp = None if self.dp_attention else self.data_parallel_size
        given = (self.tensor_parallel_size, self.pipeline_parallel_size, dp)
        if all(v is None for v in given):
            return None
        return (self.tensor_parallel_size or 1) * (self.pipeline_parallel_size or 1) * (dp or 1)

    vllm_version: str | None = setting(
        kind="text", optional=True, cli=("--vllm-version",), launch="none", flags={"vllm": ""},
        help="the vLLM release to plan for, e.g. 0.11.0 (default: the current one)")  # fmt: skip
    calibrations: tuple[Calibration, ...] = ()

    def __post_init__(self) -> None:
        """Every setting a value of its declaration (:mod:`explorer.engines.setting`), or PlanError naming it:
        nothing downstream sees NaN, inf, a negative count or a word the engines do not know."""
        for declared in declared_settings(self):
            declared.check(getattr(self, declared.field))


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One way to lay a replica over cards.

    Attributes:
        engine: which engine.
        gpu_class: the card class name (``cpu`` for a CPU-only replica).
        fabric: the fabric the nodes share (None for one node).
        nodes: nodes used.
        gpus_per_node: cards used on each node (0 on the CPU).
        tp: tensor-parallel size.
        pp: pipeline-parallel size (llama.cpp: devices the layers are split over).
        dp: data-parallel size: plain replicas side by side, SGLang's DP attention ranks within the tp
            cards, or vLLM's expert-parallel dp ranks of tp cards each (see :attr:`expert_dp`).
        ep: expert-parallel size (1: experts split by tp instead).
        cpu: runs on the host's CPU only.
        unified: runs on a unified-memory host (Apple).
        rpc: llama.cpp across nodes through RPC servers.
        rpc_servers: llama.cpp's single-card RPC servers on other nodes, beside the main node's
            ``gpus_per_node`` cards (``nodes`` counts the main node and the nodes they are on).
    """

    engine: EngineName
    gpu_class: str
    fabric: str | None = None
    nodes: int = 1
    gpus_per_node: int = 1
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cpu: bool = False
    unified: bool = False
    rpc: bool = False
    rpc_servers: int = 0

    @property
    def cards(self) -> int:
        """Cards the replica takes (0 on the CPU)."""
        if self.rpc_servers:
            return self.gpus_per_node + self.rpc_servers
        return self.nodes * self.gpus_per_node

    @property
    def label(self) -> str:
        """A few words on where it runs: ``2 nodes × 8 h100-80g on ib0``."""
        if self.cpu:
            return "CPU"
        if self.rpc_servers:
            return f"{self.gpus_per_node} × {self.gpu_class} + {self.rpc_servers} over RPC on {self.fabric}"
        if self.nodes > 1:
            return f"{self.nodes} nodes × {self.gpus_per_node} {self.gpu_class} on {self.fabric}"
        return f"{self.gpus_per_node} × {self.gpu_class}"

    @property
    def expert_dp(self) -> bool:
        """Whether dp ranks of tp cards each share experts spread over all tp × dp ranks (vLLM
        ``--data-parallel-size`` with ``--enable-expert-parallel``): attention and dense weights per rank."""
        return self.dp > 1 and self.ep == self.tp * self.dp

    @property
    def attention_dp(self) -> bool:
        """Whether dp ranks are carved out of the tp cards (SGLang ``--enable-dp-attention``: the launch takes tp × pp
        cards, each DP rank's attention on tp / dp of them, its own sequences)."""
        return self.dp > 1 and not self.expert_dp and self.cards == self.tp * self.pp

    @property
    def parallel(self) -> str:
        """The parallel sizes that are not 1: ``tp8 pp2 ep16``."""
        parts = [f"{k}{v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp), ("ep", self.ep)) if v > 1]
        return " ".join(parts) or "single"


@dataclass(frozen=True, slots=True, kw_only=True)
class CardMemory:
    """What one card (or the host) holds, part by part, in bytes.

    Attributes:
        role: which card: ``stage 1 of 3``, ``GPU 0``, ``host``…
        weights: the weights share.
        kv_cache: the KV cache the request needs (context × concurrency).
        activations: the activation peak the engine reserves.
        overhead: engine overhead (CUDA graphs, non-torch memory, compute and output buffers…).
        usable: what the engine may use on this card.
        capacity: the card's whole memory.
        count: how many cards share this role.
    """

    role: str
    weights: int
    kv_cache: int
    activations: int
    overhead: int
    usable: int
    capacity: int
    count: int = 1

    def __post_init__(self) -> None:
        check_figures(
            f"card memory ({self.role})",
            ImplausibleFigureError,
            weights=self.weights,
            kv_cache=self.kv_cache,
            activations=self.activations,
            overhead=self.overhead,
            usable=self.usable,
            capacity=self.capacity,
        )

    @property
    def total(self) -> int:
        """Everything the card must hold."""
        return self.weights + self.kv_cache + self.activations + self.overhead

    @property
    def headroom(self) -> int:
        """Usable bytes left (negative: short by that much)."""
        return self.usable - self.total

    @property
    def fits(self) -> bool:
        """Whether it holds what it must."""
        return self.total <= self.usable


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCommand:
    """What a further node of a launch runs beside the head's command.

    Attributes:
        rank: which of the launch's nodes runs it (1 = the first after the head).
        command: its line, without devices or port (the launch lines add them).
        devices: the card positions on that node it runs on (``NODE:INDEX``'s index); empty: the same cards
            as the head's.
        where: the node's name when the engine named it (an RPC server's host), else empty.
    """

    rank: int
    command: str
    devices: tuple[int, ...] = ()
    where: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    """An engine's answer for one layout.

    Attributes:
        cards: per-role card memory; the first is the binding card shown as ``per_card``.
        host: what the host holds (llama.cpp offload, CPU runs), or None.
        max_context_tokens: the longest context one sequence can have.
        max_concurrency: sequences that fit at the asked context.
        layers_on_host: llama.cpp layers left on the CPU.
        command: how to launch it.
        notes: what this layout assumes.
        free_needed_bytes: free memory a card must have now for the engine to start on it
            (vLLM: total × utilisation; SGLang: total × mem_fraction_static; llama.cpp: what it allocates).
        n_gpu_layers: llama.cpp's ``-ngl`` as resolved (None for other engines).
        devices: the head node's card positions the command runs on, in the order its figures assume
            (llama.cpp's ``--tensor-split``); empty: the first cards of the layout's class.
        workers: what the launch's other nodes run (ranks of a launch across nodes, RPC servers).
        meeting_ports: the texts of the commands that name a port where the launch's nodes meet, each ending in
            the port: the head's rendezvous (``--dist-init-addr <head-node>:5000``, ``--master-port 29501``), an
            RPC server's (``<gpu-b>:50052`` and its ``-p 50052``); a further copy moves them
            (:func:`explorer.plan.launch_lines.launch_lines`), so two copies never share one.
    """

    cards: tuple[CardMemory, ...]
    host: CardMemory | None
    max_context_tokens: int
    max_concurrency: int
    command: str
    layers_on_host: int = 0
    notes: tuple[str, ...] = field(default=())
    free_needed_bytes: int = 0
    n_gpu_layers: int | None = None
    devices: tuple[int, ...] = ()
    workers: tuple[NodeCommand, ...] = ()
    meeting_ports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_figures(
            "an evaluation",
            ImplausibleFigureError,
            max_context_tokens=self.max_context_tokens,
            max_concurrency=self.max_concurrency,
            layers_on_host=self.layers_on_host,
            free_needed_bytes=self.free_needed_bytes,
        )

    @property
    def fits(self) -> bool:
        """Every card (and the host) holds what it must, and one sequence of the asked context fits."""
        ok = all(c.fits for c in self.cards)
        return ok and (self.host is None or self.host.fits)

    @property
    def binding(self) -> CardMemory:
        """The card with the least headroom."""
        pool = list(self.cards) + ([self.host] if self.host is not None and not self.cards else [])
        return min(pool, key=lambda c: c.headroom)


#: the head node's address in a launch across nodes: a placeholder the launch lines name the head node in
HEAD_ADDRESS = "<head-node>"


def across_nodes(base: str, nodes: int, rank_flags: Callable[[int], str]) -> tuple[str, tuple[NodeCommand, ...]]:
    """A launch over ``nodes`` nodes: the head's command and each other node's, ``base`` with that rank's flags
    (one node: ``base`` alone)."""
    if nodes < 2:
        return base, ()
    return f"{base} {rank_flags(0)}", tuple(
        NodeCommand(rank=r, command=f"{base} {rank_flags(r)}") for r in range(1, nodes)
    )


def pp_partition(layers: int, pp: int) -> list[tuple[int, int]]:
    """vLLM's ``get_pp_indices``: ``layers // pp`` each, the remainder added to the stages
    before the last, from the second-to-last backwards (80 layers / 3 → 27, 27, 26)."""
    base, rem = divmod(layers, pp)
    sizes = [base] * pp
    for i in range(2, rem + 2):
        sizes[-i] += 1
    out, start = [], 0
    for size in sizes:
        out.append((start, start + size))
        start += size
    return out


def card_role(layout: Layout, stage: int, first: int, end: int) -> str:
    """Which cards a per-card figure is for: ``each of 8 cards`` or ``stage 2 of 3 (layers 27–53), 8 cards``."""
    if layout.expert_dp:
        return f"each of {layout.cards} cards ({layout.dp} dp ranks of {layout.tp})"
    if layout.pp == 1:
        return f"each of {layout.tp} cards" if layout.tp > 1 else "the card"
    return f"stage {stage + 1} of {layout.pp} (layers {first}–{end - 1}), {layout.tp} cards"


def card_kv_bytes(cache: LayerCache, kv: ElementType, tp: int, context: int, block: int, window_extra: int = 0) -> int:
    """One sequence's KV bytes for one layer on one tensor-parallel card.

    Context is counted in whole blocks of ``block`` tokens. K/V heads are
    split by tp down to one head a card; an MLA latent is whole on every
    card; a recurrent state splits by tp. A window holds ``window +
    window_extra`` tokens at most (vLLM keeps a prefill chunk beyond it).
    """
    if isinstance(cache, RecurrentState):
        return cdiv(cache.state_bytes(), tp)
    if isinstance(cache, MLAAttention):
        tokens = cdiv(context, block) * block
        return tokens * cache.bytes_per_token(kv)
    if isinstance(cache, FullAttention):
        heads = max(1, cache.kv_heads // tp)
        per_token = kv.row_bytes(heads * cache.head_dim) + (
            kv.row_bytes(heads * cache.v_head_dim) if cache.v_head_dim else 0
        )
        if isinstance(cache, (SlidingWindowAttention, ChunkedLocalAttention)):
            span = cache.window if isinstance(cache, SlidingWindowAttention) else cache.chunk
            held = min(context, span + window_extra)
        else:
            held = cache.tokens_held(context)
        return cdiv(held, block) * block * per_token
    return 0


@lru_cache(maxsize=4096)
def stage_caches(shape, first: int, end: int) -> tuple[tuple[LayerCache, int], ...]:
    """The distinct cache specs of layers ``first``..``end - 1`` with how many layers use each."""
    counts: dict[int, list] = {}
    for layer in shape.decoder[first:end]:
        entry = counts.setdefault(id(layer.cache), [layer.cache, 0])
        entry[1] += 1
    return tuple((cache, n) for cache, n in counts.values())


def stage_kv_bytes(
    shape, first: int, end: int, kv: ElementType, tp: int, context: int, block: int, window_extra: int = 0
) -> int:
    """One sequence's KV bytes on one card of the pipeline stage holding layers ``first``..``end - 1``."""
    return sum(
        n * card_kv_bytes(cache, kv, tp, context, block, window_extra) for cache, n in stage_caches(shape, first, end)
    )


def largest_context(slack, upper: int, step: int = 1) -> int:
    """The largest context in [0, upper], in multiples of ``step``, whose ``slack(context)`` (bytes to
    spare) is not negative; 0 when not even one step fits. ``upper`` itself counts even off the step grid.

    KV bytes never shrink as context grows, so the slack never grows: see
    :func:`explorer.engines.fit_search.largest_fitting` (a few probes, the answer exact).
    """
    if slack(upper) >= 0:
        return upper
    best = largest_fitting(lambda k: slack(k * step), 1, upper // step)
    return 0 if best is None else best * step


def serve_reference(artifact: Artifact, method: str, model_ref: str, online_methods: frozenset[str],
                    original_method: str = "none") -> str:  # fmt: skip
    """The model a launch command loads for ``artifact``: never the original weights by mistake.

    A published checkpoint loads from its own repository; the model's own
    weights load from ``model_ref``, and so does a what-if the engine applies
    while loading (``method`` in ``online_methods``, e.g. vLLM's ``--quantization
    fp8``) when the original weights are unquantised (``original_method`` ``none``);
    any other what-if has no repository to load, so the command names a visible
    placeholder (``<ORG/NAME at int4 AWQ g128: no published checkpoint known>``).
    """
    if artifact.repo:
        return artifact.repo
    online = method in online_methods or method == "none"  # "none": a dense cast (``--dtype float16``)
    if not artifact.what_if or (online and original_method == "none"):
        return model_ref
    return placeholder_ref(artifact.quant, model_ref)


#: a dense precision's name → the ``--dtype`` vLLM and SGLang cast the weights to while loading
DTYPE_FLAGS: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def online_flags(shape_method: str, shape_dtype: str, precision_source: str, method: str, name: str,
                 online: frozenset[str]) -> list[str]:  # fmt: skip
    """The flags that make an engine produce a what-if precision from the original weights while loading:
    ``--dtype float16`` for a dense cast, ``--quantization fp8`` for an online method; none for a
    published checkpoint or over weights that are already quantised."""
    if precision_source != "what-if" or shape_method != "none":
        return []
    if method == "none" and name in DTYPE_FLAGS and name != shape_dtype:
        return [f"--dtype {DTYPE_FLAGS[name]}"]
    return [f"--quantization {method}"] if method in online else []
