"""Property tests for the placement planner (hypothesis).

Invariants: no card runs past its usable room except under a reported tight
model, and then by exactly the reported shortfall; the result ignores input
order; every byte figure is a non-negative int; charges add up; swap groups
only hold models that never share a phase; a placement turned into a manual
plan checks clean; hostile parser input raises typed errors only.
"""

from __future__ import annotations

import contextlib
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.errors import ManualPlanError, ModelTermError
from explorer.fleet.place import (
    POOL_INDEX,
    Card,
    ModelDemand,
    ModelTerm,
    Placement,
    check_plan,
    parse_model_term,
    parse_plan,
    place,
    plan_from_placement,
)
from explorer.units import GiB, KiB, MiB

PHASES = ["ingest", "query", "vision"]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def demands(draw, max_models: int = 8) -> list[ModelDemand]:
    count = draw(st.integers(1, max_models))
    out = []
    for i in range(count):
        context = draw(st.integers(0, 131_072))
        floor = draw(st.one_of(st.none(), st.integers(0, context)))
        out.append(
            ModelDemand(
                name=f"m{i}",
                weights_bytes=draw(st.integers(0, 100 * GiB)),
                fixed_bytes_per_card=draw(st.sampled_from([0, 512 * MiB, GiB, 3 * GiB])),
                kv_bytes_per_token=draw(st.sampled_from([0, 32 * KiB, 128 * KiB, 320 * KiB])),
                context_tokens=context,
                min_context_tokens=floor,
                replicas=draw(st.integers(1, 3)),
                phases=frozenset(draw(st.lists(st.sampled_from(PHASES), max_size=2))),
                rank=draw(st.integers(0, 2)),
            )
        )
    return out


@st.composite
def fleets(draw, max_cards: int = 8) -> list[Card]:
    count = draw(st.integers(1, max_cards))
    sizes = draw(
        st.lists(
            st.one_of(st.sampled_from([0, 8 * GiB, 24 * GiB, 80 * GiB]), st.integers(0, 96 * GiB)),
            min_size=count,
            max_size=count,
        )
    )
    indices = draw(st.lists(st.integers(0, 63), min_size=count, max_size=count, unique=True))
    return [Card(index=i, usable_bytes=s) for i, s in zip(indices, sizes, strict=True)]


@st.composite
def crowded(draw) -> tuple[list[ModelDemand], list[Card]]:
    """Few small cards and many single-phase models: swap groups and tight models side by side."""
    models = [
        ModelDemand(
            name=f"m{i}",
            weights_bytes=draw(st.integers(0, 40)) * GiB // 2,
            fixed_bytes_per_card=draw(st.sampled_from([0, GiB])),
            kv_bytes_per_token=draw(st.sampled_from([0, 128 * KiB])),
            context_tokens=draw(st.sampled_from([0, 8_192, 32_768])),
            replicas=draw(st.integers(1, 3)),
            phases=frozenset(draw(st.lists(st.sampled_from("abcde"), max_size=1))),
            rank=draw(st.integers(0, 1)),
        )
        for i in range(draw(st.integers(2, 9)))
    ]
    cards = [Card(index=i, usable_bytes=draw(st.integers(0, 24)) * GiB) for i in range(draw(st.integers(1, 4)))]
    return models, cards


def _all_byte_figures(p: Placement) -> list[object]:
    figures: list[object] = []
    for i in p.instances:
        figures += [*i.split_bytes, *i.shard_bytes, i.charged_bytes, i.context_tokens, i.fixed_bytes_per_card]
    for g in p.swap_groups:
        figures += list(g.charge_bytes)
    for t in p.tight:
        figures.append(t.shortfall_bytes)
    for r in p.refused:
        figures += [r.need_bytes, r.free_bytes]
    for c in p.cards:
        figures += [c.usable_bytes, c.charged_bytes, c.free_bytes, c.overflow_bytes]
    return figures


@FAST
@given(demands(), fleets())
def test_overruns_are_exactly_the_reported_shortfalls(models, cards):
    p = place(models, cards)
    tight_cards = {c for t in p.tight for c in t.cards}
    overrun = {c.index: c.overflow_bytes for c in p.cards if c.overflow_bytes}
    assert set(overrun) <= tight_cards
    assert sum(overrun.values()) == sum(t.shortfall_bytes for t in p.tight)
    assert all(t.shortfall_bytes > 0 for t in p.tight)
    assert not p.refused
    # every model is placed, with at least its first instance
    assert {i.model for i in p.instances} == {m.name for m in models}


