"""explorer.ui.fleet_rows: model rows to terms and footprints, placement rows, the plan editor's check."""

from __future__ import annotations

import json
import shlex
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.cli import main
from explorer.fleet.footprints import fleet_cards
from explorer.fleet.place import ModelTerm, parse_model_term, place
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui import fleet_rows as nf
from explorer.ui.model_pick import pick_model
from explorer.units import GiB, gib

LABEL = {tokens: label for label, tokens in nf.CONTEXT_CHOICES.items()}


def default_rows() -> list[dict]:
    """The notebook's rows as the controls give them (context as its menu label)."""
    return [
        {
            "name": r.name,
            "model": r.repo,
            "context": LABEL[r.context_tokens],
            "replicas": r.replicas,
            "phases": r.phases,
        }
        for r in nf.DEFAULT_FLEET
    ]


def model_of(repo: str):
    """The model as the placement notebook resolves it (the snapshot's shape and published files), or None."""
    return pick_model(repo) if load_snapshot().get(repo) else None


@cache
def fleet(spec: str = "1x3xl40s-48g", engine: str = "vllm"):
    """(offer, models, placement) for the default rows on ``spec``."""
    offer = fleet_cards(parse_cluster(spec), usable_fraction=0.9)
    terms, errors = nf.terms_from_rows(default_rows())
    models, notes, bad = nf.fleet_demands(terms, model_of, gpu=offer.gpu, engine=engine)
    assert errors == bad == notes == []
    return offer, models, place(models, offer.cards, unified_budget_bytes=offer.unified_budget_bytes)


def test_rows_become_cli_terms():
    terms, errors = nf.terms_from_rows(default_rows())
    assert errors == []
    assert [name for name, _t in terms] == ["chat", "vision", "ocr", "rerank", "embed"]
    assert [nf.term_text(t) for _n, t in terms] == [
        "Qwen/Qwen3-32B:32k@query",
        "Qwen/Qwen3-VL-32B-Instruct:16k@ingest",
        "allenai/olmOCR-7B-0225-preview:16k@ingest",
        "Qwen/Qwen3-4B-Thinking-2507:8k@query",
        "Qwen/Qwen3-0.6B:8kx2",
    ]
    assert nf.row_term("Qwen/Qwen3-8B", None, 3, " ingest , query ") == ModelTerm(
        model_id="Qwen/Qwen3-8B", replicas=3, phases=frozenset({"ingest", "query"})
    )


def test_a_rows_context_floor_becomes_the_terms():
    """The placement notebook's "min context" column (issue 15 item 19): a floor under the row's context."""
    row = {"name": "chat", "model": "Qwen/Qwen3-32B", "context": "32k", "replicas": 1, "phases": "query"}
    ((_, term),) = nf.terms_from_rows([{**row, "min context": "8k"}])[0]
    assert (term.context_tokens, term.min_context_tokens) == (32768, 8192)
    assert nf.term_text(term) == "Qwen/Qwen3-32B:32k/8k@query"
    ((_, bare),) = nf.terms_from_rows([row])[0]
    assert bare.min_context_tokens is None


def test_bad_rows_and_lines_are_reported_not_raised():
    rows = [
        {"name": "a", "model": "Qwen/Qwen3-8B", "context": "8k", "replicas": 1, "phases": "in gest"},
        {"name": "blank", "model": None, "context": "default", "replicas": 1, "phases": ""},
        {"name": "", "model": "Qwen/Qwen3-1.7B", "context": "default", "replicas": None, "phases": ""},
    ]
    extra = "# a comment\nsmall = Qwen/Qwen3-0.6B:4kx2@query\n\nQwen/Qwen3-8B:8k  # unnamed\n = @x"
    terms, errors = nf.terms_from_rows(rows, extra)
    assert [(n, nf.term_text(t)) for n, t in terms] == [
        (None, "Qwen/Qwen3-1.7B"),
        ("small", "Qwen/Qwen3-0.6B:4kx2@query"),
        (None, "Qwen/Qwen3-8B:8k"),
    ]
    assert len(errors) == 2
    assert errors[0].startswith("row 1: model term") and "in gest" in errors[0]
    assert errors[1].startswith("line 5: model term")


@pytest.mark.parametrize(
    "text",
    [
        "Qwen/Qwen3-8B",
        "org/model-x2x1",
        "repo:Q4_K_M:8192",
        "meta-llama/Meta-Llama-3.1-70B:int4-awq:8kx2@query",
        "m:12345x3@a,b",
        "BAAI/bge-m3:512@ingest,query",
        "a:1k",
        "Qwen/Qwen3-32B:32k/8kx2@query",
        "m:5000/1000",
    ],
)
def test_term_text_reads_back_as_the_same_term(text):
    term = parse_model_term(text)
    assert parse_model_term(nf.term_text(term)) == term


