"""The Engine protocol: what the planner, pinning and the fleet need of an engine.

Each engine (vLLM, SGLang, llama.cpp) is one object, listed by name in
:mod:`explorer.engines.registry`. Every engine

- ``walk``s a cluster for every way it runs each artifact, writing the ways
  that fit and the refusals into a :class:`~explorer.engines.collect.Collector`;
- ``recheck``s one of its ways at another context or concurrency;
- gives a model's ``footprint`` for a fleet (weights, fixed bytes a card, KV a token);
- says which artifacts it ``serves``, and ``pin``s one launch on cards a user names;
- optionally, brings a ``log_reader`` (:class:`LogReader`): how ``explorer check`` and the app's paste box read
  its start-up log. The built-ins' logs are read by :mod:`explorer.engines.logs`; an engine from another package
  sets ``log_reader`` (a class attribute) and its logs are tried after the built-in readers find none of their lines.

An :class:`~explorer.engines.evaluation.Evaluation` carries what each card holds,
the longest context, the concurrency and the launch command.

Engines that split a replica tensor × pipeline over a pool's cards (vLLM,
SGLang) implement :class:`SplitEngine` as well: they say which splits they
run and how each is laid out, what they refuse, what share of a card they
may fill, and evaluate one layout. The shared walk
(:mod:`explorer.engines.split_walk`) and manual pinning
(:mod:`explorer.plan.pinning`) use only that. llama.cpp lays out its replicas
its own way (one card, a layer split, RPC, partial offload, CPU, unified
memory) in its own walk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from explorer.engines.collect import Collector
from explorer.engines.evaluation import Evaluation, NodeCommand
from explorer.engines.host_ram import HostClaim
from explorer.engines.layouts import Layout
from explorer.engines.logs.record import EngineLog
from explorer.engines.names import EngineName
from explorer.engines.options import Option
from explorer.engines.parallel_rules import Refusal
from explorer.engines.request import PlanRequest
from explorer.hardware.cards import CardRef
from explorer.hardware.catalogue import GPUClass
from explorer.hardware.cluster import Cluster
from explorer.hardware.pools import Pool
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape
from explorer.model.weights import WeightBreakdown


@dataclass(frozen=True, slots=True, kw_only=True)
class LogReader:
    """How ``explorer check`` reads an engine's start-up log (an engine's optional ``log_reader``).

    Attributes:
        signatures: regular expressions, one a start-up line the engine prints; a log is the reader's when it holds
            some (counted like the built-in readers': the most matches win).
        read: the log's text (colour codes removed) -> its record. The record's ``engine`` names the memory
            accounting ``explorer check`` plans it with: ``vllm``, ``sglang`` or ``llamacpp`` (a fork of one of them
            reads its log in that engine's terms, ``settings`` and ``observed`` under that engine's names).
            It may raise :class:`~explorer.errors.EngineLogError` for a log it cannot read.
        expected: the lines it recognises, for the error that says what was expected.
    """

    signatures: tuple[str, ...]
    read: Callable[[str], EngineLog]
    expected: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Footprint:
    """What one instance of a model costs a fleet, by an engine's accounting on one card.

    Attributes:
        weights_bytes: the weights an instance loads (split across a split's cards).
        fixed_bytes_per_card: what every card of a split pays whole: activation peak,
            CUDA graphs, non-torch memory, compute and output buffers, fixed recurrent state.
        kv_bytes_per_token: what one more token of context costs (split likewise).
        even_split: a split gives every card the same share, on cards of one class (tensor
            parallelism: vLLM, SGLang); False: any proportion (llama.cpp's layer split).
        split_widths: the card counts an even split may take, ascending: the tensor-parallel sizes the engine
            accepts for this model (64 attention heads: 1, 2, 4, 8, 16, 32, 64); empty: any count.
        kv_split_widths: the widths among ``split_widths`` whose launch splits a KV cache that tensor
            parallelism would keep whole on every card (an MLA latent) by token over all of its cards, as the even
            split charges it (vLLM ``--decode-context-parallel-size`` = the width); empty: none.
        load_flags: the flags a launch needs to load the model as it was sized
            (:func:`~explorer.engines.serve_command.load_flags`: ``--dtype float16`` over a float32 checkpoint on a
            T4, ``--quantization fp8`` for fp8 made while loading, ``--kv-cache-dtype fp8`` for the KV cache type it
            was sized at; llama.cpp: the GGUF it was sized at, ``-m <… converted to a F16 GGUF (…)>``, which then
            stands for the model's id, and ``-ctk``/``-ctv``); empty: none.
        model_ref: what a launch loads in place of the model's own id
            (:func:`~explorer.engines.serve_command.replaced_ref`): a published checkpoint's repository
            (``hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4``) or a visible placeholder for a what-if that
            nobody publishes and the engine cannot make while loading; None: the model's own id (llama.cpp names
            its GGUF in ``load_flags``).
    """

    weights_bytes: int
    fixed_bytes_per_card: int
    kv_bytes_per_token: int
    even_split: bool = False
    split_widths: tuple[int, ...] = ()
    kv_split_widths: tuple[int, ...] = ()
    load_flags: tuple[str, ...] = ()
    model_ref: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedFacts:
    """What the speed model (:mod:`explorer.speed`) knows of an engine: its own figures, fitted on published
    decode measurements (docs/notes/speed_model.md), so the speed model never compares engine names.

    Attributes:
        efficiency: the share of the roofline bound the engine reaches by default (0 < e ≤ 1).
        dense_layer_floor_s: the least time one dense decoder layer takes in a decode step (its kernels'
            launch and latency), on a Hopper-class card; other card generations scale it
            (:data:`explorer.speed.floor.GENERATION_FLOOR`).
        moe_layer_floor_s: the same for a mixture-of-experts layer (router, experts, their gather).
        token_overhead_s: the time a decode step takes beyond its layers, whatever the model: sampling,
            scheduling, the step's launch (on a Hopper-class card; scaled by generation as the floors are).
        host_layers: layers may sit on the host; the engine then runs its parts one after another for the
            whole batch (host layers, then each card of a layer split), hands off f32 activations, and reads
            its weights once per ubatch in prefill (llama.cpp).
        gguf: the engine loads a GGUF (converted from the weights), so a step reads the GGUF's tensor types.
    """

    efficiency: float
    dense_layer_floor_s: float
    moe_layer_floor_s: float
    token_overhead_s: float
    host_layers: bool = False
    gguf: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedLayout:
    """An engine's launch on exactly the cards a user pinned.

    Attributes:
        option: the launch and what each card holds (``fits`` False when the cards cannot hold it).
        cards: the pinned cards it runs on, in the order of ``needs_bytes``.
        needs_bytes: free memory each of those cards must have now for the engine to start on it (bytes).
    """

    option: Option
    cards: tuple[CardRef, ...]
    needs_bytes: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetLaunch:
    """One instance of a fleet placement, as its launch command needs it.

    Attributes:
        context_tokens: the context the placement gave it, tokens.
        cards: cards it spans (1 on the unified-memory pool).
        shard_bytes: what the placement charged each card, bytes, in the instance's card order (their
            proportions split the layers).
        share: the largest share of a card's memory it is charged (None: the unified-memory pool).
        nodes: each node it runs on, in the order of its cards, with its GPU positions there (the head's
            first); empty: the unified-memory pool.
        gpu: the card class the placement's footprints were measured on (their batch sizes), or None.
        load_flags: the flags that load the model as its footprint sized it (:attr:`Footprint.load_flags`).
        kv_shards: cards its KV cache is split over by token (:attr:`Footprint.kv_split_widths`; 1: none).
    """

    context_tokens: int
    cards: int
    shard_bytes: tuple[int, ...]
    share: float | None
    nodes: tuple[tuple[str, tuple[int, ...]], ...]
    gpu: GPUClass | None
    load_flags: tuple[str, ...] = ()
    kv_shards: int = 1

    def evaluation(
        self, command: str, workers: tuple[NodeCommand, ...] = (), meeting_ports: tuple[str, ...] = ()
    ) -> Evaluation:
        """The instance's launch as an engine's evaluation, for :func:`explorer.plan.launch_lines.launch_lines`
        (its memory is the placement's, so no card records): the head's command, the other nodes', and the
        ports they meet at."""
        return Evaluation(cards=(), host=None, max_context_tokens=self.context_tokens, max_concurrency=1,
                          command=command, workers=workers, meeting_ports=meeting_ports)  # fmt: skip


class Engine(Protocol):
    """An inference engine as the planner sees it."""

    @property
    def name(self) -> EngineName:
        """The engine's name in requests and layouts: ``vllm``, ``sglang``, ``llamacpp``."""
        ...

    @property
    def label(self) -> str:
        """The engine's name as people write it: ``vLLM``, ``SGLang``, ``llama.cpp``."""
        ...

    @property
    def speed(self) -> SpeedFacts:
        """The engine's speed facts (floors, overhead, efficiency, host layers)."""
        ...

    @property
    def disaggregated_prefill(self) -> bool:
        """The engine can run prefill and decode on separate pools, moving the KV cache between them (vLLM's
        and SGLang's prefill/decode disaggregation)."""
        ...

    @property
    def queues_past_kv(self) -> bool:
        """The engine starts once one sequence of the longest context fits its KV cache, runs as many as the cache
        holds and queues the rest (vLLM's and SGLang's schedulers admit a request only when its KV blocks fit);
        False: every asked sequence must fit at start-up (llama.cpp's ``-np`` slots share ``-c`` between them)."""
        ...

    def prefill_chunk_tokens(self, gpu, request: PlanRequest) -> int:
        """The prompt tokens one scheduler step prefills on ``gpu``'s class (vLLM ``--max-num-batched-tokens``,
        SGLang ``--chunked-prefill-size``, llama.cpp ``-b``), as the request sets them or the engine's default."""
        ...

    @property
    def data_parallel_flag(self) -> str | None:
        """The flag that starts several copies of one single-node layout in one launch (vLLM
        ``--data-parallel-size``, SGLang ``--dp-size``); None: each copy is launched on its own. Not copies of a
        mixture of experts where :attr:`expert_data_parallel` holds (:mod:`explorer.plan.replicas`)."""
        ...

    def walk(
        self,
        shape: ModelShape,
        cluster: Cluster,
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
        out: Collector,
    ) -> None:
        """Every way this engine runs each artifact on the cluster: fits into ``out.accept``, the rest refused."""
        ...

    def recheck(self, shape: ModelShape, option: Option, request: PlanRequest, *, model_ref: str) -> Option:
        """One of this engine's options at another context or concurrency: same cards, KV cache re-sized."""
        ...

    def footprint(self, shape: ModelShape, artifact: Artifact, gpu: GPUClass | None, kv_dtype: str) -> Footprint:
        """A model's per-instance footprint on one card of ``gpu`` (None: a host without discrete GPUs)."""
        ...

    def fleet_command(self, model_id: str, fleet: FleetLaunch) -> Evaluation:
        """The launch of one instance of a fleet placement with the memory the placement charged it: the head
        node's command (no devices, no port: :func:`explorer.plan.launch_lines.launch_lines` writes those), each
        other node's, and the ports they meet at (:meth:`FleetLaunch.evaluation`)."""
        ...

    def serves(self, artifact: Artifact) -> bool:
        """Whether the engine runs this artifact (vLLM and SGLang: safetensors; llama.cpp: any, converted)."""
        ...

    def pin(
        self,
        shape: ModelShape,
        cards: Sequence[CardRef],
        artifacts: Sequence[Artifact],
        request: PlanRequest,
        model_ref: str,
    ) -> PinnedLayout:
        """One launch on exactly ``cards``, of the first artifact the engine serves.

        Raises:
            ManualSelectionError: the engine cannot run on those cards at all (its rules, no artifact it serves).
        """
        ...


class SplitEngine(Engine, Protocol):
    """An engine whose replicas split tensor × pipeline over a pool's cards (vLLM, SGLang)."""

    @property
    def online_methods(self) -> frozenset[str]:
        """Precision methods the engine applies to the original weights while loading them
        (vLLM's ``--quantization fp8``): a what-if of these needs no published checkpoint."""
        ...

    @property
    def expert_data_parallel(self) -> bool:
        """Whether ``--dp`` ranks of a mixture of experts share experts spread over all of them (vLLM's
        ``--data-parallel-size`` with ``--enable-expert-parallel``) instead of each holding a copy."""
        ...

    @property
    def attention_expert_parallel(self) -> bool:
        """Whether DP attention's ranks can spread a mixture of experts' experts whole over the tp cards (SGLang's
        ``--enable-dp-attention --ep-size tp``), offered beside DP attention alone."""
        ...

    @property
    def data_parallel_nodes_rule(self) -> str:
        """Why plain data parallelism is not planned across nodes, in the engine's terms."""
        ...

    def auto_dtype(self, shape: ModelShape, gpu: GPUClass) -> str:
        """The dtype the engine loads a float32 checkpoint of ``shape`` at on ``gpu`` at ``--dtype auto``
        (:mod:`explorer.engines.load_dtype`; the walk plans the model at it:
        :func:`~explorer.engines.load_dtype.served`)."""
        ...

    def kv_refusal(self, shape: ModelShape, gpu: GPUClass, kv_dtype: str) -> str | None:
        """Why the engine cannot keep ``shape``'s KV cache at ``kv_dtype`` on ``gpu`` (refused as ``kv-dtype``
        before any layout), or None."""
        ...

    def decompositions(self, nodes: int, width: int, request: PlanRequest) -> Iterator[tuple[int, int]]:
        """(tp, pp) splits of ``nodes × width`` cards the engine runs, the best first."""
        ...

    def make_layout(
        self, pool: Pool, nodes: int, width: int, tp: int, pp: int, shape: ModelShape, request: PlanRequest
    ) -> Layout:
        """The layout of one split on ``nodes × width`` cards of a pool (with the engine's dp and ep)."""
        ...

    def refusals(self, shape: ModelShape, layout: Layout, request: PlanRequest) -> list[Refusal]:
        """Rules the engine enforces that this layout breaks, first one first (empty: none)."""
        ...

    def kv_shard_layouts(
        self, shape: ModelShape, layout: Layout, gpu: GPUClass, request: PlanRequest
    ) -> tuple[Layout, ...]:
        """``layout`` with its duplicated KV cache split further over its tp cards, each way the engine accepts,
        the least split first (vLLM's decode context parallelism, SGLang's DP attention; empty: none)."""
        ...

    def host_claim(self, layout: Layout, evaluation: Evaluation, request: PlanRequest) -> HostClaim:
        """The host RAM one launch claims on each of its nodes (:mod:`explorer.engines.host_ram`)."""
        ...

    def usable_share(self, request: PlanRequest) -> float:
        """The most of a card's memory the engine fills, weights included: a bound that refuses early."""
        ...

    def card_weights(
        self, shape: ModelShape, precision: Precision, layout: Layout, request: PlanRequest
    ) -> WeightBreakdown:
        """One card's weights, part by part, as the engine splits them (the attention at its own tp under SGLang's
        DP attention)."""
        ...

    def evaluate(
        self,
        shape: ModelShape,
        precision: Precision,
        layout: Layout,
        gpu: GPUClass,
        request: PlanRequest,
        model_ref: str,
    ) -> Evaluation:
        """Per-card memory, longest context, concurrency and launch command of one layout."""
        ...
