"""explorer.ui.size_view and explorer.ui.size_chart: the app's size mode, from the workload's declarations to
``explorer size``'s answer as the app's table and the frontier chart."""

from __future__ import annotations

import pytest

from explorer.plan.size import size, sizing_request
from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
from explorer.sources.snapshot.read import load_snapshot
from explorer.speed.load import replica_load
from explorer.ui.app_state import QUERY_KEYS, AppDefaults, app_defaults, to_query
from explorer.ui.size_chart import FRONTIER_DATA, frontier_chart
from explorer.ui.size_view import (
    SIZE_COLUMNS,
    WORKLOAD_BY_KEY,
    advice_md,
    control_text,
    controls,
    frontier_of,
    ladder,
    read_workload,
    size_rows,
    workload_query,
)


@pytest.fixture(scope="module")
def llama8b():
    return load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")


def test_the_keys_are_the_workloads_declared_options():
    """One control a declared setting, keyed as the CLI spells it (``--prefix-cache`` -> ``prefix-cache``), and no
    key the app's other state reads."""
    keys = ["users", "rate", "prompt", "answer", "prefix-cache", "ttft", "tpot", "user-tps", "ttft-percentile",
            "tpot-percentile"]  # fmt: skip
    assert list(WORKLOAD_BY_KEY) == keys
    assert [c.key for c in controls({})] == keys
    assert all(WORKLOAD_BY_KEY[k].cli[0] == f"--{k}" for k in keys)
    assert set(keys) <= QUERY_KEYS and "size" in QUERY_KEYS


def test_the_app_opens_on_the_chat_workload():
    """200 users, 2,000 + 500 tokens, TTFT 1 s, TPOT 50 ms: each control at that position, and read back whole."""
    opened = {c.key: c.value for c in controls({})}
    assert opened == {"users": 200, "rate": 0, "prompt": 2000, "answer": 500, "prefix-cache": 0.0, "ttft": 1.0,
                      "tpot": 0.05, "user-tps": 0, "ttft-percentile": "p50", "tpot-percentile": "p50"}  # fmt: skip
    workload, errors = read_workload({k: control_text(k, v) for k, v in opened.items()})
    assert errors == []
    assert (workload.users, workload.rate, workload.context_tokens) == (200, None, 2500)
    assert (workload.ttft_s, workload.tpot_target_s) == (1.0, 0.05)


def test_ladders_are_1_2_5_inside_the_declared_range():
    users, share, ttft = WORKLOAD_BY_KEY["users"], WORKLOAD_BY_KEY["prefix-cache"], WORKLOAD_BY_KEY["ttft"]
    # optional: 0 first (not asked); then 1, 2, 5 … up to the declared 1,048,576 users
    assert ladder(users) == (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000,
                             100_000, 200_000, 500_000, 1_000_000)  # fmt: skip
    assert ladder(users, 300)[8:11] == (200, 300, 500)  # a link's 300 users keeps its place
    assert ladder(share)[:3] == (0.0, 0.05, 0.1) and ladder(share)[-2:] == (0.95, 0.99)
    # seconds: from 5 ms to the slider's 120 s (the declaration allows a day; a link may carry more)
    assert ladder(ttft)[:4] == (0.0, 0.005, 0.01, 0.02) and ladder(ttft)[-1] == 100.0


def test_url_keys_round_trip():
    """A link that sizes by rate: users cleared, 5 requests a second, 4,000-token prompts, TPOT 20 ms."""
    state = AppDefaults(sizing=True, workload={"users": "", "rate": "5", "prompt": "4000", "tpot": "0.02"})
    query = to_query(state)
    assert {k: query[k] for k in ("size", "users", "rate", "prompt", "tpot")} == {
        "size": "on", "users": "", "rate": "5", "prompt": "4000", "tpot": "0.02"}  # fmt: skip
    assert app_defaults(query) == state
    workload, errors = read_workload(app_defaults(query).workload)
    assert errors == [] and (workload.users, workload.rate, workload.prompt_tokens, workload.tpot_s) == (
        None, 5.0, 4000, 0.02)  # fmt: skip
    # what the controls write back: only what differs from the app's workload
    values = {c.key: control_text(c.key, c.value) for c in controls(state.workload)}
    assert workload_query(values) == {"users": "", "rate": "5", "prompt": "4000", "tpot": "0.02"}
    assert to_query(AppDefaults()) == {}


