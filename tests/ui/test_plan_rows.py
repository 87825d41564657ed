"""explorer.ui.plan_rows: plan results as rows, refusals grouped, context steps, defaults from links."""

from __future__ import annotations

import itertools
from dataclasses import replace
from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui import plan_rows as nd
from explorer.ui.model_pick import pick_model
from explorer.ui.sweep_cache import SWEEPS
from explorer.units import GiB


@cache
def llama8b_on_a_4090(context: int = 131072):
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    request = PlanRequest(context_tokens=context, engines=("vllm", "sglang"))
    return shape, request, plan(shape, parse_cluster("1x1xrtx4090-24g"), request)


def test_context_steps_are_a_log_scale_to_the_limit():
    assert nd.context_steps(8192) == [512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192]
    assert nd.context_steps(40960)[-3:] == [24576, 32768, 40960]
    assert nd.context_steps(300) == [300]
    assert nd.nearest_step([512, 1024, 2048], 1400) == 1024 and nd.nearest_step([512, 1024, 2048], 1500) == 2048


@given(st.integers(min_value=1, max_value=10_000_000))
def test_context_steps_end_at_the_limit_and_rise(limit):
    steps = nd.context_steps(limit)
    assert steps[-1] == limit and steps == sorted(set(steps))
    assert all(b / a <= 2 for a, b in itertools.pairwise(steps))


def test_rows_of_a_plan():
    _shape, _request, result = llama8b_on_a_4090(8192)
    rows = nd.option_rows(result)
    assert rows and set(nd.TABLE_COLUMNS) == set(rows[0])
    best = result.options[0]
    assert rows[0]["per card (GiB)"] == f"{best.per_card.total / GiB:,.1f} / {best.per_card.usable / GiB:,.1f}"
    # the command column is the launch line the plan prints: the card, its device and its port
    assert (
        rows[0]["fits"] == "✓"
        and rows[0]["command"] == f"rtx4090-24g#0: CUDA_VISIBLE_DEVICES=0 {best.evaluation.command} --port 8000"
    )
    assert rows[0]["command"] == result.replica_launch(best).text()


def test_the_command_column_is_each_copys_launch_line():
    """Llama-3.1-8B at 8K with llama.cpp on four L40S: one card a copy, four copies, one launch each on cards
    0..3 with ports 8000..8003: the column shows those lines, not the bare engine command that names neither
    devices nor ports."""
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    result = plan(shape, parse_cluster("1x4xl40s-48g"), PlanRequest(context_tokens=8192, engines=("llamacpp",)))
    best = result.options[0]
    assert best.layout.cards == 1 and best.replicas == 4
    lines = nd.option_rows(result)[0]["command"].splitlines()
    assert [line.split(" ", 2)[:2] for line in lines] == [
        ["l40s-48g#0:", f"CUDA_VISIBLE_DEVICES={k}"] for k in range(4)
    ]
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["8000", "8001", "8002", "8003"]
    assert all(best.evaluation.command in line for line in lines)


def test_rows_show_the_replicas_and_what_they_decode_together_as_the_cli_does():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    request = PlanRequest(context_tokens=8192, engines=("vllm",))
    one, two = (plan(shape, parse_cluster(f"{n}x8xh100-80g"), request) for n in (1, 2))
    row_one, row_two = nd.option_rows(one)[0], nd.option_rows(two)[0]
    assert row_one["option"] == row_two["option"]  # the same best way; the second node doubles its copies
    best_one, best_two = one.options[0], two.options[0]
    assert best_two.replicas == 2 * best_one.replicas
    assert (row_one["replicas"], row_two["replicas"]) == (f"{best_one.replicas:,}", f"{best_two.replicas:,}")
    # every copy at the asked concurrency: replicas x one copy's aggregate decode estimate
    together = best_two.replicas * best_two.speed.decode_aggregate_estimate_tokens_per_s
    assert row_two["cluster tok/s"] == f"{together:,.1f}"
    assert {"replicas", "cluster tok/s"} <= set(nd.ESSENTIAL_COLUMNS)


