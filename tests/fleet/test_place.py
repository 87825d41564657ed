"""Tests for explorer/fleet/place.py (and its placement_* modules), with worked byte figures.

Figures are in GiB (1024**3 bytes) in the comments; the assertions are exact
integer bytes.
"""

from __future__ import annotations

import json

import pytest

from explorer.errors import (
    ManualPlanError,
    ModelTermError,
    PlacementError,
    PlacementInputError,
    PlanDoesNotFitError,
)
from explorer.fleet.place import (
    POOL_INDEX,
    Card,
    ManualPlan,
    ModelDemand,
    ModelTerm,
    PlanEntry,
    charge_order,
    check_plan,
    parse_model_term,
    parse_plan,
    parse_plan_text,
    place,
    plan_from_placement,
    plan_to_dict,
    validate_plan,
)
from explorer.fleet.split import apportion
from explorer.fleet.text import describe_placement
from explorer.units import GiB, KiB


def model(name: str, weights_gib: float = 1, **over) -> ModelDemand:
    """A demand with defaults: ``weights_gib`` GiB of weights, nothing else."""
    return ModelDemand(name=name, weights_bytes=int(weights_gib * GiB), **over)


def cards(*usable_gib: float) -> list[Card]:
    return [Card(index=i, usable_bytes=int(g * GiB)) for i, g in enumerate(usable_gib)]


def where(placement, name: str) -> list[tuple[int, ...]]:
    return [i.cards for i in placement.instances_of(name)]


# --- one card each, and sharing -------------------------------------------------------------


def test_small_models_share_cards_most_free_room_first():
    # Two 24 GiB cards; charged largest first: a 10, b 8, c 6, d 4.
    # a -> card 0 (24 = 24, lower index wins), rooms 14 / 24
    # b -> card 1 (24 > 14),                   rooms 14 / 16
    # c -> card 1 (16 > 14),                   rooms 14 / 10
    # d -> card 0 (14 > 10),                   rooms 10 / 10
    p = place([model("d", 4), model("b", 8), model("a", 10), model("c", 6)], cards(24, 24))
    assert [(i.model, i.cards) for i in p.instances] == [("a", (0,)), ("b", (1,)), ("c", (1,)), ("d", (0,))]
    assert [c.charged_bytes for c in p.cards] == [14 * GiB, 14 * GiB]
    assert [c.free_bytes for c in p.cards] == [10 * GiB, 10 * GiB]
    assert p.cards[0].models == ("a", "d") and p.cards[1].models == ("b", "c")
    assert not p.swap_groups and not p.tight and not p.refused


def test_rank_beats_size():
    # rank 0 goes first though smaller: small takes card 0 (16 = 16), big then
    # needs 12 and card 1 (16) is the one with the most room.
    p = place([model("big", 12, rank=1), model("small", 2, rank=0)], cards(16, 16))
    assert where(p, "small") == [(0,)] and where(p, "big") == [(1,)]
    assert [m.name for m in charge_order([model("b", 3), model("a", 3), model("c", 5)])] == ["c", "a", "b"]


# --- splits ---------------------------------------------------------------------------------


def test_split_charges_each_card_its_share_plus_the_fixed_cost():
    # 30 GiB of weights, 2 GiB fixed per card, cards of 24 and 12 GiB.
    # One card: 32 > 24. Two: proportional 24:12 -> 20 + 2 = 22 <= 24, 10 + 2 = 12 <= 12.
    p = place([model("m", 30, fixed_bytes_per_card=2 * GiB)], cards(12, 24))
    (inst,) = p.instances
    assert inst.cards == (1, 0) and inst.ratio_rule == "proportional"
    assert inst.split_bytes == (22 * GiB, 12 * GiB) and inst.shard_bytes == (20 * GiB, 10 * GiB)
    assert [c.charged_bytes for c in p.cards] == [
        12 * GiB,
        22 * GiB,
    ]  # its own share each, not the 34 GiB sum


def test_split_ratio_shifts_toward_the_roomiest_card_when_the_fixed_cost_breaks_proportional():
    # Cards with 40 and 20 GiB; 40 GiB weights + 8 GiB KV (256 KiB x 32,768 tokens)
    # = S 48 GiB to split, F 5 GiB fixed per card. One card: 53 > 40.
    # Proportional 40:20 -> card 0: 32 + 5 = 37 <= 40, card 1: 16 + 5 = 21 > 20. Fails
    # on the small card only because F comes on top of its share.
    # Shifted (room - F) 35:15 -> 33.6 + 5 = 38.6 <= 40 and 14.4 + 5 = 19.4 <= 20. Fits.
    m = model("m", 40, fixed_bytes_per_card=5 * GiB, kv_bytes_per_token=256 * KiB, context_tokens=32_768)
    assert m.shard_bytes_at(32_768) == 48 * GiB
    p = place([m], cards(40, 20))
    (inst,) = p.instances
    assert inst.ratio_rule == "shifted" and inst.cards == (0, 1)
    big = 48 * GiB * 35 // 50  # 33.6 GiB = 36,077,725,286 bytes, floor
    assert big == 36_077_725_286
    assert inst.split_bytes == (big + 5 * GiB, 48 * GiB - big + 5 * GiB)
    assert all(c.overflow_bytes == 0 for c in p.cards)
    # With F = 4 GiB the proportional ratio already fits: 32 + 4 = 36, 16 + 4 = 20.
    p4 = place(
        [model("m", 40, fixed_bytes_per_card=4 * GiB, kv_bytes_per_token=256 * KiB, context_tokens=32_768)],
        cards(40, 20),
    )
    assert p4.instances[0].ratio_rule == "proportional"
    assert p4.instances[0].split_bytes == (36 * GiB, 20 * GiB)