def test_demands_name_rank_clamp_and_refuse_unknown_ids():
    offer = fleet_cards(parse_cluster("1x1xh100-80g"))
    terms = [
        ("ocr", parse_model_term("allenai/olmOCR-7B-0225-preview:128k")),
        (None, parse_model_term("Qwen/Qwen3-0.6B")),
        (None, parse_model_term("Qwen/Qwen3-0.6B@query")),
        ("x", parse_model_term("no/such-model")),
    ]
    models, notes, errors = nf.fleet_demands(terms, model_of, gpu=offer.gpu)
    assert [(m.name, m.rank) for m in models] == [("ocr", 0), ("Qwen/Qwen3-0.6B", 1), ("Qwen/Qwen3-0.6B#2", 2)]
    # olmOCR's limit is 32,768 tokens: 131,072 asked, the limit charged
    assert models[0].context_tokens == 32768 and notes == [
        "ocr: 131,072 tokens asked; the model's limit, 32,768, is charged"
    ]
    assert models[1].context_tokens == 8192  # the default: min(limit, 8,192)
    assert errors == ["x: no model is known as no/such-model"]


def test_default_fleet_forms_a_swap_group_spreads_replicas_and_shares_a_card():
    _offer, models, placement = fleet()
    by_name = {m.name: m for m in models}
    assert len(placement.instances) == 6 and not placement.tight and not placement.missing_replicas
    (group,) = placement.swap_groups
    assert group.members == ("chat", "vision") and group.cards == (0, 1)
    assert by_name["chat"].never_runs_with(by_name["vision"])
    for card, charge in zip(group.cards, group.charge_bytes, strict=True):  # its largest member, per card
        assert charge == max(
            i.split_bytes[i.cards.index(card)] for m in group.members for i in placement.instances_of(m)
        )
    assert {i.cards for i in placement.instances_of("embed")} == {(0,), (2,)}  # spread, not stacked
    assert placement.cards[2].models == ("ocr", "rerank", "embed")  # the small ones share card 2


@pytest.mark.parametrize("spec", ["1x3xl40s-48g", "1x1xrtx4090-24g", "1x1xm4-max-128g", "1x8xh100-80g"])
def test_segments_stack_to_each_cards_charge(spec):
    offer, _models, placement = fleet(spec)
    rows = nf.card_segments(placement, offer.labels)
    for order, card in enumerate(placement.cards):
        mine = [r for r in rows if r["card_order"] == order]
        (top,) = [r for r in mine if r["row"] == "card"]
        assert top["stacked_gib"] == pytest.approx(card.charged_bytes / GiB, abs=1e-9)
        assert top["over"] == (card.overflow_bytes > 0)
        # a swap group's members sit inside its slot, which is as tall as the largest of them
        for slot in (r for r in mine if r["row"] == "slot"):
            inside = [r for r in mine if r["row"] == "segment" and r["group"] == slot["group"]]
            assert max(r["gib"] for r in inside) == pytest.approx(slot["gib"])
            assert all(r["y0"] == slot["y0"] for r in inside)


def test_tables_and_notes_mark_tight_models_and_swap_groups():
    offer, _models, placement = fleet("1x1xrtx4090-24g")
    rows = nf.instance_rows(placement)
    assert all(r["fits"].startswith("✗ tight, short by") for r in rows)
    assert nf.card_rows(placement, offer.labels)[0]["fits"] == f"✗ over by {gib(placement.cards[0].overflow_bytes)}"
    notes = nf.placement_notes(placement)
    assert notes["tight"][0] == f"chat: short by {gib(placement.tight[0].shortfall_bytes)} on card 0"
    assert notes["missing replicas"] == ["embed: 1 of 2 replicas (placed tight, so it runs one instance)"]
    _offer, _models, good = fleet()
    charge = good.swap_groups[0].charge_bytes
    assert nf.placement_notes(good)["swap groups"] == [
        (
            "chat / vision: one resident at a time on cards 0, 1, charged its largest member per card: "
            f"card 0 {gib(charge[0])}, card 1 {gib(charge[1])}"
        )
    ]
    assert nf.instance_rows(good)[0]["fits"] == "✓ swap group (chat / vision)"


def test_plan_text_checks_back_to_the_same_charges():
    offer, models, placement = fleet()
    text = nf.plan_text(placement)
    data = json.loads(text)
    assert data["models"]["chat"] == {"cards": [0, 1], "ratio": [1, 1], "context": 32768}  # an even split, reduced
    assert data["swap_groups"] == [["chat", "vision"]]
    check = nf.check_plan_text(text, models, offer.cards)
    assert check.fits and check.error is None and check.violations == ()
    assert [c.charged_bytes for c in check.placement.cards] == [c.charged_bytes for c in placement.cards]
    assert nf.plan_text(fleet("1x1xm4-max-128g")[2]) == ""  # a unified pool has no cards to pin


def test_an_impossible_pin_gives_the_planners_message():
    offer, models, placement = fleet()
    data = json.loads(nf.plan_text(placement))
    data["models"]["ocr"] = {"cards": [0]}
    check = nf.check_plan_text(json.dumps(data), models, offer.cards)
    ocr = next(m for m in models if m.name == "ocr")
    need = ocr.shard_bytes_at(ocr.context_tokens) + ocr.fixed_bytes_per_card
    room = placement.cards[0].usable_bytes - placement.swap_groups[0].charge_bytes[0]
    assert not check.fits and [v.message for v in check.violations] == [
        (
            f"ocr pinned to card 0 needs {gib(need)} but card 0 has {gib(room)} usable left after chat, vision "
            f"(of {gib(placement.cards[0].usable_bytes)})"
        )
    ]


