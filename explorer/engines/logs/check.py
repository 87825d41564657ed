"""An engine's start-up log against explorer's plan of the same setup, part by part.

:func:`check_log` takes a log's record (:func:`explorer.engines.logs.read_engine_log`),
the model's shape and the card class, plans exactly the log's split with
its settings (:mod:`explorer.engines.logs.setup`) and lines up what the engine
measured with what explorer predicts, in bytes:

- vLLM: weights (``Model loading took``), the KV cache room (``Available KV
  cache memory``) and tokens, the KV one ``max_model_len`` sequence needs (a refusal's), the activation peak, non-torch memory, the
  CUDA-graph pool, the torch-visible total and the requested budget;
- SGLang: weights, the KV pool (K + V) and tokens, the free memory its
  static share is taken of;
- llama.cpp: the GPU's model, KV and compute buffers and the host's.

and whether the engine started against whether explorer says it fits.
:func:`calibration_from_check` turns a check into the constants a later
plan on that card class uses (:mod:`explorer.engines.calibration`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from explorer.artifacts.offer import original_artifact
from explorer.engines import sglang, vllm
from explorer.engines.calibration import Calibration
from explorer.engines.layouts import Layout, pp_partition
from explorer.engines.llamacpp.memory import llamacpp_memory
from explorer.engines.llamacpp.settings import Device, LlamaCppSettings
from explorer.engines.llamacpp.whatif import llama_model_from_shape
from explorer.engines.load_dtype import served
from explorer.engines.logs import EngineLog
from explorer.engines.logs.oom import PARTS as OOM_PARTS
from explorer.engines.logs.setup import LogSetup, card_class, log_setup
from explorer.engines.options import memory_reason
from explorer.engines.stage_kv import stage_kv_bytes
from explorer.engines.vllm_budget import activation_bytes, graph_bytes, scheduler_defaults
from explorer.engines.vllm_release import vllm_release
from explorer.errors import EngineLogError, LlamaCppConfigError
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.model.shapes import ModelShape
from explorer.units import MiB

#: the parts compared, in the order shown, with how people read them
PARTS: dict[str, str] = {
    "weights_bytes": "weights",
    "kv_cache_bytes": "KV cache",
    "kv_cache_tokens": "KV cache (tokens)",
    "kv_needed_bytes": "KV of one max_model_len sequence",
    "activation_bytes": "activation peak",
    "non_torch_bytes": "non-torch memory",
    "cuda_graph_bytes": "CUDA graphs",
    "recurrent_bytes": "recurrent state",
    "compute_bytes": "compute buffer",
    "host_weights_bytes": "host weights",
    "host_kv_cache_bytes": "host KV cache",
    "host_compute_bytes": "host compute buffer",
    "torch_total_bytes": "card total (as the engine sees it)",
    "requested_bytes": "budget (total × utilisation)",
    "free_at_start_bytes": "free at start",
}
#: figures a log may print that explorer shows but does not predict (a refusal's and an out-of-memory error's)
READ_ONLY: dict[str, str] = {
    "fitting_context_tokens": "longest context the KV room holds (vLLM's estimate)",
    **OOM_PARTS,
}
#: per engine, the line each compared part is read from, for what the log does not print
EXPECTED_LINES: dict[str, dict[str, str]] = {
    "vllm": {"weights": "'Model loading took X GiB'", "KV cache": "'Available KV cache memory: X GiB'"},
    "sglang": {
        "weights": "'Load weight end. … mem usage=X GB'",
        "KV cache": "'KV Cache is allocated. #tokens: N, K size: X GB, V size: Y GB'",
    },
    "llamacpp": {"weights": "'<device> model buffer size = X MiB'", "KV cache": "'<device> KV buffer size = X MiB'"},
}
#: llama.cpp's CUDA context, kept free on each device
LLAMACPP_CONTEXT_BYTES = 512 * MiB


@dataclass(frozen=True, kw_only=True)
class LogCheck:
    """A log beside explorer's plan of the same setup.

    Attributes:
        log: what the log says.
        setup: the setup explorer planned.
        model: the model checked.
        observed: the engine's figures (``*_bytes`` bytes, ``*_tokens`` tokens).
        predicted: explorer's figures for the same parts.
        started: whether the engine started (None: the log does not say).
        fits: whether explorer says it fits.
        reason: why explorer refuses it, when it does.
        notes: what the prediction assumed.
        unread: what the log does not print, each said with the line that would give it (never guessed).
    """

    log: EngineLog
    setup: LogSetup
    model: str
    observed: Mapping[str, int]
    predicted: Mapping[str, int]
    started: bool | None
    fits: bool
    reason: str = ""
    notes: tuple[str, ...] = field(default=())
    unread: tuple[str, ...] = field(default=())

    @property
    def differences(self) -> dict[str, int]:
        """Predicted − observed for every part both have."""
        return {k: self.predicted[k] - v for k, v in self.observed.items() if k in self.predicted}

    @property
    def agrees(self) -> bool | None:
        """Whether explorer's verdict is the engine's (None when the log does not say)."""
        return None if self.started is None else self.started == self.fits

    def to_dict(self) -> dict[str, Any]:
        """``{"engine", "model", "card", "settings", "observed", "predicted", "differences", …}``; bytes as ints."""
        return {
            "engine": self.log.engine,
            "version": self.log.version,
            "model": self.model,
            "card": self.setup.gpu.name,
            "cards": self.setup.tp * self.setup.pp,
            "settings": {k: v for k, v in self.log.settings.items() if isinstance(v, (str, int, float, bool))},
            "observed": dict(self.observed),
            "predicted": dict(self.predicted),
            "differences": self.differences,
            "verdict": {"engine_started": self.started, "explorer_fits": self.fits, "reason": self.reason},
            "notes": list(self.notes),
            "read_only": {k: v for k, v in self.log.observed.items() if k in READ_ONLY},
            "unread": list(self.unread),
        }


def _split_predicted(shape: ModelShape, setup: LogSetup, model_ref: str) -> tuple[dict[str, int], bool, str, tuple]:
    engine = vllm.ENGINE if setup.engine == "vllm" else sglang.ENGINE
    request, gpu = setup.request, setup.gpu
    tp, pp = setup.tp, setup.pp
    if setup.engine == "sglang" and request.dp_attention:
        dp = tp  # DP attention: the dp ranks share the tp cards
    else:
        dp = setup.dp if setup.ep > 1 and setup.ep == tp * setup.dp else 1  # plain replicas are checked one by one
    layout = Layout(
        engine=engine.name, gpu_class=gpu.name, gpus_per_node=tp * pp, tp=tp, pp=pp, dp=dp, ep=max(setup.ep, 1)
    )
    if request.precision:
        precision = shape.resolve_precision(request.precision)
    else:  # the checkpoint as the engine loads it at --dtype auto (a float32 one at 16 bits)
        shape, precision = served(engine, shape, original_artifact(shape), gpu)
    ev = engine.evaluate(shape, precision, layout, gpu, request, model_ref)
    kv = shape.kv_type(request.kv_dtype)
    rooms = [c.usable - c.weights - c.activations - c.overhead for c in ev.cards]
    out = {
        "weights_bytes": max(c.weights for c in ev.cards),
        "activation_bytes": max(c.activations for c in ev.cards),
        "torch_total_bytes": gpu.visible_memory_bytes,
    }
    if setup.engine == "vllm":
        release = vllm_release(request.vllm_version)
        tokens, seqs = scheduler_defaults(gpu, request, release)
        out["kv_cache_bytes"] = min(rooms)
        if not (setup.sampler_rank or release.v1):
            out.update(_worker_rank(shape, precision, layout, ev, release, tokens, seqs))
        out["kv_needed_bytes"] = max(c.kv_cache for c in ev.cards)  # one sequence: the request's concurrency is 1
        out["requested_bytes"] = ev.cards[0].usable
        out["non_torch_bytes"] = release.non_torch_bytes(tp, pp)
        out["cuda_graph_bytes"] = graph_bytes(seqs, tokens, None)
        block = vllm.BLOCK_TOKENS
    else:
        free = sglang.free_at_start_bytes(gpu, layout, None)
        static = int(free * sglang.mem_fraction_static(shape, gpu, layout, request))
        out["free_at_start_bytes"] = free
        out["kv_cache_bytes"] = min(static - c.weights for c in ev.cards)
        block = 1
    stages = pp_partition(shape.layers, pp)
    per_token = max(max(stage_kv_bytes(shape, a, b, kv, tp, block, block) for a, b in stages) // block, 1)
    # the blocks every rank allocates: the least room of any (V0's driver rank, with the sampler, when tp > 1)
    out["kv_cache_tokens"] = max(0, min(rooms) if setup.engine == "vllm" else out["kv_cache_bytes"])
    out["kv_cache_tokens"] = out["kv_cache_tokens"] // per_token // block * block
    refused = engine.refusals(shape, layout, request)
    if request.context_tokens > shape.max_context_tokens:
        refused.append(("context-limit", f"context {request.context_tokens:,} exceeds {shape.max_context_tokens:,}"))
    if setup.engine == "vllm" and setup.free_bytes is not None and setup.free_bytes < ev.free_needed_bytes:
        refused.append(("free-memory", "a card has less free memory at start than the budget asks for"))
    if setup.engine == "sglang" and out["kv_cache_bytes"] <= 0:  # SGLang starts with any pool, serving shorter requests
        refused.append(("memory", "the weights leave no room for the KV pool under mem_fraction_static"))
    elif setup.engine == "vllm" and not ev.fits:
        refused.append(("memory", memory_reason(ev.binding)))
    return out, not refused, refused[0][1] if refused else "", ev.notes


def _worker_rank(shape: ModelShape, precision, layout: Layout, ev, release, tokens: int, seqs: int) -> dict[str, int]:
    """A vLLM V0 worker process's own figures: V0 gathers the logits to the driver (rank 0) and samples there, so a
    worker rank profiles the forward pass alone, and its KV room is larger than the driver's by the sampler's
    peak (the engine then allocates the least room of every rank)."""
    forward = activation_bytes(shape, precision, layout.tp, layout.ep, layout.pp, tokens, seqs, False, release)
    room = min(c.usable - c.weights - forward - c.overhead for c in ev.cards)
    return {"activation_bytes": forward, "kv_cache_bytes": room}


def _llamacpp_predicted(shape: ModelShape, setup: LogSetup, log: EngineLog) -> tuple[dict[str, int], bool, str, tuple]:
    r, gpu = setup.request, setup.gpu
    model = llama_model_from_shape(shape, setup.quant or "Q4_K_M")
    free = log.observed.get("free_at_start_bytes") or gpu.visible_memory_bytes - LLAMACPP_CONTEXT_BYTES
    kind = "metal" if gpu.metal else "gpu"
    devices = [Device(name=f"GPU {i}", kind=kind, memory_bytes=free) for i in range(setup.pp)]
    kv = "f16" if r.kv_dtype == "auto" else r.kv_dtype
    settings = LlamaCppSettings(
        n_ctx=int(log.settings.get("n_ctx") or r.context_tokens * r.concurrency),
        n_batch=r.batch_tokens,
        n_ubatch=r.ubatch_tokens,
        n_seq=r.concurrency,
        kv_unified=str(log.settings.get("kv_unified", "false")).lower() == "true",
        type_k=kv,
        type_v=kv,
        flash_attn=r.flash_attn,  # type: ignore[arg-type]
        n_gpu_layers=r.n_gpu_layers,
    )
    try:
        mem = llamacpp_memory(model, settings, devices)
    except LlamaCppConfigError as e:
        raise EngineLogError(f"llama.cpp would refuse these settings: {e.message}") from None
    host = mem.host
    on_gpu = {layer for d in mem.devices for layer in d.layers}
    cache = {"kv": 0, "rs": 0}
    for c in mem.caches:
        cache["rs" if c.name == "rs" else "kv"] += sum(
            b for i, b in zip(c.layers, c.layer_bytes, strict=True) if i in on_gpu
        )
    out = {
        "weights_bytes": sum(d.model_bytes for d in mem.devices),
        "kv_cache_bytes": cache["kv"],
        "recurrent_bytes": cache["rs"],
        "compute_bytes": sum(d.compute_bytes for d in mem.devices),
        "host_weights_bytes": host.mapped_bytes + host.loaded_bytes + host.repack_bytes,
        "host_kv_cache_bytes": host.kv_bytes,
        "host_compute_bytes": host.compute_bytes,
        "torch_total_bytes": gpu.visible_memory_bytes,
    }
    fits = mem.fits()
    return out, fits, "" if fits else "a device's buffers exceed its free memory", tuple(model.notes)


def unread_parts(log: EngineLog) -> tuple[str, ...]:
    """What ``log`` does not print of the parts a check compares, each with the line that would give it."""
    lines, o = EXPECTED_LINES[log.engine], log.observed
    out = []
    if "weights_bytes" not in o:
        out.append(f"this log prints no weights line ({lines['weights']}): the weights are explorer's, not compared")
    if "kv_cache_bytes" not in o and "kv_cache_tokens" not in o:
        out.append(f"this log prints no KV cache line ({lines['KV cache']}): the KV room is not compared")
    if log.refused is None:
        out.append("the log stops before the engine started or refused: no verdict to compare")
    return tuple(out)


def check_log(
    log: EngineLog,
    shape: ModelShape,
    catalogue: Catalogue,
    *,
    card: str | GPUClass | None = None,
    overrides: Mapping[str, Any] | None = None,
    model_ref: str | None = None,
) -> LogCheck:
    """Plan ``log``'s setup for ``shape`` and line the engine's figures up with explorer's.

    ``card`` names the card class where the log does not; ``overrides`` are settings the log leaves
    out, under the engine's names (``gpu_memory_utilization``, ``max_model_len``, ``version``…).

    Raises:
        EngineLogError: the card cannot be told, or llama.cpp would refuse the settings.
    """
    gpu = card if isinstance(card, GPUClass) else card_class(log, catalogue, card)
    setup = log_setup(log, shape, gpu, overrides)
    name = model_ref or log.model or shape.name or "model"
    if setup.engine == "llamacpp":
        predicted, fits, reason, notes = _llamacpp_predicted(shape, setup, log)
    else:
        predicted, fits, reason, notes = _split_predicted(shape, setup, name)
    observed = {k: v for k, v in log.observed.items() if k in PARTS}
    return LogCheck(
        log=log,
        setup=setup,
        model=name,
        observed=observed,
        predicted={k: v for k, v in predicted.items() if k in PARTS},
        started=None if log.refused is None else not log.refused,
        fits=fits,
        reason=reason,
        notes=tuple(notes),
        unread=unread_parts(log),
    )


def calibration_from_check(check: LogCheck, measured_on: str, source: str = "") -> Calibration:
    """The constants ``check``'s log measured, for later plans of its engine on its card class.

    Raises:
        EngineLogError: the log measured none of them.
    """
    o, p, engine = check.observed, check.predicted, check.log.engine
    total = o.get("torch_total_bytes")
    fields: dict[str, Any] = {"torch_memory_bytes": total}
    if engine == "vllm":
        act = o.get("activation_bytes")
        fields.update(
            activation_bytes=act,
            activation_scale=round(act / p["activation_bytes"], 4) if act and p.get("activation_bytes") else None,
            non_torch_bytes=o.get("non_torch_bytes"),
            distributed=check.setup.tp > 1,
            graph_bytes=o.get("cuda_graph_bytes"),
        )
    elif engine == "sglang" and o.get("free_at_start_bytes"):
        fields["startup_bytes"] = (total or check.setup.gpu.visible_memory_bytes) - o["free_at_start_bytes"]
    if not any(v is not None for k, v in fields.items() if k != "distributed"):
        raise EngineLogError(
            f"the {engine} log measured nothing to calibrate with",
            hint="vLLM at DEBUG level prints its budget; keep the lines with total_memory, torch peak and graphs",
        )
    return Calibration(engine=engine, gpu_class=check.setup.gpu.name, measured_on=measured_on, source=source, **fields)