def test_split_uses_the_fewest_cards():
    # 50 GiB on four 24 GiB cards: 2 cards hold 48 < 50, 3 hold 72 -> three cards.
    p = place([model("m", 50)], cards(24, 24, 24, 24))
    assert where(p, "m") == [(0, 1, 2)]
    assert p.instances[0].split_bytes == apportion(50 * GiB, (24, 24, 24))


def test_an_even_split_takes_only_a_tensor_parallel_size_the_engine_accepts():
    """50 GiB evenly on four 24 GiB cards: three would hold it (72 GiB), but a 64-head model cannot run at tp 3
    (widths 1, 2, 4, 8 …): it takes four cards, 12.5 GiB each."""
    p = place([model("m", 50, even_split=True, widths=(1, 2, 4, 8))], cards(24, 24, 24, 24))
    assert where(p, "m") == [(0, 1, 2, 3)]
    assert p.instances[0].split_bytes == (int(12.5 * GiB),) * 4


def test_a_tight_even_split_keeps_to_a_tensor_parallel_size():
    """100 GiB evenly over three useful 24 GiB cards and a full one: tp 3 is refused, so the tight layout takes
    the two roomiest, 50 GiB each: 26 GiB over on each, 52 GiB short."""
    p = place([model("m", 100, even_split=True, widths=(1, 2, 4))], cards(24, 24, 24, 0))
    (t,) = p.tight
    assert t.cards == (0, 1) and t.shortfall_bytes == 52 * GiB


def test_an_even_split_spans_nodes_only_over_a_fabric():
    """Two nodes of four 24 GiB cards. 150 GiB at tp 8 needs both nodes (8 × 24 = 192 GiB): over a shared fabric it
    takes all eight cards; on nodes that share none, tensor parallelism cannot span them, so it is tight on one
    node's four (150 − 96 = 54 GiB short)."""
    demand = model("m", 150, even_split=True, widths=(1, 2, 4, 8))

    def fleet(span_of):
        return [Card(index=i, usable_bytes=24 * GiB, gpu_class="x", span=span_of(i)) for i in range(8)]

    spanned = place([demand], fleet(lambda i: "x on ib0"))
    assert where(spanned, "m") == [tuple(range(8))] and not spanned.tight
    apart = place([demand], fleet(lambda i: f"x on node{i // 4}"))
    (t,) = apart.tight
    assert t.cards == (0, 1, 2, 3) and t.shortfall_bytes == 54 * GiB


def test_widths_must_be_ascending_counts():
    with pytest.raises(PlacementInputError, match="widths must be ascending"):
        model("m", 1, widths=(2, 1))


def test_apportion_sums_exactly():
    assert apportion(10, (1, 1, 1)) == (3, 3, 4)
    assert apportion(7, (0, 5)) == (0, 7)


# --- context targets --------------------------------------------------------------------------


def test_context_target_widens_a_split_that_would_starve_the_context():
    # 30 GiB weights, 1 GiB fixed, 128 KiB KV per token (1 GiB per 8,192 tokens),
    # floor 8,192 tokens, target 262,144 tokens (32 GiB of KV); three 24 GiB cards.
    # 1 card: room past fixed 23 < 30 + 1 -> not even the floor.
    # 2 cards: 46 - 30 = 16 GiB spare -> 131,072 tokens: holds the floor, short of the target.
    # 3 cards: 69 - 30 = 39 GiB spare -> 319,488 tokens, capped at 262,144: reaches it.
    m = model(
        "chat",
        30,
        fixed_bytes_per_card=GiB,
        kv_bytes_per_token=128 * KiB,
        context_tokens=262_144,
        min_context_tokens=8_192,
    )
    p = place([m], cards(24, 24, 24))
    (inst,) = p.instances
    assert inst.cards == (0, 1, 2) and inst.context_tokens == 262_144
    # S = 30 + 32 = 62 GiB split evenly; 20.67 + 1 GiB per card
    assert inst.split_bytes == tuple(s + GiB for s in apportion(62 * GiB, (24, 24, 24)))
    # On two cards only, the widest split serves what it can: 131,072 tokens.
    p2 = place([m], cards(24, 24))
    assert p2.instances[0].context_tokens == 131_072 and p2.instances[0].cards == (0, 1)


