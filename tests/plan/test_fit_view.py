"""The hardware-first view against the shipped snapshot: every model once, best first, with its best option."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.artifacts.known_model import KnownModel
from explorer.artifacts.offer import original_artifact
from explorer.engines.request import PlanRequest
from explorer.plan.fit_view import fit_row, fit_rows, summary
from explorer.sources.known_models import known_models
from explorer.sources.shipped import parse_cluster, shipped_catalogue
from explorer.sources.snapshot.read import load_snapshot

MODELS = known_models(use_cache=False).models


@pytest.fixture(scope="module")
def on_a_4090():
    return fit_rows(MODELS, parse_cluster("1x1xrtx4090-24g"), PlanRequest(), catalogue=shipped_catalogue())


def _row(rows, model):
    return next(r for r in rows if r.model == model)


def test_every_snapshot_model_has_one_row(on_a_4090):
    assert len(MODELS) == len(load_snapshot().repos) >= 80
    assert sorted(r.model for r in on_a_4090) == sorted(load_snapshot().repos)
    assert not any(r.error for r in on_a_4090)


def test_rows_fit_first_by_tier_and_the_rest_smallest_first(on_a_4090):
    fitting = [r for r in on_a_4090 if r.best is not None]
    rest = on_a_4090[len(fitting) :]
    assert all(r.best is None for r in rest) and fitting and rest
    assert [r.tier for r in fitting] == sorted(r.tier for r in fitting)
    tier_1 = [r.params for r in fitting if r.tier == 1]
    assert tier_1 == sorted(tier_1, reverse=True)  # fewest-cards: the biggest model that runs first
    assert [r.params for r in rest] == sorted(r.params for r in rest)
    counts = summary(on_a_4090)
    assert sum(counts.values()) == len(on_a_4090) and counts["tier 1"] == len(tier_1)


def test_an_8b_runs_on_one_4090_and_a_32b_gets_a_suggestion(on_a_4090):
    """Llama-3.1-8B bf16 is 16.06 GB: one 4090 (0.9 × 23.99 GiB = 21.6 GiB for vLLM) holds it with room for KV.
    Qwen3-32B bf16 is 65.5 GB: on one 4090 only a partial offload runs; int4 (about 19.4 GB) holds every layer."""
    small = _row(on_a_4090, "meta-llama/Meta-Llama-3.1-8B")
    assert small.tier == 1 and small.best.replicas == 1 and small.suggestion is None
    assert small.best.evaluation.max_context_tokens >= 4096 and small.decode_tokens_per_s > 0
    # as explorer plan does, the row widens to the quantised fallback: at 4,096 tokens the published
    # Qwen/Qwen3-32B-AWQ (19.3 GB) holds every layer on the 4090 in vLLM, but at the brim (20.6 of 21.2 GiB, one
    # sequence: issue 24's headroom rule), so the published Q4_K_M GGUF in llama.cpp (19.5 of 23.5 GiB, 4 sequences)
    # comes first; the row holds the change, so no suggestion
    widened = _row(on_a_4090, "Qwen/Qwen3-32B")
    assert widened.widened and widened.tier == 1 and widened.suggestion is None
    assert widened.best.artifact.repo == "Qwen/Qwen3-32B-GGUF" and widened.to_dict()["widened"]
    assert widened.best.precision == "Q4_K_M" and widened.best.evaluation.max_concurrency >= 2
    # the own bf16 weights alone: only a partial offload runs, and the int4 suggestion is the way forward
    model = next(m for m in MODELS if m.ref == "Qwen/Qwen3-32B")
    big = fit_row(replace(model, fallback=()), parse_cluster("1x1xrtx4090-24g"), PlanRequest())
    assert big.tier == 2 and big.best.evaluation.layers_on_host > 0 and not big.widened
    assert big.suggestion.fits and big.suggestion.kind == "precision" and big.suggestion.best.tier == 1
    out = big.to_dict()
    assert out["tier"] == 2 and out["suggestion"]["best"]["tier"] == 1 and out["suggestion"]["change"]["quant"]


def test_a_model_too_big_for_the_host_fits_nowhere_and_comes_last(on_a_4090):
    """405B bf16 is 811.7 GB: neither the 4090 nor 64 GiB of host RAM (assumed) hold it, at any GGUF quant either
    (Q2_K: 170 GB)."""
    row = _row(on_a_4090, "meta-llama/Meta-Llama-3.1-405B")
    assert row.best is None and row.to_dict()["fits"] is False
    assert on_a_4090.index(row) > max(i for i, r in enumerate(on_a_4090) if r.best is not None)


def test_goal_orders_the_fitting_rows():
    rows = fit_rows(MODELS[:20], parse_cluster("1x1xh100-80g"), PlanRequest(), goal="fastest")
    speeds = [r.decode_tokens_per_s for r in rows if r.tier == 1]
    assert speeds == sorted(speeds, reverse=True)


def test_a_model_that_cannot_be_planned_is_a_row_with_its_error():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    model = KnownModel(ref="x/8b", shape=shape, artifacts=(original_artifact(shape),))
    # (a context of 0 is refused where the request is made, before any model: PlanRequest checks its numbers)
    row = fit_row(model, parse_cluster("1x1xh100-80g"), PlanRequest(engines=("tgi",)))
    assert row.best is None and row.error == "unknown engine 'tgi' (engines: vllm, sglang, llamacpp)"


def test_the_fallback_is_made_only_for_a_model_that_needs_it():
    """Listing 81 models makes no fallback up front: a callable is called only when the own weights keep no all-GPU
    layout. Llama-3.1-8B fits one H100, so its fallback is never asked for; Qwen3-32B's bf16 on a 4090 asks once."""
    calls = []

    def made(name):
        def fallback():
            calls.append(name)
            return ()

        return fallback

    small = next(m for m in MODELS if m.ref == "meta-llama/Meta-Llama-3.1-8B")
    big = next(m for m in MODELS if m.ref == "Qwen/Qwen3-32B")
    fit_row(replace(small, fallback=made("8B")), parse_cluster("1x1xh100-80g"), PlanRequest())
    fit_row(replace(big, fallback=made("32B")), parse_cluster("1x1xrtx4090-24g"), PlanRequest())
    assert calls == ["32B"]
