"""Published throughput at concurrency against the load model: each row planned and sized as ``explorer size``
would.

A row of ``data/published_throughput.csv`` is a serving benchmark: a model on ``n`` cards at tensor
parallelism ``tp``, ``B`` requests in flight, prompts of ``P`` tokens and answers of ``A``, and the output
tokens a second it measured (with its TPOT and TTFT where published). The row is planned on its cluster
(the first way at its ``tp`` gives the KV cache's capacity at ``P + A`` tokens) and sized by
:mod:`explorer.speed.load`:

- **estimate**: a closed loop of ``B`` requests on one replica (:meth:`~explorer.speed.load.ReplicaLoad.serve`:
  ``b = min(B, capacity)`` run, the rest queue): ``B × A / (TTFT + A × TPOT(b))``, the TTFT with the queue's
  wait (the same ``b × A / (TTFT(b) + A × TPOT(b))`` as without it: waiting adds latency, not tokens);
- **bound**: ``B × A / max(A × decode cycle bound(B), B × prefill bound)``: the cards must at least read the
  weights and KV ``A`` times for the batch's answers and compute the ``B`` prompts; no efficiency, no floor,
  no capacity (explorer's own memory figures never lower it).

The model, card, quant and engine names map as in :mod:`explorer.speed.published`; a third of the rows are
kept out (:func:`explorer.speed.published.kept_out`, the same hash), and nothing here is fitted.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer.artifacts.offer import plan_artifacts
from explorer.engines.request import PlanRequest
from explorer.errors import CatalogueError
from explorer.hardware.catalogue import Catalogue
from explorer.hardware.cluster_text import parse_cluster_spec
from explorer.plan.planner import plan
from explorer.speed.load import replica_load
from explorer.speed.published import ENGINES, GPUS, MODELS, OWN, QUANTS
from explorer.speed.workload import Workload

__all__ = [
    "CLOSE", "ThroughputComparison", "ThroughputRow", "compare_all", "compare_throughput", "parse_throughput", "unmapped_row",
]  # fmt: skip

#: an estimate within this factor of the measurement, either way, counts as close (the issue's goal: 80 % of the
#: kept-out rows)
CLOSE = 1.5
_INTS = ("n_gpus", "tp", "concurrency", "prompt_tokens", "answer_tokens")
_TEXTS = ("source_id", "engine", "model", "quant", "kv_dtype", "gpu")


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputRow:
    """One published serving benchmark.

    Attributes:
        source_id: the row's id.
        engine: the engine measured, as the source names it.
        model: the model, as the source names it (:data:`~explorer.speed.published.MODELS`).
        quant: the weights' format (:data:`~explorer.speed.published.QUANTS`).
        kv_dtype: the KV cache type (``auto``: the model's).
        gpu: the card (:data:`~explorer.speed.published.GPUS`).
        n_gpus: cards used.
        tp: tensor-parallel size.
        concurrency: requests in flight (a static batch for offline runs).
        prompt_tokens: prompt tokens a request (the mean).
        answer_tokens: answer tokens a request (the mean).
        measured_output_tokens_per_s: output tokens a second over all cards.
        measured_tpot_ms: the mean time per output token (None: not published).
        measured_ttft_ms: the mean (or, where the source gives only that, the median) time to first token
            (None: not published).
        source: where the figures come from.
    """

    source_id: str
    engine: str
    model: str
    quant: str
    kv_dtype: str
    gpu: str
    n_gpus: int
    tp: int
    concurrency: int
    prompt_tokens: int
    answer_tokens: int
    measured_output_tokens_per_s: float
    measured_tpot_ms: float | None
    measured_ttft_ms: float | None
    source: str


def parse_throughput(text: str, *, source: str = "published throughput") -> tuple[ThroughputRow, ...]:
    """The rows of a published-throughput CSV (the columns of ``data/published_throughput.csv``).

    Raises:
        CatalogueError: a column is missing or a number does not read.
    """
    reader = csv.DictReader(io.StringIO(text))
    needed = (*_TEXTS, *_INTS, "measured_output_tokens_per_s", "measured_tpot_ms")
    missing = [c for c in needed if c not in (reader.fieldnames or ())]
    if missing:
        raise CatalogueError(f"{source} lacks the columns {', '.join(missing)}")
    rows = []
    for n, r in enumerate(reader, start=2):
        try:
            rows.append(
                ThroughputRow(
                    **{k: r[k].strip() for k in _TEXTS},
                    **{k: int(r[k]) for k in _INTS},
                    measured_output_tokens_per_s=float(r["measured_output_tokens_per_s"]),
                    measured_tpot_ms=_optional(r["measured_tpot_ms"]),
                    measured_ttft_ms=_optional(r.get("measured_ttft_ms")),
                    source=f"{r.get('source_url', '')} {r.get('source_place', '')}".strip(),
                )
            )
        except ValueError as e:
            raise CatalogueError(f"{source} line {n} ({r.get('source_id', '?')}): {e}") from None
    return tuple(rows)


def _optional(text: str | None) -> float | None:
    return float(text) if text and text.strip() else None


def unmapped_row(row: ThroughputRow) -> str | None:
    """Why a row cannot be compared (no config, card or precision for it), or None."""
    if row.model not in MODELS:
        return f"model {row.model} has no config"
    if row.gpu not in GPUS:
        return f"{row.gpu} is not in data/gpus.csv"
    if row.quant not in QUANTS:
        return f"quant {row.quant} has no precision"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputComparison:
    """A row against the load model.

    Attributes:
        row: the published row.
        option: the way it was planned (engine, layout, precision).
        capacity: the sequences explorer's KV cache holds at prompt + answer tokens.
        bound_tokens_per_s: output tokens a second, at most.
        estimate_tokens_per_s: output tokens a second, the estimate.
        estimate_tpot_ms: a user's time per output token, the estimate.
        estimate_ttft_ms: the time to first token, the estimate (the wait for the KV cache included).
        queued: requests the estimate has waiting for room in the KV cache.
    """

    row: ThroughputRow
    option: object
    capacity: int
    bound_tokens_per_s: float
    estimate_tokens_per_s: float
    estimate_tpot_ms: float
    estimate_ttft_ms: float
    queued: int

    @property
    def bound_ratio(self) -> float:
        """Bound / measured (never below 1 if the bound holds)."""
        return self.bound_tokens_per_s / self.row.measured_output_tokens_per_s

    @property
    def estimate_ratio(self) -> float:
        """Estimate / measured."""
        return self.estimate_tokens_per_s / self.row.measured_output_tokens_per_s

    @property
    def close(self) -> bool:
        """The estimate is within :data:`CLOSE` × of the measurement, either way."""
        return 1 / CLOSE <= self.estimate_ratio <= CLOSE


def compare_throughput(row: ThroughputRow, shape, catalogue: Catalogue) -> ThroughputComparison | None:
    """Plan and size a mapped row (``shape``: :data:`~explorer.speed.published.MODELS`' repository's); None when
    no way runs it at its tensor parallelism on its cards."""
    engine = ENGINES.get(row.engine, "vllm")
    cluster = parse_cluster_spec(f"1x{row.n_gpus}x{GPUS[row.gpu]}", catalogue)
    quant = QUANTS[row.quant]
    artifacts = None if quant == OWN else plan_artifacts(shape, (), quant=quant)
    prompt, answer, batch = row.prompt_tokens, row.answer_tokens, row.concurrency
    request = PlanRequest(context_tokens=prompt + answer, engines=(engine,), kv_dtype=row.kv_dtype,  # type: ignore[arg-type]
                          tensor_parallel_size=row.tp)  # fmt: skip
    result = plan(shape, cluster, request, artifacts=artifacts, model_ref=shape.name or row.model, speed=False,
                  suggest=False, catalogue=catalogue)  # fmt: skip
    option = next((o for o in result.options if o.layout.tp == row.tp and o.layout.cards == row.n_gpus), None)
    workload = Workload(users=batch, prompt_tokens=prompt, answer_tokens=answer)
    load = None if option is None else replica_load(option, shape, workload, request)
    if load is None:
        return None
    point = load.serve(batch)
    decode_bound = load.step(batch)[1]
    return ThroughputComparison(
        row=row,
        option=option,
        capacity=load.capacity,
        bound_tokens_per_s=batch * answer / max(answer * decode_bound, batch * load.prefill_bound_s),
        estimate_tokens_per_s=batch * answer / (point.ttft_s + answer * point.tpot_s),
        estimate_tpot_ms=point.tpot_s * 1e3,
        estimate_ttft_ms=point.ttft_s * 1e3,
        queued=point.queued,
    )


def compare_all(
    rows: Sequence[ThroughputRow], shape_of: Callable[[str], object], catalogue: Catalogue
) -> tuple[list[ThroughputComparison], list[str]]:
    """Every row compared (``shape_of``: a repository of :data:`~explorer.speed.published.MODELS` → its shape),
    and a line for each row that could not be."""
    done, skipped = [], []
    for row in rows:
        if (why := unmapped_row(row)) is not None:
            skipped.append(f"{row.source_id}: {why}")
            continue
        got = compare_throughput(row, shape_of(MODELS[row.model]), catalogue)
        if got is None:
            skipped.append(f"{row.source_id}: no way at tp {row.tp} on {row.n_gpus} cards")
        else:
            done.append(got)
    return done, skipped