def test_fixed_context_takes_the_fewest_cards_that_hold_it():
    # Same model with no floor: charged at 262,144 tokens, 62 GiB + 1 per card:
    # 2 cards: 46 < 62; 3 cards: 69 >= 62.
    m = model("chat", 30, fixed_bytes_per_card=GiB, kv_bytes_per_token=128 * KiB, context_tokens=262_144)
    assert place([m], cards(24, 24, 24)).instances[0].cards == (0, 1, 2)
    assert place([m], cards(24, 24)).tight[0].shortfall_bytes == 62 * GiB + 2 * GiB - 48 * GiB


def test_context_target_prefers_one_card_when_it_serves_the_target():
    m = model("chat", 4, kv_bytes_per_token=128 * KiB, context_tokens=32_768, min_context_tokens=4_096)
    (inst,) = place([m], cards(24, 24)).instances
    assert inst.cards == (0,) and inst.context_tokens == 32_768 and inst.split_bytes == (8 * GiB,)


# --- swap groups ------------------------------------------------------------------------------


def test_swap_group_forms_only_when_needed_and_is_charged_its_largest_member():
    chat = model("chat", 16, phases={"query"})
    ocr = model("ocr", 14, phases={"ingest"})
    # One 32 GiB card: 16 + 14 = 30 fits, no group.
    roomy = place([chat, ocr], cards(32))
    assert not roomy.swap_groups and roomy.cards[0].charged_bytes == 30 * GiB
    # One 24 GiB card: chat takes 16, ocr's 14 > 8 left; they never share a phase,
    # so ocr takes chat's room and the card is charged max(16, 14) = 16 GiB.
    tight = place([chat, ocr], cards(24))
    (group,) = tight.swap_groups
    assert group.members == ("chat", "ocr") and group.cards == (0,) and group.charge_bytes == (16 * GiB,)
    assert tight.cards[0].charged_bytes == 16 * GiB and not tight.tight


def test_swap_group_charges_the_largest_member_per_card():
    # Two 24 GiB cards. chat (query) 30 GiB: split 15 / 15. ocr (ingest) 20 GiB: 9 + 9 left,
    # no card and no split holds it; with chat refunded it takes card 0 whole.
    # Group charge: card 0 max(15, 20) = 20, card 1 max(15, 0) = 15.
    p = place([model("chat", 30, phases={"query"}), model("ocr", 20, phases={"ingest"})], cards(24, 24))
    (group,) = p.swap_groups
    assert group.cards == (0, 1) and group.charge_bytes == (20 * GiB, 15 * GiB)
    assert [c.charged_bytes for c in p.cards] == [20 * GiB, 15 * GiB]


def test_models_sharing_a_phase_never_swap():
    # embed runs always (no phases) so it cannot swap with anything; it is charged first (it runs in more
    # phases than chat), so chat, the single-phase model, is the one that goes tight.
    p = place([model("chat", 16, phases={"query"}), model("embed", 14)], cards(24))
    assert not p.swap_groups and [t.model for t in p.tight] == ["chat"]
    # Shared phase "query": no group either.
    p = place([model("a", 16, phases={"query", "ingest"}), model("b", 14, phases={"query"})], cards(24))
    assert not p.swap_groups and p.tight[0].model == "b"


def test_swap_group_keeps_only_the_partners_it_needs():
    # One 30 GiB card, largest first: a (ingest) 16 and b (vision) 12 leave 2 GiB; c (query) 10
    # does not fit. a and b never run with c nor with each other: both are refunded, c fits.
    # Then each partner is tried back on its own: b 12 + group(a, c) max(16, 10) = 28 <= 30,
    # so b is not needed; without a, 10 + 16 + 12 = 38 > 30, so a is. Group {a, c}.
    p = place(
        [
            model("a", 16, phases={"ingest"}),
            model("b", 12, phases={"vision"}),
            model("c", 10, phases={"query"}),
        ],
        cards(30),
    )
    (group,) = p.swap_groups
    assert group.members == ("a", "c") and group.charge_bytes == (16 * GiB,)
    assert p.cards[0].charged_bytes == 16 * GiB + 12 * GiB


def test_swap_partners_on_other_cards_stay_on_their_own():
    # Two 20 GiB cards: a (ingest) 12 on card 0, b (vision) 10 on card 1; rooms 8 and 10.
    # c (query, rank 1 so charged last) 19: no card, and a split holds 18 < 19. Both refunded, c takes card 0;
    # b is on card 1, which c does not use, so b is charged alone again.
    p = place(
        [
            model("a", 12, phases={"ingest"}),
            model("b", 10, phases={"vision"}),
            model("c", 19, phases={"query"}, rank=1),
        ],
        cards(20, 20),
    )
    (group,) = p.swap_groups
    assert group.members == ("a", "c") and group.cards == (0,) and group.charge_bytes == (19 * GiB,)
    assert [c.charged_bytes for c in p.cards] == [19 * GiB, 10 * GiB]