def test_a_workload_that_is_not_one_says_why():
    workload, errors = read_workload({"rate": "5"})  # the app's 200 users and a rate: both given
    assert workload is None and errors == [
        "a workload is users (--users) or a request rate (--rate), not both; give one"
    ]
    workload, errors = read_workload({"ttft": "soon"})  # the rest is read; the app's 1 s stays
    assert workload.ttft_s == 1.0 and errors == ["--ttft: 'soon' is not a duration (1s, 50ms, or seconds as a number)"]
    # a link's value the controls cannot show opens on the app's workload
    assert {c.key: c.value for c in controls({"prompt": "-3"})}["prompt"] == 2000


def test_rows_are_the_sizings_clusters_best_first(llama8b):
    """Llama-3.1-8B for 200 users of 2,000 + 500 tokens: the table is size()'s clusters in its order."""
    workload, _ = read_workload({})
    prices = shipped_prices()
    result = size(llama8b, workload, shipped_catalogue(), prices)
    rows = size_rows(result)
    assert [r["class"] for r in rows] == [c.gpu_class for c in result.clusters[:10]]
    assert [r["cards"] for r in rows] == [f"{c.cards:,}" for c in result.clusters[:10]]
    assert [r["command"] for r in rows] == [c.option.evaluation.command for c in result.clusters[:10]]
    first = rows[0]
    # one H200 (bf16 fits: 16 GB of weights) at $4.59 an hour holds all 200 users in one batch within 50 ms
    assert (first["class"], first["cards"], first["$/hour"]) == ("h200-141g", "1", "4.59")
    assert prices.usd_per_gpu_hour("h200-141g") == 4.59
    assert first["replicas × cards"] == "1 × 1" and first["batch"] == "200" and first["binding"] == "tpot target"
    assert first["option"] == "vLLM · 1 × h200-141g (single) · original (bf16)" and first["fits"] == "✓"
    s = result.clusters[0].sizing
    # tok/s a GPU = requests a second × 500 answer tokens ÷ 1 card; $/M tok = $4.59 ÷ (that × 3,600 s) × 10⁶
    per_gpu = s.requests_per_s * 500
    assert first["tok/s a GPU"] == f"{per_gpu:,.0f}"
    assert first["$/M tok"] == f"{4.59 / (per_gpu * 3600) * 1e6:.3f}"
    assert first["tok/s a user"] == f"{1 / s.point.tpot_s:,.1f}" and 1 / s.point.tpot_s >= 20  # the 50 ms target
    assert set(first) == {*SIZE_COLUMNS, "fits"} and advice_md(result) == ""


def test_an_unmet_workload_shows_the_shortfall_and_what_would_meet_it():
    """70B in bf16 within 1 ms a token: no class gets there (a step reads 141 GB of weights); the closest says by
    how much, and the advice names a TPOT it meets."""
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    workload, _ = read_workload({"tpot": "0.001"})
    result = size(shape, workload, shipped_catalogue(), shipped_prices())
    assert not result.met
    rows, closest = size_rows(result), result.clusters[0].sizing
    ratio = closest.point.tpot_s / 0.001
    assert ratio > 5 and closest.shortfall == {"tpot": ratio}
    assert rows[0]["fits"] == "✗" and rows[0]["binding"] == f"✗ misses TPOT {ratio:.2f} × its target"
    assert rows[0]["batch"] == rows[0]["tok/s a GPU"] == rows[0]["$/M tok"] == "-"
    text = advice_md(result)
    assert text.startswith(f"**No cluster of the {len(result.searched)} classes searched meets this workload.**")
    assert f"{ratio:.2f} × the 1.0 ms target" in text and "lower precision" in text


