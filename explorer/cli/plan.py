"""``explorer plan MODEL --cluster SPEC``: every way a model can run, best first, and why others cannot."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from explorer.cli.args import amount, context_tokens, fraction, int_range, split_fractions
from explorer.cli.plan_table import print_result
from explorer.engines.all2all import ALL2ALL_BACKENDS
from explorer.engines.common import ENGINES, PlanRequest
from explorer.engines.registry import engine_serving
from explorer.engines.weight_kernels import RULE as WEIGHTS_UNSUPPORTED
from explorer.errors import ClusterSpecError
from explorer.hardware.cluster import MAX_GPUS, Cluster
from explorer.limits import MAX_CONCURRENCY, MAX_CONTEXT_TOKENS, MAX_HICACHE_RATIO, MAX_HOST_GIB, MAX_NGL
from explorer.model.dtypes import KV_CACHE_TYPES
from explorer.plan.offer import fallback_artifacts, plan_artifacts
from explorer.plan.pinning import check_pinned, pinned_launch
from explorer.plan.planner import plan
from explorer.plan.ranking import GOALS, SORT_ALIASES
from explorer.sources.cache.calibrations import stored_calibrations
from explorer.sources.checkpoints import checkpoints_for_plan
from explorer.sources.resolve import load_model
from explorer.sources.shipped import (
    load_cluster_file,
    parse_cluster,
    read_prices,
    shipped_catalogue,
    shipped_prices,
)
from explorer.sources.spec import parse_model_spec
from explorer.speed.estimate import SpeedSettings
from explorer.units import gib

__all__ = [
    "add_request_arguments",
    "add_workload_arguments",
    "goal_from_args",
    "print_result",
    "read_cluster",
    "request_from_args",
    "run",
]


def add_workload_arguments(p: argparse.ArgumentParser, example: str = "2x8xh100-80g@ib0 + 1xcpu-256g") -> None:
    """``--cluster``, ``--context``, ``--concurrency`` and ``--engine`` (shared with ``explorer fit``)."""
    p.add_argument(
        "--cluster",
        required=True,
        metavar="SPEC",
        help=f"cluster spec ({example}) or a .json/.toml file",
    )
    p.add_argument("--context", type=context_tokens, default=4096, help="context tokens per sequence (default 4096)")
    p.add_argument(
        "--concurrency",
        type=int_range(1, MAX_CONCURRENCY, "concurrency"),
        default=1,
        help="sequences that must fit at that context",
    )
    p.add_argument("--engine", action="append", choices=ENGINES, help="engine(s) to consider (default: all)")


def add_request_arguments(p: argparse.ArgumentParser) -> None:
    """The options that shape a plan request (shared with other subcommands)."""
    add_workload_arguments(p)
    p.add_argument(
        "--quant", default=None, help="what-if precision (bf16, fp8, int8, int4-awq, int4-gptq, nf4) or a GGUF quant"
    )
    p.add_argument("--kv-dtype", default="auto", choices=KV_CACHE_TYPES, help="KV cache type")
    p.add_argument(
        "--gpu-memory-utilization", type=fraction("vLLM's share"), default=0.9, help="vLLM's share of each card"
    )
    p.add_argument(
        "--mem-fraction-static",
        type=fraction("SGLang's static share"),
        default=None,
        help="SGLang's static share (default: its own rule)",
    )
    p.add_argument("--dp-attention", action="store_true", help="SGLang --enable-dp-attention")
    p.add_argument("--speculative", default=None, metavar="ALGO", help="SGLang speculative algorithm (EAGLE, NGRAM…)")
    p.add_argument("--flash-attn", default="auto", choices=("on", "off", "auto"), help="llama.cpp flash attention")
    p.add_argument(
        "--ngl",
        type=int_range(-1, MAX_NGL, "-ngl"),  # -1 or more than the layers means all of them, as in llama.cpp
        default=None,
        help="llama.cpp layers on the GPU (default: as many as fit)",
    )
    p.add_argument("--tensor-split", type=split_fractions, default=None, help="llama.cpp tensor split, e.g. 3,1")
    p.add_argument("--batch", type=int_range(1, MAX_CONTEXT_TOKENS, "-b"), default=2048, help="llama.cpp -b")
    p.add_argument("--ubatch", type=int_range(1, MAX_CONTEXT_TOKENS, "-ub"), default=512, help="llama.cpp -ub")
    p.add_argument(
        "--parallel",
        type=int_range(1, MAX_CONCURRENCY, "-np"),
        default=None,
        help="llama.cpp -np (same as --concurrency)",
    )
    p.add_argument(
        "--no-mmap", action="store_true", help="llama.cpp reads the file instead of mapping it (--load-mode none)"
    )
    p.add_argument(
        "--no-cpu-offload",
        action="store_true",
        help="keep every layer on the accelerators: no llama.cpp partial offload (one node's or over RPC), no CPU",
    )
    p.add_argument(
        "--tp",
        type=int_range(1, MAX_GPUS, "--tp"),
        default=None,
        help="tensor-parallel size (vLLM, SGLang); default: every split",
    )
    p.add_argument(
        "--pp",
        type=int_range(1, MAX_GPUS, "--pp"),
        default=None,
        help="pipeline-parallel size (vLLM, SGLang); default: every split",
    )
    p.add_argument(
        "--dp",
        type=int_range(1, MAX_GPUS, "--dp"),
        default=None,
        help="data-parallel ranks in one launch (vLLM --data-parallel-size: copies of a dense model, ranks sharing "
        "a mixture of experts' experts with --enable-expert-parallel; SGLang --dp-size; with --dp-attention its DP "
        "attention size)",
    )
    p.add_argument(
        "--ep",
        type=int_range(1, MAX_GPUS, "--ep"),
        default=None,
        help="SGLang --ep-size: the MoE layers' expert-parallel size within --tp (default: 1, or tp where the "
        "block-FP8 rule needs it); vLLM's expert parallelism always spans tp × dp",
    )
    p.add_argument(
        "--all2all-backend",
        choices=ALL2ALL_BACKENDS,
        default=None,
        help="the experts' all-to-all: DeepEP's buffers held on each rank (vLLM --all2all-backend; SGLang "
        "--moe-a2a-backend deepep --deepep-mode normal / low_latency / auto, auto SGLang only); default: the "
        "engines' NCCL collectives, no buffer",
    )
    p.add_argument(
        "--max-num-seqs",
        type=int_range(1, MAX_CONCURRENCY, "--max-num-seqs"),
        default=None,
        help="vLLM --max-num-seqs (default: vLLM's for the card)",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=int_range(1, MAX_CONTEXT_TOKENS, "--max-num-batched-tokens"),
        default=None,
        help="vLLM --max-num-batched-tokens (default: vLLM's)",
    )
    p.add_argument(
        "--chunked-prefill-size",
        type=int_range(1, MAX_CONTEXT_TOKENS, "--chunked-prefill-size"),
        default=None,
        help="SGLang --chunked-prefill-size",
    )
    p.add_argument(
        "--cuda-graph-max-bs",
        type=int_range(1, MAX_CONCURRENCY, "--cuda-graph-max-bs"),
        default=None,
        help="SGLang --cuda-graph-max-bs",
    )
    p.add_argument(
        "--enforce-eager",
        action="store_true",
        help="no CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph)",
    )
    p.add_argument(
        "--language-only", action="store_true", help="SGLang --language-only: no vision-head divisibility check"
    )
    p.add_argument("--piecewise-cuda-graph", action="store_true", help="SGLang --enable-piecewise-cuda-graph")
    p.add_argument(
        "--piecewise-cuda-graph-max-tokens",
        type=int_range(1, MAX_CONTEXT_TOKENS, "--piecewise-cuda-graph-max-tokens"),
        default=None,
        help="SGLang --piecewise-cuda-graph-max-tokens (reserves a quarter MiB a token; implies the switch)",
    )
    p.add_argument(
        "--swap-space",
        type=amount(0, MAX_HOST_GIB, "--swap-space"),
        default=None,
        metavar="GIB",
        help="vLLM --swap-space, host RAM per GPU (default: the release's: 4 up to vLLM 0.11, none after; "
        "vLLM 0.18 and later have no such flag: refused there, use --vllm-version 0.17.1)",
    )
    p.add_argument(
        "--hierarchical-cache", action="store_true", help="SGLang --enable-hierarchical-cache (a host KV pool)"
    )
    p.add_argument(
        "--hicache-ratio",
        type=amount(0, MAX_HICACHE_RATIO, "--hicache-ratio", above=True),
        default=2.0,
        help="SGLang --hicache-ratio (host pool / device pool)",
    )
    p.add_argument(
        "--hicache-size",
        type=amount(0, MAX_HOST_GIB, "--hicache-size"),
        default=None,
        metavar="GB",
        help="SGLang --hicache-size, GB per rank",
    )
    p.add_argument(
        "--vllm-version", default=None, metavar="VER", help="the vLLM release to plan for (default: the current one)"
    )


def read_cluster(text: str) -> Cluster:
    """A cluster from a spec string or a .json/.toml file."""
    if text.endswith((".json", ".toml")):
        if not Path(text).exists():
            raise ClusterSpecError(f"cluster file {text} does not exist")
        return load_cluster_file(text)
    return parse_cluster(text)


def request_from_args(args: argparse.Namespace) -> PlanRequest:
    """A PlanRequest from parsed arguments."""
    split = args.tensor_split  # checked by args.split_fractions
    if isinstance(split, str):  # a namespace made by hand, not by the parser
        split = split_fractions(split)
    return PlanRequest(
        context_tokens=args.context,
        concurrency=args.parallel or args.concurrency,
        kv_dtype=args.kv_dtype,
        precision=args.quant,
        engines=tuple(args.engine) if args.engine else ENGINES,
        gpu_memory_utilization=args.gpu_memory_utilization,
        mem_fraction_static=args.mem_fraction_static,
        dp_attention=args.dp_attention,
        speculative=args.speculative,
        flash_attn=args.flash_attn,
        n_gpu_layers=args.ngl,
        tensor_split=split,
        batch_tokens=args.batch,
        ubatch_tokens=args.ubatch,
        mmap=not args.no_mmap,
        cpu_offload=not args.no_cpu_offload,
        tensor_parallel_size=args.tp,
        pipeline_parallel_size=args.pp,
        data_parallel_size=args.dp,
        expert_parallel_size=args.ep,
        all2all_backend=args.all2all_backend,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        chunked_prefill_size=args.chunked_prefill_size,
        cuda_graph_max_bs=args.cuda_graph_max_bs,
        enforce_eager=args.enforce_eager,
        language_only=args.language_only,
        piecewise_cuda_graph=args.piecewise_cuda_graph or args.piecewise_cuda_graph_max_tokens is not None,
        piecewise_cuda_graph_max_tokens=args.piecewise_cuda_graph_max_tokens,
        swap_space_gib=args.swap_space,
        hierarchical_cache=args.hierarchical_cache,
        hicache_ratio=args.hicache_ratio,
        hicache_size_gb=args.hicache_size,
        vllm_version=args.vllm_version,
        calibrations=stored_calibrations(),
    )


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """How a MODEL argument is resolved (shared with other subcommands)."""
    p.add_argument("--offline", action="store_true", help="use only the cache and the shipped snapshot")
    p.add_argument("--token", default=None, help="Hugging Face token for gated repos (or set HF_TOKEN); never printed")
    p.add_argument("--revision", default=None, help="branch, tag or commit of a Hub model")


def resolve_for_plan(args: argparse.Namespace):
    """(shape, artifacts, model reference, fallback) for a MODEL argument.

    The fallback (:func:`explorer.plan.offer.fallback_artifacts`) is planned only when the model's own
    weights keep no layout on accelerators alone; none when the user chose a precision or named a file.
    """
    kw = {}
    if args.offline:
        kw["offline"] = True
    if args.token:
        kw["token"] = args.token
    if args.revision:
        kw["revision"] = args.revision
    spec = parse_model_spec(args.model)
    resolved = load_model(args.model, **kw)
    named = spec.filename or spec.kind == "gguf"
    checkpoints = resolved.checkpoints
    if args.quant and resolved.repo and not named:  # a what-if precision: which repository publishes it?
        found = checkpoints_for_plan(resolved.repo, offline=args.offline, token=args.token)
        checkpoints = found.checkpoints
        if found.note:
            print(f"note: {found.note}", file=sys.stderr)
    artifacts = plan_artifacts(
        resolved.shape,
        resolved.artifacts,
        quant=args.quant,
        selected=resolved.selected if named else None,
        checkpoints=checkpoints,
    )
    chosen = bool(args.quant) or bool(named)
    fallback = () if chosen else fallback_artifacts(resolved.shape, artifacts, checkpoints)
    return resolved.shape, artifacts, resolved.launch_ref, fallback


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``plan`` subcommand's arguments."""
    p.add_argument(
        "model",
        metavar="MODEL",
        help="config.json, a model folder, a .gguf file, or a Hub id (org/name, org/name@revision, org/name:FILE.gguf)",
    )
    add_request_arguments(p)
    add_source_arguments(p)
    p.add_argument(
        "--gpus",
        default=None,
        metavar="NODE:IDX,...",
        help="pin these GPUs (the first --engine given; else llama.cpp for a GGUF, vLLM for weights) "
        "and report any overcommit",
    )
    p.add_argument(
        "--replicas",
        type=int_range(1, MAX_GPUS, "--replicas"),
        default=1,
        help="with --gpus: replicas over the pinned GPUs, in the order given (refused if any overcommits)",
    )
    add_goal_arguments(p)
    p.add_argument(
        "--top", type=int_range(0, MAX_CONCURRENCY, "--top"), default=15, help="options to print (human form)"
    )
    p.add_argument("--wide", action="store_true", help="every column: most sequences, free now, $/Mtok, full label")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_goal_arguments(p: argparse.ArgumentParser) -> None:
    """``--goal`` (and the deprecated ``--sort``) and the speed settings the goals rank by (``--efficiency``,
    ``--price-table``), shared with ``explorer fit``."""
    p.add_argument(
        "--goal",
        choices=GOALS,
        default=None,
        help="what to rank for inside each tier (default fewest-cards: the fewest cards and nodes, "
        "the better precision, free now, faster, more headroom)",
    )
    p.add_argument(
        "--sort",
        choices=tuple(SORT_ALIASES),
        default=None,
        help="deprecated: --sort speed is --goal fastest, --sort default is --goal fewest-cards",
    )
    p.add_argument(
        "--efficiency",
        type=fraction("the efficiency"),
        default=None,
        metavar="F",
        help="share of the speed-of-light bound the engines reach, 0.01 to 1 (default 0.6)",
    )
    p.add_argument(
        "--price-table",
        default=None,
        metavar="FILE",
        help="CSV of gpu_class,usd_per_gpu_hour,... for cost per million tokens (default: data/prices.csv)",
    )