def test_unified_budget_swap_group():
    p = place(
        [model("chat", 20, phases={"query"}), model("ocr", 16, phases={"ingest"})],
        [],
        unified_budget_bytes=24 * GiB,
    )
    assert p.unified and p.swap_groups[0].charge_bytes == (20 * GiB,) and not p.refused
    assert p.cards[0].index == POOL_INDEX and p.cards[0].charged_bytes == 20 * GiB


# --- tight and refused ------------------------------------------------------------------------


def test_tight_placement_reports_its_exact_shortfall():
    # 60 GiB weights, 2 GiB fixed, cards 24, 24, 8 and 1.5 GiB.
    # Useful cards have room past the fixed cost: 24, 24, 8 (1.5 <= 2 is not).
    # Charge: 60 + 3 x 2 = 66 GiB on 56 GiB of room -> 10 GiB short.
    # Split by room past fixed 22:22:6 -> 26.4 + 2, 26.4 + 2, 7.2 + 2 GiB:
    # overruns 4.4 + 4.4 + 1.2 = 10 GiB.
    p = place([model("huge", 60, fixed_bytes_per_card=2 * GiB)], cards(24, 24, 8, 1.5))
    (t,) = p.tight
    assert t.model == "huge" and t.cards == (0, 1, 2) and t.shortfall_bytes == 10 * GiB
    assert sum(c.overflow_bytes for c in p.cards) == 10 * GiB
    assert p.cards[3].charged_bytes == 0
    assert p.instances[0].ratio_rule == "tight"


def test_tight_model_swaps_with_phase_disjoint_partners_and_keeps_its_shortfall():
    # One 24 GiB card. ocr (ingest) 10 fits. huge (query, rank 1) 30: not beside ocr (14 left),
    # not even in ocr's room (24), so it goes tight in that room: 30 - 24 = 6 GiB short,
    # and the group {ocr, huge} is charged max(10, 30) = 30: 6 GiB over, exactly the shortfall.
    # tts (vision, rank 2) 5 never runs with either, so it joins the group in its 24 GiB
    # (5 <= 24); the group's charge stays max(10, 30, 5) = 30 and the overrun stays 6.
    p = place(
        [
            model("ocr", 10, phases={"ingest"}),
            model("huge", 30, phases={"query"}, rank=1),
            model("tts", 5, phases={"vision"}, rank=2),
        ],
        cards(24),
    )
    assert [(t.model, t.shortfall_bytes) for t in p.tight] == [("huge", 6 * GiB)]
    (group,) = p.swap_groups
    assert group.members == ("ocr", "huge", "tts") and group.charge_bytes == (30 * GiB,)
    assert p.cards[0].overflow_bytes == 6 * GiB


def test_tight_on_one_card_when_no_card_has_room_past_the_fixed_cost():
    # Both cards 1 GiB, fixed cost 2 GiB: the roomiest (card 0 on a tie) alone; 5 + 2 - 1 = 6 GiB short.
    p = place([model("m", 5, fixed_bytes_per_card=2 * GiB)], cards(1, 1))
    assert p.tight[0].cards == (0,) and p.tight[0].shortfall_bytes == 6 * GiB


def test_unified_budget_refuses_instead_of_placing_tight():
    # 32 GiB pool: a (20) fits, b (16) does not: 12 GiB left. Both always run: no swap.
    p = place([model("a", 20), model("b", 16)], cards(80), unified_budget_bytes=32 * GiB)
    (r,) = p.refused
    assert r.model == "b" and r.need_bytes == 16 * GiB and r.free_bytes == 12 * GiB
    assert "16.0 GiB" in r.reason and "12.0 GiB free" in r.reason
    assert not p.tight and [i.model for i in p.instances] == ["a"]
    assert [c.index for c in p.cards] == [POOL_INDEX]


def test_unified_elastic_context_shrinks_to_fit():
    # 10 GiB weights, 1 GiB per 8,192 tokens, pool 14 GiB: 4 GiB spare -> 32,768 tokens (floor 4,096).
    m = model("chat", 10, kv_bytes_per_token=128 * KiB, context_tokens=131_072, min_context_tokens=4_096)
    (inst,) = place([m], [], unified_budget_bytes=14 * GiB).instances
    assert inst.context_tokens == 32_768 and inst.cards == (POOL_INDEX,)


# --- replicas ---------------------------------------------------------------------------------


def test_replicas_spread_before_they_stack():
    # Three 24 GiB cards; base (12) first on card 0. embed 4 GiB x 4:
    # #0 card 1 (24), #1 card 2 (fresh, 24 > card 0's 12), #2 card 0 (the last fresh card),
    # #3 stacks: every card holds one; most room is card 1 or 2 (20), lower index -> card 1.
    p = place([model("base", 12), model("embed", 4, replicas=4)], cards(24, 24, 24))
    assert where(p, "embed") == [(1,), (2,), (0,), (1,)]
    assert [i.replica for i in p.instances_of("embed")] == [0, 1, 2, 3]
    assert not p.missing_replicas


