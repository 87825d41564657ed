"""Fuzz: ``explorer place`` model terms built from their grammar, ``ID[:QUANT][:CONTEXT[/MIN]][xREPLICAS][@phase,...]``.

Each case writes one to four terms whose contexts, floors and replica counts are drawn from the boundaries
(0, 1, 4096k, 2^31, 10^30 and longer) and whose phases and ids are sometimes hostile, then goes where
``explorer place`` takes them: :func:`parse_model_term`, the demand of a small model on the cluster's GPU
(:func:`demand_for`, vLLM or llama.cpp), and :func:`place` on a fleet drawn from a few clusters. Each case
ends in a typed error or a placement whose figures are all finite and ≥ 0, quickly. Issue 25: a huge number
in a place term crashed.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from support.fuzz import Tally, bad_figures, bounded_memory, cases, rng

from explorer.errors import ModelTermError
from explorer.fleet.footprints import demand_for, fleet_cards, unique_names
from explorer.fleet.place import parse_model_term, place
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot

MODEL = "Qwen/Qwen3-0.6B"
CLUSTERS = ("1x2xh100-80g", "1x1xrtx4090-24g", "2x4xa100-40g,free=2", "1xm4-max-128g", "1xcpu-256g")
COUNTS = (
    "0", "1", "2", "3", "8", "32", "128", "4096", "65536", "999999999", "2147483648", "1" + "0" * 12,
    "1" + "0" * 30, "9" * 80, "00", "",
)  # fmt: skip
IDS = (MODEL, "org/name", "a:b", "model-x2", "x", "", "a b", "a,b", "a@b", ":", "Qwen/Qwen3-0.6B:Q4_K_M")
PHASES = ("ingest", "query", "a-b_c", "", "1x", "a b", "é", "x" * 200)


def _number(r: random.Random) -> str:
    return r.choice(COUNTS[1:8]) if r.random() < 0.7 else r.choice(COUNTS)


def model_term(r: random.Random) -> str:
    """One term from the grammar, with hostile numbers; sometimes one character changed."""
    text = MODEL if r.random() < 0.85 else r.choice(IDS)
    if r.random() < 0.7:
        text += f":{_number(r)}{r.choice(('', 'k', 'K'))}"
        if r.random() < 0.4:
            text += f"/{_number(r)}{r.choice(('', 'k'))}"
    if r.random() < 0.5:
        text += f"{r.choice('xX')}{_number(r)}"
    if r.random() < 0.3:
        text += "@" + ",".join(r.choice(PHASES) for _ in range(r.choice((1, 2, 3))))
    if r.random() < 0.05:
        i = r.randrange(len(text))
        text = text[:i] + r.choice(":/x@,k0 9") + text[i + 1 :]
    return text


def _place(terms: list[str], cluster_text: str, engine: str, shape):
    offer = fleet_cards(parse_cluster(cluster_text))
    parsed = [parse_model_term(t) for t in terms]
    names = unique_names([t.model_id for t in parsed])
    models = [
        demand_for(shape, t, gpu=offer.gpu, engine=engine, rank=rank, name=name)
        for rank, (t, name) in enumerate(zip(parsed, names, strict=True))
    ]
    placement = place(models, offer.cards, unified_budget_bytes=offer.unified_budget_bytes)
    return [dataclasses.asdict(m) for m in models], [len(i.cards) for i in placement.instances]  # -1: the pool


def test_place_terms_from_the_grammar_end_in_typed_errors_or_sane_figures():
    r, tally = rng("place-terms"), Tally("place terms")
    shape = load_snapshot().shape(MODEL)
    with bounded_memory():
        for i in range(cases(400)):
            terms = [model_term(r) for _ in range(r.choice((1, 1, 2, 4)))]
            cluster, engine = r.choice(CLUSTERS), r.choice(("vllm", "llamacpp"))
            tally.run(
                f"case {i}: {terms!r} on {cluster} ({engine})",
                lambda t=terms, c=cluster, e=engine: _place(t, c, e, shape),
                bad_figures,
            )
    print(tally.report())
    assert not tally.failures, tally.report()
    assert tally.results > tally.runs // 10 and sum(tally.typed.values()) > tally.runs // 10


def test_numbers_of_a_term_are_bounded():
    assert parse_model_term("m:1048576k/1kx100000").replicas == 100_000  # 2^30 tokens, the most
    for text, says in (
        ("m:1048577k", "the context 1048577k is out of range: 1 to 1,073,741,824"),
        ("m:8k/" + "9" * 5000, "the context floor a 5,000-digit number is out of range"),  # int() would refuse
        ("mx" + "1" + "0" * 30, "replicas a 31-digit number is out of range: 1 to 100,000"),
        ("mx0", "replicas 0 is out of range"),
        ("m:0", "the context 0 is out of range"),
    ):
        with pytest.raises(ModelTermError, match=says):
            parse_model_term(text)