def test_text_that_is_not_a_plan_is_an_error_not_a_raise():
    offer, models, _placement = fleet()
    assert "not valid JSON" in nf.check_plan_text("{not json", models, offer.cards).error
    assert "cards" in nf.check_plan_text('{"models": {"chat": {"cards": "0"}}}', models, offer.cards).error
    missing = nf.check_plan_text('{"models": {"chat": [0, 1]}}', models, offer.cards)
    assert {v.kind for v in missing.violations} == {"missing_model"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5) | st.text(max_size=6),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(_json, st.sampled_from(["chat", "vision", "ocr", "embed", "models", "swap_groups", "cards"]))
def test_any_json_gives_a_check_never_an_exception(value, key):
    offer, models, _placement = fleet()
    for doc in (value, {key: value}, {"models": {key: value}}):
        check = nf.check_plan_text(json.dumps(doc), models, offer.cards)
        assert check.fits or check.error or check.violations


def test_fleet_text_and_the_cli_command():
    offer, _models, _placement = fleet()
    assert nf.fleet_text(offer.labels) == "3 cards (3 × l40s-48g)"
    assert nf.fleet_text((), 96 * GiB) == "one unified-memory pool of 96.0 GiB"
    terms, _errors = nf.terms_from_rows(default_rows())
    command = nf.cli_command("1x3xl40s-48g", terms)
    assert command.startswith("explorer place --offline --cluster '1x3xl40s-48g' --model 'Qwen/Qwen3-32B:32k@query'")
    assert "--engine" not in command and nf.cli_command("x", terms, engine="llamacpp").endswith("--engine llamacpp")


def test_the_cli_command_places_the_same(capsys):
    _offer, _models, placement = fleet()
    terms, _errors = nf.terms_from_rows(default_rows())
    args = shlex.split(nf.cli_command("1x3xl40s-48g", terms))[1:]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the CLI names models by their ids; the cards and charges are the same
    assert [(i["cards"], i["split_bytes"]) for i in out["instances"]] == [
        (list(i.cards), list(i.split_bytes)) for i in placement.instances
    ]
    assert [c["charged_bytes"] for c in out["cards"]] == [c.charged_bytes for c in placement.cards]


def test_a_gguf_repository_is_placed_at_the_file_llama_server_loads():
    # The placement notebook hands the resolver's files to the footprint: llama-server -hf loads Q4_K_M when a
    # repository has it (its find_best_model), so the demand is that file's 5,007,015,154 bytes (the snapshot's
    # computed size: 8,190,735,360 parameters at 4.89 bits), not the base model's bf16 weights (16.4 GB).
    offer = fleet_cards(parse_cluster("1x2xl40s-48g"), usable_fraction=0.9)
    terms = [(None, parse_model_term("Qwen/Qwen3-8B-GGUF:4096"))]
    models, notes, errors = nf.fleet_demands(terms, model_of, gpu=offer.gpu, engine="llamacpp")
    assert notes == errors == []
    assert models[0].weights_bytes == 5_007_015_154
    assert "--hf-file Qwen3-8B-Q4_K_M.gguf" in " ".join(models[0].load_flags)


def test_a_precision_loads_the_published_checkpoints_the_resolver_knows():
    """The notebook's "int4-awq" for every model: Qwen3-32B loads Qwen's own AWQ checkpoint (no note), Llama 3.1 8B
    hugging-quants' of the Instruct model (a note says it stands in) and the launch names each."""
    from explorer.fleet.footprints import launch_ids
    from explorer.ui.fleet_launch import launch_rows

    offer = fleet_cards(parse_cluster("1x2xh100-80g"), usable_fraction=0.9)
    terms = [(None, parse_model_term("Qwen/Qwen3-32B:8k")), ("llama", parse_model_term("meta-llama/Meta-Llama-3.1-8B"))]
    models, notes, errors = nf.fleet_demands(terms, model_of, gpu=offer.gpu, precision="int4-awq")
    assert errors == []
    assert [m.model_ref for m in models] == ["Qwen/Qwen3-32B-AWQ", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"]
    assert notes == [
        "llama: hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4 quantises meta-llama/Meta-Llama-3.1-8B-Instruct, "
        "which stands in for meta-llama/Meta-Llama-3.1-8B (same shapes)"
    ]
    ids = launch_ids(models, {"Qwen/Qwen3-32B": "Qwen/Qwen3-32B", "llama": "meta-llama/Meta-Llama-3.1-8B"})
    rows = launch_rows(place(models, offer.cards), offer, ids, engine="vllm")
    assert sorted(r["command"].split("vllm serve ")[1].split()[0] for r in rows) == sorted(m.model_ref for m in models)