def test_replicas_stack_whole_rather_than_split_across_fresh_cards():
    # Cards 24, 6, 6; m 8 GiB x 2. #0 on card 0 (16 left). The fresh cards could only hold
    # #1 as a split (6 + 6 >= 8), card 0 holds it whole: fewest cards first, so card 0.
    p = place([model("m", 8, replicas=2)], cards(24, 6, 6))
    assert where(p, "m") == [(0,), (0,)]


def test_replicas_stop_when_room_runs_out():
    p = place([model("embed", 10, replicas=5)], cards(24, 12))
    assert where(p, "embed") == [(0,), (1,), (0,)]
    (short,) = p.missing_replicas
    assert (short.requested, short.placed) == (5, 3) and "no room" in short.reason


def test_swap_group_members_run_one_instance():
    p = place([model("chat", 16, phases={"query"}), model("ocr", 14, phases={"ingest"}, replicas=2)], cards(24))
    assert len(p.instances_of("ocr")) == 1 and "swap group" in p.missing_replicas[0].reason


# --- manual plans -----------------------------------------------------------------------------


def fleet_for_plans() -> list[Card]:
    # card 1: int(22 GiB x 0.9) = 21,260,088,115 bytes = 19.8 GiB usable
    return [
        Card(index=0, usable_bytes=24 * GiB),
        Card.from_total(index=1, total_bytes=22 * GiB, usable_fraction=0.9),
    ]


def test_card_from_total_rounds_down():
    assert fleet_for_plans()[1].usable_bytes == 21_260_088_115 and fleet_for_plans()[1].total_bytes == 22 * GiB


def test_manual_plan_overflow_message_is_exact():
    chat = model("chat", 21.4)  # int(21.4 GiB) -> shown as 21.4 GiB
    plan = ManualPlan(entries=(PlanEntry(model="chat", cards=(1,)),))
    (v,) = check_plan(plan, [chat], fleet_for_plans())
    assert v.message == "chat pinned to card 1 needs 21.4 GiB but card 1 has 19.8 GiB usable"
    assert (v.kind, v.card, v.need_bytes, v.room_bytes) == ("overflow", 1, int(21.4 * GiB), 21_260_088_115)


def test_manual_plan_collects_every_violation():
    # rerank 18 GiB on card 1 (19.8) fits: 1.8 GiB left. embed 2 GiB on card 1 does not.
    # chat 21.4 GiB on card 1 does not either (charged first: largest). ocr names a card the
    # fleet lacks; tts is in the plan but not a model; vision is a model with no entry.
    models = [
        model("chat", 21.4),
        model("rerank", 18),
        model("embed", 2),
        model("ocr", 1),
        model("vision", 1),
    ]
    plan = parse_plan({"models": {"chat": 1, "rerank": [1], "embed": {"cards": [1]}, "ocr": {"card": 7}, "tts": 0}})
    messages = [v.message for v in check_plan(plan, models, fleet_for_plans())]
    assert messages == [
        "the plan names tts, which is not among the models (chat, embed, ocr, rerank, vision)",
        "vision has no entry in the plan",
        "ocr pinned to card 7 but the fleet has cards 0, 1",
        "chat pinned to card 1 needs 21.4 GiB but card 1 has 19.8 GiB usable",
        "embed pinned to card 1 needs 2.0 GiB but card 1 has 1.8 GiB usable left after rerank (of 19.8 GiB)",
    ]
    with pytest.raises(PlanDoesNotFitError) as err:
        validate_plan(plan, models, fleet_for_plans())
    assert len(err.value.violations) == 5 and isinstance(err.value, PlacementError)
    assert str(err.value).startswith("the placement plan does not fit (5 problems):\n  - the plan names tts")


def test_plan_error_message_is_capped():
    models = [model(f"m{i}", 30) for i in range(9)]
    plan = ManualPlan(entries=tuple(PlanEntry(model=m.name, cards=(0,)) for m in models))
    with pytest.raises(PlanDoesNotFitError) as err:
        validate_plan(plan, models, cards(24))
    assert len(err.value.violations) == 9 and "  … and 3 more" in str(err.value)


def test_manual_split_with_and_without_ratio():
    # 30 GiB + 2 GiB fixed on cards 0 (24) and 1 (19.8).
    m = model("m", 30, fixed_bytes_per_card=2 * GiB)
    # ratio 3:1 -> 22.5 + 2 = 24.5 > 24 on card 0
    (v,) = check_plan(ManualPlan(entries=(PlanEntry(model="m", cards=(0, 1), ratio=(3, 1)),)), [m], fleet_for_plans())
    assert v.message == "m pinned to card 0 needs 24.5 GiB but card 0 has 24.0 GiB usable"
    # no ratio: split like the planner (proportional to room) -> fits
    p = validate_plan(ManualPlan(entries=(PlanEntry(model="m", cards=(0, 1)),)), [m], fleet_for_plans())
    assert p.instances[0].ratio_rule == "proportional" and p.cards[0].charged_bytes <= 24 * GiB


