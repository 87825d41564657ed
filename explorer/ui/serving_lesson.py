"""Serving many users from one card, for the teaching notebook ``notebooks/serving.py``.

Every figure is the sizing's own (:mod:`explorer.speed.load`): the planner places the model on one card with
vLLM at the workload's prompt + answer tokens (its KV cache gives the most sequences the card holds), and the
load model gives, for each batch, a user's time per output token (the decode step plus the prompts of the
requests that replace the finished ones), the time to first token, and the tokens a second the card serves.
This module sweeps the batch and writes the rows the lesson's charts and sentences read, e.g. Llama-3.1-8B at
bf16 on an H100, prompts of 2,000 and answers of 500: ``TPOT(B) = d(B) + (B / 500) × p``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from explorer.artifacts.offer import plan_artifacts
from explorer.datafiles import data_path
from explorer.engines.request import PlanRequest
from explorer.errors import CatalogueError
from explorer.plan.planner import plan
from explorer.plan.throughput_check import ThroughputRow, compare_all, parse_throughput
from explorer.sources.shipped import parse_cluster, read_user_text, shipped_catalogue, shipped_prices
from explorer.speed.load import ReplicaLoad, Sizing, replica_load, size_option
from explorer.speed.published import kept_out
from explorer.speed.workload import Workload
from explorer.ui.speed_lesson import CARDS, LESSON_MODELS, PRECISIONS

__all__ = [
    "BATCH_STEPS",
    "CARDS",
    "LESSON_MODELS",
    "PRECISIONS",
    "Replica",
    "ServingDefaults",
    "frontier_rows",
    "published_rows",
    "published_throughput",
    "replica",
]

#: the batches the sweep visits: sequences decoding together on the card
BATCH_STEPS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
#: the engine the lesson plans with
ENGINE = "vllm"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingDefaults:
    """What the lesson opens on (tests replace it through ``app.run(defs={"defaults": …})``).

    Attributes:
        model: the snapshot repository.
        gpu_class: the card.
        precision: the weights' precision (a what-if name).
        prompt_tokens: prompt tokens a request.
        answer_tokens: answer tokens a request.
        tpot_ms: the time-per-output-token target, ms.
        ttft_s: the time-to-first-token target, seconds.
        users: users with a request in flight.
    """

    model: str = "meta-llama/Meta-Llama-3.1-8B"
    gpu_class: str = "h100-80g"
    precision: str = "bf16"
    prompt_tokens: int = 2000
    answer_tokens: int = 500
    tpot_ms: int = 50
    ttft_s: float = 1.0
    users: int = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Replica:
    """The model on one card under the workload.

    Attributes:
        option: the planner's way (vLLM on one card), with its launch command.
        load: the load model of that card.
        sizing: the replicas the workload needs and what binds.
        usd_per_gpu_hour: the card's price (None: none in data/prices.csv).
    """

    option: Any
    load: ReplicaLoad
    sizing: Sizing
    usd_per_gpu_hour: float | None


def replica(shape, gpu_class: str, precision: str, workload: Workload) -> Replica | None:
    """The model at ``precision`` on one ``gpu_class`` card with vLLM, sized for ``workload``; None when it does
    not fit on the card at prompt + answer tokens."""
    request = PlanRequest(context_tokens=workload.context_tokens, engines=(ENGINE,))
    artifacts = plan_artifacts(shape, (), quant=precision)
    result = plan(shape, parse_cluster(f"1x1x{gpu_class}"), request, artifacts=artifacts, model_ref=shape.name,
                  speed=False, suggest=False, catalogue=shipped_catalogue())  # fmt: skip
    option = next((o for o in result.options if o.fits and o.layout.cards == 1), None)
    load = None if option is None else replica_load(option, shape, workload, request)
    if load is None:
        return None
    price = shipped_prices().usd_per_gpu_hour(gpu_class)
    return Replica(option=option, load=load, sizing=size_option(load, 1, price), usd_per_gpu_hour=price)


def frontier_rows(load: ReplicaLoad, steps: Sequence[int] = BATCH_STEPS) -> list[dict[str, Any]]:
    """For each batch: a user's TPOT (ms) and tokens a second, the TTFT (ms), the card's tokens a second, whether
    the KV cache holds that many sequences and whether the targets are met. Past the capacity the row is
    the figure the card would reach if it held them (drawn apart)."""
    rows = []
    for batch in steps:
        p = load.at(batch)
        rows.append(
            {
                "batch": batch,
                "tpot_ms": p.tpot_s * 1e3,
                "ttft_ms": p.ttft_s * 1e3 if p.ttft_s != float("inf") else None,
                "user_tokens_per_s": 1 / p.tpot_s,
                "gpu_tokens_per_s": batch / p.tpot_s,
                "fits": batch <= load.capacity,
                "meets": batch <= load.capacity and load.meets(p),
                "bound_by": p.step_bound_by,
            }
        )
    return rows


@cache
def published_throughput() -> tuple[ThroughputRow, ...]:
    """The published serving benchmarks shipped in ``data/published_throughput.csv`` (read once; sources per row;
    here rather than in :mod:`explorer.sources.shipped`, since the sources import nothing of ``plan``)."""
    path = data_path("published_throughput.csv")
    return parse_throughput(read_user_text(path, "the published throughput", CatalogueError), source=str(path))


def published_rows(shape_of: Callable[[str], Any]) -> list[dict[str, Any]]:
    """Every published serving benchmark of ``data/published_throughput.csv`` beside the load model's bound and
    estimate (:func:`explorer.plan.throughput_check.compare_all`; ``shape_of``: a repo's shape), in the fields
    :func:`explorer.ui.lesson_charts.published_spec` draws."""
    done, _ = compare_all(published_throughput(), shape_of, shipped_catalogue())
    rows = []
    for c in done:
        r = c.row
        rows.append(
            {
                "source": r.source_id,
                "setup": f"{r.engine} · {r.model} {r.quant} · {r.n_gpus}× {r.gpu} tp{r.tp}",
                "metric": f"output tok/s, {r.concurrency:,} in flight, {r.prompt_tokens:,} in / {r.answer_tokens:,} out",
                "measured": r.measured_output_tokens_per_s,
                "bound": c.bound_tokens_per_s,
                "estimate": c.estimate_tokens_per_s,
                "bound_ratio": c.bound_ratio,
                "estimate_ratio": c.estimate_ratio,
                "close": c.close,
                "kept_out": kept_out(r),
                "engine": r.engine.split(" ")[0],
            }
        )
    return rows