def test_the_frontier_of_the_first_three_clusters(llama8b):
    """8B for the chat workload: each cluster's points are the load model's of its replica as size() planned it
    (at 2,500 tokens: its KV cache the option's own), per card of the replica; three ways, none drawn twice."""
    workload, _ = read_workload({})
    result = size(llama8b, workload, shipped_catalogue(), shipped_prices())
    rows = frontier_of(result, llama8b)
    drawn = list(dict.fromkeys(r["option"] for r in rows))
    assert drawn == [f"#{i} {c.option.label}" for i, c in enumerate(result.clusters[:3], 1)]  # three different
    assert len({c.option.label for c in result.clusters[:3]}) == 3
    assert drawn[0] == "#1 vLLM · 1 × h200-141g (single) · original (bf16)"
    planned = sizing_request(None, workload)
    assert (planned.context_tokens, planned.concurrency) == (2500, 1)
    for i, cluster in enumerate(result.clusters[:3], 1):
        load = replica_load(cluster.option, llama8b, workload, planned)
        assert load.capacity == cluster.option.evaluation.max_concurrency
        mine = [r for r in rows if r["option"] == f"#{i} {cluster.option.label}"]
        assert max(r["batch"] for r in mine) <= 2 * load.capacity  # the batches drawn stop past what it holds
        for r in mine:
            point = load.at(r["batch"])
            assert r["user_tokens_per_s"] == 1 / point.tpot_s
            assert r["gpu_tokens_per_s"] == pytest.approx(r["batch"] / point.tpot_s / cluster.option.layout.cards)
            assert r["fits"] == (r["batch"] <= load.capacity)
    # the first: one H200 meets 50 ms a token at 200 sequences, the sizing's own batch
    assert next(r for r in rows if r["option"] == drawn[0] and r["batch"] == 192)["meets"]
    spec = frontier_chart(rows, user_tokens_per_s=1 / 0.05, ttft_ms=1000.0)
    assert spec["data"] == {"name": FRONTIER_DATA} and len(spec["datasets"][FRONTIER_DATA]) == len(rows)
    left, right = (view["layer"] for view in spec["hconcat"])
    # the targets as dashed rules: 20 tokens/s a user (TPOT 50 ms) beside the frontier, TTFT 1 s beside the TTFTs
    assert left[-1]["mark"]["type"] == "rule" and left[-1]["data"]["values"] == [{"user_tokens_per_s": 20.0}]
    assert right[-1]["mark"]["type"] == "rule" and right[-1]["data"]["values"] == [{"ttft_ms": 1000.0}]
    untargeted = frontier_chart(rows, user_tokens_per_s=None)
    assert [[layer["mark"]["type"] for layer in view["layer"]] for view in untargeted["hconcat"]] == [
        ["line", "point", "text"],
        ["line"],
    ]
    jsonschema = pytest.importorskip("jsonschema")
    from altair.vegalite.v6.schema import core

    jsonschema.Draft7Validator(core.load_schema()).validate(spec)


def test_a_disaggregated_cluster_says_its_prefill_replicas():
    """70B for the chat workload: some class serves it with prefill and decode apart; its row counts both pools,
    and its cards are (decode + prefill replicas) × the cards of one."""
    workload, _ = read_workload({})
    result = size(load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B"), workload, shipped_catalogue(),
                  shipped_prices())  # fmt: skip
    rows = size_rows(result, limit=len(result.clusters))
    apart = [(c.sizing, r) for c, r in zip(result.clusters, rows, strict=True) if c.sizing.prefill_replicas]
    assert apart, "no class sizes 70B with prefill apart"
    for s, row in apart:
        assert row["replicas × cards"] == f"{s.replicas} + {s.prefill_replicas} prefill × {s.cards_per_replica}"
        assert row["cards"] == f"{(s.replicas + s.prefill_replicas) * s.cards_per_replica:,}"


def test_the_users_own_cluster_says_how_many_of_its_cards_the_workload_needs():
    """70B for 200 users with 8 × H100 as the user's cluster: three tp4 replicas need 12 cards, more than the 8 the
    user has, and the row says so."""
    workload, _ = read_workload({})
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    result = size(shape, workload, shipped_catalogue(), shipped_prices(), own=parse_cluster("1x8xh100-80g"))
    rows = size_rows(result, limit=len(result.clusters))
    ((mine, row),) = [(c, r) for c, r in zip(result.clusters, rows, strict=True) if c.own]
    assert (mine.sizing.replicas, mine.sizing.cards_per_replica) == (3, 4)
    assert row["class"] == "h100-80g (yours)" and row["cards"] == "12 of your 8"


def test_the_frontier_draws_a_way_once():
    """70B with 8 × H100 as the user's cluster: the user's cluster runs the h100-80g row's tp4 replicas, so the
    frontier draws that way once (as the table ranks it first) and takes the next cluster's instead."""
    workload, _ = read_workload({})
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    result = size(shape, workload, shipped_catalogue(), shipped_prices(), own=parse_cluster("1x8xh100-80g"))
    labels = [c.option.label for c in result.clusters]
    assert len(set(labels[:3])) < 3  # a way twice among the first three
    drawn = list(
        dict.fromkeys(r["option"].split(" ", 1)[1].removesuffix(" (yours)") for r in frontier_of(result, shape))
    )
    assert drawn == list(dict.fromkeys(labels))[:3]