def test_manual_plan_swap_groups_and_replicas():
    models = [
        model("chat", 16, phases={"query"}),
        model("ocr", 14, phases={"ingest"}),
        model("embed", 2, replicas=2),
    ]
    plan = parse_plan(
        {
            "swap_groups": [["chat", "ocr"]],
            "models": {"chat": 0, "ocr": 0, "embed": {"cards": [0], "replicas": 2}},
        }
    )
    p = validate_plan(plan, models, cards(24))
    assert p.cards[0].charged_bytes == 16 * GiB + 4 * GiB and p.swap_groups[0].charge_bytes == (16 * GiB,)
    assert [i.replica for i in p.instances_of("embed")] == [0, 1]
    # without the group it is 16 + 14 + 4 = 34 > 24
    assert check_plan(ManualPlan(entries=plan.entries), models, cards(24))
    bad = ManualPlan(entries=plan.entries, swap_groups=(frozenset({"chat", "embed"}),))
    kinds = [v.kind for v in check_plan(bad, models, cards(24))]
    assert kinds.count("swap_group") == 2  # they can co-run, and embed has 2 replicas


def test_plan_from_placement_round_trips():
    models = [
        model("chat", 30, phases={"query"}, fixed_bytes_per_card=GiB),
        model("ocr", 20, phases={"ingest"}),
        model("embed", 2, replicas=3),
    ]
    fleet = cards(24, 24, 16)
    p = place(models, fleet)
    plan = plan_from_placement(p)
    assert check_plan(plan, models, fleet) == []
    assert validate_plan(plan, models, fleet).cards == p.cards
    assert parse_plan(json.loads(json.dumps(plan_to_dict(plan)))) == plan


# --- parsers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Qwen/Qwen3-8B", ModelTerm(model_id="Qwen/Qwen3-8B")),
        ("Qwen/Qwen3-8B:32k", ModelTerm(model_id="Qwen/Qwen3-8B", context_tokens=32_768)),
        ("Qwen/Qwen3-8B:8192x2", ModelTerm(model_id="Qwen/Qwen3-8B", context_tokens=8_192, replicas=2)),
        (
            "BAAI/bge-m3x3@ingest,query",
            ModelTerm(model_id="BAAI/bge-m3", replicas=3, phases=frozenset({"ingest", "query"})),
        ),
        ("ocr@ingest", ModelTerm(model_id="ocr", phases=frozenset({"ingest"}))),
        ("repo:Q4_K_M:4K", ModelTerm(model_id="repo", context_tokens=4_096, precision="Q4_K_M")),
        ("org/name:int4-AWQx2", ModelTerm(model_id="org/name", replicas=2, precision="int4-awq")),
        ("org/name:q8_0@query", ModelTerm(model_id="org/name", phases=frozenset({"query"}), precision="Q8_0")),
        ("org/name:FILE.gguf:2048", ModelTerm(model_id="org/name:FILE.gguf", context_tokens=2_048)),
        ("a:b", ModelTerm(model_id="a:b")),
        ("mistralai/Mixtral-8x7B", ModelTerm(model_id="mistralai/Mixtral-8x7B")),
        ("model-x2x1", ModelTerm(model_id="model-x2")),
        ("./models/llama.gguf:2048", ModelTerm(model_id="./models/llama.gguf", context_tokens=2_048)),
    ],
)
def test_parse_model_term(text, expected):
    assert parse_model_term(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "non-empty"),
        ("@query", "not a model id"),
        ("m@", "phases"),
        ("m@a,,b", "phases"),
        ("m@que ry", "phases"),
        ("mx0", "replicas"),
        ("m:0", "context"),
        ("m:", "not a model id"),
        ("my model", "not a model id"),
    ],
)
def test_parse_model_term_errors(text, says):
    with pytest.raises(ModelTermError, match=says):
        parse_model_term(text)


def test_parse_plan_toml_and_aliases():
    plan = parse_plan_text(
        """
        swap_groups = [["ocr", "chat"]]
        [models.chat]
        devices = [0, 1]
        tensor_split = [3, 1]
        context = 32768
        [models]
        embed = 2
        rerank = [{ cards = [2] }, { card = 3, replicas = 2 }]
        """,
        fmt="toml",
    )
    assert plan.entries == (
        PlanEntry(model="chat", cards=(0, 1), ratio=(3, 1), context_tokens=32_768),
        PlanEntry(model="embed", cards=(2,)),
        PlanEntry(model="rerank", cards=(2,)),
        PlanEntry(model="rerank", cards=(3,), replicas=2),
    )
    assert plan.swap_groups == (frozenset({"ocr", "chat"}),)
    assert parse_plan_text('{"chat": [0]}', fmt="json").entries == (PlanEntry(model="chat", cards=(0,)),)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([1, 2], "table of models"),
        ({"models": [1]}, "must be a table"),
        ({"models": {}, "extra": 1}, "unknown top-level"),
        ({"chat": {"cards": [0], "gpus": [1]}}, "unknown plan key"),
        ({"chat": {"ratio": [1]}}, "needs cards"),
        ({"chat": {"cards": [0, 0]}}, "distinct"),
        ({"chat": {"cards": [0, 1], "ratio": [1]}}, "one int >= 0 per card"),
        ({"chat": {"cards": [0, 1], "ratio": [0, 0]}}, "positive sum"),
        ({"chat": {"cards": [0], "replicas": 0}}, "replicas"),
        ({"chat": {"cards": [-1]}}, "distinct card indices"),
        ({"chat": {"cards": [0], "devices": [1]}}, "given twice"),
        ({"chat": "zero"}, "card index"),
        ({"chat": 0, "swap_groups": [["chat"]]}, "at least two"),
        ({"chat": 0, "swap_groups": "chat"}, "list of lists"),
        ({"a": 0, "b": 0, "c": 0, "swap_groups": [["a", "b"], ["b", "c"]]}, "more than one swap group"),
    ],
)
def test_parse_plan_errors(data, says):
    with pytest.raises(ManualPlanError, match=says):
        parse_plan(data)