def test_near_misses_are_marked():
    _shape, _request, result = llama8b_on_a_4090()
    assert result.options == ()  # 15 GiB of weights and 16 GiB of KV on a 24 GB card
    misses = nd.near_miss_rows(result)
    assert {r["engine"] for r in misses} == {"vLLM", "SGLang"}
    assert all(r["fits"].startswith("✗ short by") and r["fits"].endswith("GiB") for r in misses)
    assert {(r["replicas"], r["cluster tok/s"]) for r in misses} == {("—", "—")}
    html = nd.rows_html(misses)
    assert html.count("class='misfit'") == len(misses) and "#b91c1c" in html
    # the app's answer table leaves its style block to the page, which carries it once: the same table without it
    bare = nd.rows_html(misses, style=False)
    assert "<style>" not in bare and html == bare.replace("<table ", nd.table_style() + "<table ", 1)


def test_refusals_grouped_by_rule():
    _shape, _request, result = llama8b_on_a_4090()
    groups = nd.refusal_groups(result)
    assert groups[0][0] == "memory" and groups[0][1] == result.pruned["memory"]
    assert all(row["reason"] for _rule, _n, rows in groups for row in rows)


def test_card_parts_and_sweep():
    shape, request, result = llama8b_on_a_4090()
    option = nd.near_misses(result, 1)[0]
    parts = nd.card_parts(option)
    assert {p["part"] for p in parts} == {"weights", "kv cache", "activations", "overhead"}
    assert abs(sum(p["gib"] for p in parts if p["order"] == 0) - option.per_card.total / GiB) < 1e-9
    sweep = nd.context_sweep(shape, [option], request, [4096, 131072])
    assert [r["fits"] for r in sweep] == [True, False]  # it holds a short context, not the long one
    assert sweep[0]["total_gib"] < sweep[1]["total_gib"]
    assert nd.context_sweep(shape, [option], request, [4096, 131072]) == sweep  # kept, same rows


def test_a_sweep_rechecks_only_the_options_a_context_move_brings():
    """A slider move that ranks the drawn options differently (here: the second option alone, named as another
    rank) takes each option's curve from the first sweep: the rows are those of a sweep from an empty cache, and
    no curve is added."""
    shape, request, result = llama8b_on_a_4090(8192)
    drawn = nd.sweep_options(result, best=2, misses=0)  # vLLM and SGLang on the one card
    assert len({nd._curve_key(o) for o in drawn}) == 2
    SWEEPS.clear()
    first = nd.context_sweep(shape, drawn, request, [4096, 131072], names=nd.option_names(result, drawn))
    assert len(SWEEPS) == 2 and {r["fits"] for r in first} == {True, False}  # 131,072 tokens do not fit one card
    moved = replace(request, context_tokens=16384)  # the asked context is no part of a curve
    renamed = {drawn[1].label: "#1 the same way"}
    again = nd.context_sweep(shape, drawn[1:2], moved, [4096, 131072], names=renamed)
    assert len(SWEEPS) == 2  # nothing re-checked
    assert again == [{**r, "option": "#1 the same way"} for r in first if r["option"].endswith(drawn[1].label)]
    SWEEPS.clear()
    assert nd.context_sweep(shape, drawn[1:2], moved, [4096, 131072], names=renamed) == again


def test_html_escapes():
    html = nd.rows_html([{"option": "<script>x</script>", "fits": "✓"}], ("fits", "option"))
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_engine_choices_name_every_engine():
    assert nd.ENGINE_CHOICES == {
        "all three, side by side": ("vllm", "sglang", "llamacpp"),
        "vLLM": ("vllm",),
        "SGLang": ("sglang",),
        "llama.cpp": ("llamacpp",),
    }


@cache
def llama70b_on_an_h100_node():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    request = PlanRequest(context_tokens=32768)
    return shape, request, plan(shape, parse_cluster("1x8xh100-80g"), request)


def test_a_gpu_run_draws_no_host_row_but_says_what_the_host_keeps():
    _shape, _request, result = llama70b_on_an_h100_node()
    gguf = next(o for o in result.options if o.engine == "llamacpp" and not o.layout.cpu)
    host = gguf.evaluation.host
    assert host is not None and gguf.evaluation.layers_on_host == 0
    assert {p["role"] for p in nd.card_parts(gguf)} == {c.role for c in gguf.evaluation.cards}  # no "host" row
    # llama.cpp keeps the token embeddings on the host: 128,256 × 8,192 × 2 bytes = 2.0 GiB
    assert host.weights == 128_256 * 8192 * 2
    assert nd.host_note(gguf).startswith("host RAM: 2.0 GiB (2.0 GiB of weights kept on the host")
    cpu = next(o for o in result.options if o.layout.cpu)
    assert "host" in {p["role"] for p in nd.card_parts(cpu)} and nd.host_note(cpu) is None