@FAST
@given(demands(), fleets(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(models, cards, rnd: random.Random):
    shuffled_models, shuffled_cards = list(models), list(cards)
    rnd.shuffle(shuffled_models)
    rnd.shuffle(shuffled_cards)
    assert place(models, cards) == place(shuffled_models, shuffled_cards)


@FAST
@given(demands(), fleets(), st.one_of(st.none(), st.integers(0, 200 * GiB)))
def test_every_byte_figure_is_a_non_negative_int(models, cards, budget):
    p = place(models, cards, unified_budget_bytes=budget)
    assert all(type(x) is int and x >= 0 for x in _all_byte_figures(p))


@FAST
@given(demands(), fleets())
def test_card_charges_add_up_from_instances_and_groups(models, cards):
    p = place(models, cards)
    grouped = {m for g in p.swap_groups for m in g.members}
    expected = {c.index: 0 for c in p.cards}
    for i in p.instances:
        if i.model not in grouped:
            for card, b in zip(i.cards, i.split_bytes, strict=True):
                expected[card] += b
    for g in p.swap_groups:
        for card, b in zip(g.cards, g.charge_bytes, strict=True):
            expected[card] += b
    assert {c.index: c.charged_bytes for c in p.cards} == expected
    # each instance's split: fixed cost on every card, shards add to weights + KV at its context
    by_name = {m.name: m for m in models}
    for i in p.instances:
        m = by_name[i.model]
        assert sum(i.shard_bytes) == m.shard_bytes_at(i.context_tokens)
        assert m.floor_context_tokens <= i.context_tokens <= m.context_tokens
        assert len(set(i.cards)) == len(i.cards)


@FAST
@given(demands(), fleets())
def test_swap_groups_hold_only_phase_disjoint_single_instances(models, cards):
    p = place(models, cards)
    by_name = {m.name: m for m in models}
    for g in p.swap_groups:
        assert len(g.members) >= 2
        for a in g.members:
            assert len(p.instances_of(a)) == 1
            for b in g.members:
                assert a == b or by_name[a].never_runs_with(by_name[b])


@FAST
@given(crowded())
def test_overruns_stay_exact_when_swap_groups_and_tight_models_mix(case):
    models, cards = case
    test_overruns_are_exactly_the_reported_shortfalls.hypothesis.inner_test(models, cards)
    test_card_charges_add_up_from_instances_and_groups.hypothesis.inner_test(models, cards)
    test_swap_groups_hold_only_phase_disjoint_single_instances.hypothesis.inner_test(models, cards)


@FAST
@given(demands(), fleets())
def test_a_placement_as_a_manual_plan_checks_clean(models, cards):
    p = place(models, cards)
    violations = check_plan(plan_from_placement(p), models, cards)
    if not p.tight:
        assert violations == []
    else:
        assert violations and {v.model for v in violations} <= {t.model for t in p.tight}


@FAST
@given(demands(), st.integers(0, 200 * GiB))
def test_unified_budget_never_overruns(models, budget):
    p = place(models, [], unified_budget_bytes=budget)
    (pool,) = p.cards
    assert pool.index == POOL_INDEX and pool.charged_bytes <= budget and not p.tight
    placed = {i.model for i in p.instances}
    assert placed | {r.model for r in p.refused} == {m.name for m in models}
    assert not placed & {r.model for r in p.refused}


@FAST
@given(demands(max_models=4), fleets(max_cards=4), st.integers(0, 40 * GiB))
def test_more_room_never_raises_a_lone_models_shortfall(models, cards, extra):
    # For one model alone, growing every card can only shrink (or clear) its shortfall.
    one = models[:1]
    small = place(one, cards)
    big = place(one, [Card(index=c.index, usable_bytes=c.usable_bytes + extra) for c in cards])
    assert big.shortfall_bytes <= small.shortfall_bytes


@settings(max_examples=300, deadline=None)
@given(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_./-]{0,20}[A-Za-z]", fullmatch=True),
    st.one_of(st.none(), st.integers(1, 10**7)),
    st.integers(1, 64),
    st.frozensets(st.sampled_from(PHASES)),
)
def test_model_term_round_trips(model_id, context, replicas, phases):
    text = model_id + (f":{context}" if context else "") + (f"x{replicas}" if replicas > 1 else "")
    text += ("@" + ",".join(sorted(phases))) if phases else ""
    assert parse_model_term(text) == ModelTerm(
        model_id=model_id, context_tokens=context, replicas=replicas, phases=phases
    )


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_hostile_model_terms_raise_typed_errors(text):
    try:
        term = parse_model_term(text)
    except ModelTermError:
        return
    assert term.model_id and term.replicas >= 1


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_plan_keys = st.sampled_from(
    [
        "models",
        "swap_groups",
        "cards",
        "card",
        "devices",
        "ratio",
        "tensor_split",
        "replicas",
        "context",
        "chat",
        "ocr",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_plan_keys, _json, max_size=4) | _json)
def test_hostile_plans_raise_typed_errors(data):
    with contextlib.suppress(ManualPlanError):
        parse_plan(data)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["chat", "ocr", "embed"]),
        st.fixed_dictionaries(
            {"cards": st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True)},
            optional={"replicas": st.integers(1, 3)},
        ),
        min_size=1,
    ),
    demands(max_models=3),
    fleets(max_cards=4),
)
def test_check_plan_never_raises_on_well_formed_plans(data, models, cards):
    models = [
        ModelDemand(name=n, weights_bytes=m.weights_bytes, fixed_bytes_per_card=m.fixed_bytes_per_card)
        for n, m in zip(["chat", "ocr", "embed"], models, strict=False)
    ]
    violations = check_plan(parse_plan(data), models, cards)
    assert all(v.message and (v.kind != "overflow" or v.need_bytes > v.room_bytes) for v in violations)