def test_parse_plan_text_bad_syntax():
    with pytest.raises(ManualPlanError, match="not valid TOML"):
        parse_plan_text("[models", fmt="toml")
    with pytest.raises(ManualPlanError, match="not valid JSON"):
        parse_plan_text("{", fmt="json")


# --- inputs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: model("m", -1), "weights_bytes"),
        (lambda: ModelDemand(name="", weights_bytes=1), "non-empty name"),
        (lambda: ModelDemand(name="m", weights_bytes=1, replicas=0), "replicas"),
        (lambda: ModelDemand(name="m", weights_bytes=1.5), "weights_bytes"),
        (lambda: ModelDemand(name="m", weights_bytes=True), "weights_bytes"),
        (lambda: ModelDemand(name="m", weights_bytes=1, context_tokens=10, min_context_tokens=20), "above"),
        (lambda: ModelDemand(name="m", weights_bytes=1, phases="query"), "set of names"),
        (lambda: ModelDemand(name="m", weights_bytes=1, phases={""}), "non-empty string"),
        (lambda: Card(index=-1, usable_bytes=1), "index"),
        (lambda: Card.from_total(index=0, total_bytes=10, usable_fraction=1.5), "usable_fraction"),
        (lambda: place([model("a"), model("a")], cards(24)), "unique"),
        (
            lambda: place([model("a")], [Card(index=0, usable_bytes=1), Card(index=0, usable_bytes=2)]),
            "unique",
        ),
        (lambda: place([model("a")], [], unified_budget_bytes=-1), "unified_budget_bytes"),
    ],
)
def test_bad_input_raises_typed_errors(build, says):
    with pytest.raises(PlacementInputError, match=says):
        build()


def test_phases_normalise_to_frozenset():
    assert model("m", phases=["query", "query"]).phases == frozenset({"query"})


def test_describe_names_everything():
    # One 24 GiB card: chat/ocr swap (16), embed #0 (1), huge (rank 1) goes tight and
    # drains the card, so embed's other replicas find no room.
    p = place(
        [
            model("chat", 16, phases={"query"}),
            model("ocr", 14, phases={"ingest"}),
            model("huge", 40, rank=1),
            model("embed", 1, replicas=3),
        ],
        cards(24),
    )
    text = describe_placement(p)
    for piece in (
        "card 0: 57.0 GiB charged of 24.0 GiB usable",
        "chat / ocr: card 0 16.0 GiB",
        "huge: 33.0 GiB short on card(s) 0",
        "33.0 GiB OVER",
        "embed: 1 of 3 (no room",
    ):
        assert piece in text
    unified = describe_placement(place([model("a", 20), model("b", 16)], [], unified_budget_bytes=32 * GiB))
    assert "unified memory" in unified and "refused" in unified


# --- issue 15 item 5: an even split (tensor parallelism) takes one class, in equal shares ---------------


def _classed(*cards_: tuple[float, str]) -> list[Card]:
    return [Card(index=i, usable_bytes=int(g * GiB), gpu_class=c) for i, (g, c) in enumerate(cards_)]


MIXED = ((46.5, "h100-80g"), (21.6, "rtx4090-24g"), (21.6, "rtx4090-24g"), (21.6, "rtx4090-24g"))


def test_a_proportional_split_may_mix_classes():
    """llama.cpp: 60 GiB on the two roomiest cards, an H100 with 46.5 GiB and a 4090 with 21.6 GiB room, in
    proportion: 60 × 46.5 / 68.1 = 41.0 and 19.0 GiB."""
    (inst,) = place([model("m", 60)], _classed(*MIXED)).instances
    assert inst.cards == (0, 1) and inst.ratio_rule == "proportional"


def test_an_even_split_takes_cards_of_one_class():
    """vLLM cannot run 41.0 + 19.0 GiB: the H100 alone is short, two 4090s offer 43.2 GiB, three 64.8: three
    4090s at 20 GiB each."""
    (inst,) = place([model("m", 60, even_split=True)], _classed(*MIXED)).instances
    assert inst.cards == (1, 2, 3) and inst.ratio_rule == "even"
    assert inst.split_bytes == (20 * GiB,) * 3