def test_artifact_keys_and_what_ifs_asked_by_name(offline):
    _shape, _request, result = llama70b_on_an_h100_node()
    what_if = replace(result.options[0].artifact, what_if=True, quant="fp8")
    assert (
        nd.artifact_key(result.options[1].artifact) == "original (bf16)" and nd.artifact_key(what_if) == "what-if fp8"
    )
    model = pick_model("meta-llama/Meta-Llama-3.1-70B")
    # a suggestion names int4-awq; the model's published AWQ checkpoint is what it means
    asked = nd.asked_what_ifs(model.what_ifs, ["what-if int4-awq", "what-if nonsense", "original (bf16)"])
    assert [a.name for a in asked] == ["hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4"]
    fp8 = model.what_ifs(("fp8",))[0]
    assert nd.asked_what_ifs(model.what_ifs, ["what-if fp8", nd.artifact_key(fp8)]) == (fp8,)  # once


def test_the_table_wraps_text_and_keeps_figures_whole():
    _shape, _request, result = llama70b_on_an_h100_node()
    html = nd.rows_html(nd.option_rows(result), nd.ESSENTIAL_COLUMNS)
    assert html.startswith("<div class='explorer-table' style='max-width:100%;overflow-x:auto'>")
    # text wraps anywhere; figures (class n) sit right and never wrap; one style block, not one a cell
    assert "#explorer-options th,#explorer-options td{padding:3px 6px;vertical-align:top;text-align:left;" in html
    assert "#explorer-options .n{text-align:right;white-space:nowrap}" in html
    assert "<th class='n'>cards</th>" in html and "<th>option</th>" in html and html.count("style=") == 1
    row = nd.option_rows(result)[0]
    assert f"<td>{row['option']}</td><td class='n'>{row['cards']}</td>" in html
    assert set(nd.ESSENTIAL_COLUMNS) < set(nd.TABLE_COLUMNS) and "command" not in nd.ESSENTIAL_COLUMNS


def test_nothing_fits_says_what_refused_every_way_when_no_miss_was_sized():
    """Issue 24: "The closest misses are in red" stood above an empty table when every refusal was a lower bound.
    405B on one H100 with vLLM: 756.0 GiB of bf16 weights need at least 11 cards, refused before any sizing."""
    from support.corpus import shape_of

    result = plan(shape_of("meta-llama__Meta-Llama-3.1-405B"), parse_cluster("1x1xh100-80g"),
                  PlanRequest(engines=("vllm",)))  # fmt: skip
    assert result.options == () and nd.near_misses(result) == []
    text = nd.nothing_fits_md(result, len(nd.near_miss_rows(result)))
    assert "closest misses" not in text and "no near miss to show" in text
    assert "1 × memory-lower-bound (vLLM · 1 × h100-80g (single): the weights (756.0 GiB)" in text
    assert "need at least 11 × h100-80g" in text


def test_nothing_fits_points_at_the_misses_when_some_were_sized():
    _shape, _request, result = llama8b_on_a_4090()  # 128k of bf16 KV beside 15 GiB of weights: sized, and short
    assert result.options == () and nd.near_miss_rows(result)
    assert "closest misses are in red" in nd.nothing_fits_md(result, len(nd.near_miss_rows(result)))


def test_a_table_without_the_command_column_places_no_copy():
    """commands=False: the same rows less the launch lines, and replica_launch never called (it places every copy
    on the cluster's nodes: the slow part of a row on a large cluster)."""
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-8B")
    result = plan(shape, parse_cluster("1x4xl40s-48g"), PlanRequest(context_tokens=8192, engines=("llamacpp",)))
    placed = []

    def launch(option):
        placed.append(option)
        return result.replica_launch(option)

    counted = replace(result, replica_launch=launch)
    with_commands = nd.option_rows(counted)
    assert len(placed) == len(with_commands) == len(result.options) == 2  # one card, or the CPU
    placed.clear()
    without = nd.option_rows(counted, commands=False) + nd.near_miss_rows(counted, commands=False)
    assert placed == [] and all("command" not in row for row in without)
    assert [{k: v for k, v in row.items() if k != "command"} for row in with_commands] == without[:2]
