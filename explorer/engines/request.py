"""What the user asks for: :class:`PlanRequest`, each setting declared once on its field.

The declaration (:mod:`explorer.engines.setting`) carries the setting's kind, range, default, help, CLI option,
URL key and each engine's own flag; the request's checks are made from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engines.calibration import Calibration
from explorer.engines.names import ENGINES, EngineName
from explorer.engines.setting import declared_settings, setting
from explorer.hardware.cluster import MAX_GPUS
from explorer.limits import (
    MAX_CONCURRENCY,
    MAX_CONTEXT_TOKENS,
    MAX_HICACHE_RATIO,
    MAX_HOST_GIB,
    MAX_NGL,
    MAX_SPLIT_SHARE,
    MIN_SHARE,
)
from explorer.model.dtypes import KV_CACHE_TYPES


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
            (:mod:`explorer.engines.all2all`); vLLM runs it between data-parallel ranks only. None: the engines'
            default (NCCL collectives, no buffer).
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