def test_an_even_split_that_fits_nowhere_is_tight_on_one_class():
    """70 GiB: the H100 class is 70 − 46.5 = 23.5 GiB short, the 4090s 70 − 64.8 = 5.2: tight on the 4090s."""
    p = place([model("m", 70, even_split=True)], _classed(*MIXED))
    (tight,) = p.tight
    assert tight.cards == (1, 2, 3)
    assert tight.shortfall_bytes == 70 * GiB - 3 * int(21.6 * GiB)


def test_a_manual_plan_may_not_mix_classes_for_an_even_split():
    from explorer.fleet.manual import ManualPlan, PlanEntry

    plan = ManualPlan(entries=(PlanEntry(model="m", cards=(0, 1)),))
    (bad,) = check_plan(plan, [model("m", 60, even_split=True)], _classed(*MIXED))
    assert bad.kind == "uneven_split" and "card 0 h100-80g, card 1 rtx4090-24g" in bad.message
    ratio = ManualPlan(entries=(PlanEntry(model="m", cards=(1, 2), ratio=(2, 1)),))
    assert check_plan(ratio, [model("m", 40, even_split=True)], _classed(*MIXED))[0].kind == "uneven_split"


def test_a_manual_plan_may_not_split_over_a_tensor_parallel_size_the_engine_refuses():
    from explorer.fleet.manual import ManualPlan, PlanEntry

    plan = ManualPlan(entries=(PlanEntry(model="m", cards=(1, 2, 3)),))
    (bad,) = check_plan(plan, [model("m", 30, even_split=True, widths=(1, 2, 4, 8))], _classed(*MIXED))
    assert bad.kind == "uneven_split"
    assert (
        bad.message == "m splits evenly (tensor parallelism): the engine refuses tp 3 for it; it takes 1, 2, 4, 8 cards"
    )


# --- issue 15 item 16: within a rank, the models of most phases first ----------------------------------


def test_an_always_running_model_is_charged_before_single_phase_ones():
    """One 24 GiB card; same rank: rerank (query) 14 GiB, vision (ingest) 10, embed (always) 6.8.
    Largest first, rerank and vision fill the card and embed, which can swap with nothing, is 6.8 GiB short.
    Most phases first, embed goes first (17.2 GiB left), rerank fits (3.2 left), and vision swaps with rerank
    (they never run together): one slot of max(14, 10) = 14 GiB, 6.8 + 14 = 20.8 GiB charged."""
    models = [model("rerank", 14, phases={"query"}), model("vision", 10, phases={"ingest"}), model("embed", 6.8)]
    assert [m.name for m in charge_order(models)] == ["embed", "rerank", "vision"]
    p = place(models, cards(24))
    assert not p.tight
    (group,) = p.swap_groups
    assert set(group.members) == {"rerank", "vision"}
    assert p.cards[0].charged_bytes == int(6.8 * GiB) + 14 * GiB


def test_phase_breadth_orders_within_a_rank_only():
    a = model("a", 10, phases={"x"}, rank=0)
    b = model("b", 1, rank=1)
    c = model("c", 2, phases={"x", "y"}, rank=0)
    assert [m.name for m in charge_order([a, b, c])] == ["c", "a", "b"]


# --- issue 15 item 17: nothing to place on -------------------------------------------------------------


def test_no_cards_and_no_budget_places_everything_unpinned():
    p = place([model("a", replicas=2), model("b")], [])
    assert p.unpinned and not p.tight and not p.refused and not p.cards
    assert [(i.model, i.replica, i.cards, i.ratio_rule) for i in p.instances] == [
        ("a", 0, (), "unpinned"),
        ("a", 1, (), "unpinned"),
        ("b", 0, (), "unpinned"),
    ]
    assert describe_placement(p).startswith("no cards and no memory budget: every instance runs unpinned")


# --- issue 15 item 19: the context floor ---------------------------------------------------------------


def test_a_term_with_a_context_floor():
    term = parse_model_term("Qwen/Qwen3-32B:32k/8kx2@query")
    assert (term.model_id, term.context_tokens, term.min_context_tokens, term.replicas) == (
        "Qwen/Qwen3-32B",
        32768,
        8192,
        2,
    )
    assert parse_model_term("m:4096/1000").min_context_tokens == 1000
    with pytest.raises(ModelTermError, match="floor 65,536 must be between 1 and the context 32,768"):
        parse_model_term("m:32k/64k")


def test_the_floor_lets_a_model_in_at_less_context():
    """10 GiB of weights, 1 MiB a token, one 20 GiB card: 32k tokens need 42 GiB; at least 8k (18 GiB) fits, so
    the floor places it at the 10,240 tokens the card holds (10 GiB spare ÷ 1 MiB); without a floor it is tight."""
    floor = model("m", 10, kv_bytes_per_token=1024 * KiB, context_tokens=32768, min_context_tokens=8192)
    (inst,) = place([floor], cards(20)).instances
    assert inst.context_tokens == 10240
    fixed = model("m", 10, kv_bytes_per_token=1024 * KiB, context_tokens=32768)
    assert place([fixed], cards(20)).tight