def goal_from_args(args: argparse.Namespace) -> str:
    """The goal: ``--goal``, else the deprecated ``--sort`` (with a note on stderr), else fewest-cards."""
    if args.sort is not None:
        goal = SORT_ALIASES[args.sort]
        print(f"explorer: --sort {args.sort} is deprecated; use --goal {goal}", file=sys.stderr)
        if args.goal is None:
            return goal
    return args.goal or "fewest-cards"


def run(args: argparse.Namespace) -> int:
    """Plan and print."""
    shape, artifacts, model_ref, fallback = resolve_for_plan(args)
    cluster = read_cluster(args.cluster)
    if args.gpus:
        return run_pinned(args, shape, cluster, artifacts, model_ref)
    result = plan(
        shape,
        cluster,
        request_from_args(args),
        artifacts=artifacts,
        model_ref=model_ref,
        goal=goal_from_args(args),
        speed=speed_settings(args),
        catalogue=shipped_catalogue(),
        fallback=fallback,
    )
    if result.widened and not args.json:
        unsupported = next((r.reason for r in result.rejected if r.rule == WEIGHTS_UNSUPPORTED), "")
        print(
            "note: the model's own weights keep no all-GPU layout here that loads them as published with headroom "
            f"(at most 95 % of a card, room for 2 sequences){f'; {unsupported}' if unsupported else ''}; also planned: "
            f"{', '.join(result.widened)} (choose one with --quant)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps({**result.to_dict(), "assumed": list(cluster.assumptions)}, indent=2))
    else:
        print_result(result, top=args.top, wide=args.wide, assumed=cluster.assumptions)
    return 0 if result.options else 3


def run_pinned(args: argparse.Namespace, shape, cluster, artifacts, model_ref: str) -> int:
    """Check user-pinned GPUs: the launch on exactly them, and by how much it overcommits."""
    engine = args.engine[0] if args.engine else engine_serving(artifacts[0]).name
    result = check_pinned(
        shape,
        cluster,
        [g.strip() for g in args.gpus.split(",") if g.strip()],
        engine=engine,
        request=request_from_args(args),
        artifacts=artifacts,
        model_ref=model_ref,
        replicas=args.replicas,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "model": model_ref,
                    "option": result.option.to_dict(),
                    "replicas": [o.to_dict() for o in result.replicas],
                    "launch": list(pinned_launch(result)),
                    "overcommit_bytes": result.overcommit_bytes,
                    "short_now_bytes": result.short_now_bytes,
                    "cards_pinned": result.cards_pinned,
                    "cards_used": result.cards_used,
                    "cards_ready": result.cards_ready,
                    "usable_bytes": result.usable_bytes,
                    "free_bytes": result.free_bytes,
                    "message": result.message,
                },
                indent=2,
            )
        )
    else:
        card = result.option.per_card
        print(
            f"{result.option.label}\n  {card.role}: weights {gib(card.weights)} + KV {gib(card.kv_cache)} + "
            f"activations {gib(card.activations)} + overhead {gib(card.overhead)} = {gib(card.total)} "
            f"of {gib(card.usable)} usable\n  {result.option.memory_text}\n  {result.message}"
        )
        for line in pinned_launch(result):
            print(f"  {line}")
    return 3 if result.overcommitted else 0


def speed_settings(args: argparse.Namespace) -> SpeedSettings:
    """Speed settings from ``--efficiency`` and ``--price-table``."""
    kwargs: dict = {}
    if args.efficiency is not None:
        kwargs["efficiency"] = {}
        kwargs["default_efficiency"] = args.efficiency
    kwargs["prices"] = read_prices(args.price_table) if args.price_table else shipped_prices()
    return SpeedSettings(**kwargs)
