"""explorer.ui.app_state: the app's whole state in a URL query and back."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from hypothesis import given
from hypothesis import strategies as st

from explorer.ui.app_state import GOALS, QUERY_KEYS, AppDefaults, app_defaults, apply_change, to_query
from explorer.ui.engine_settings import SETTINGS_BY_KEY


def test_defaults_from_a_link():
    d = app_defaults(
        {"model": "Qwen/Qwen3-8B", "context": "16384"},
        {"cluster": ["2x8xh100-80g@ib0"], "engine": "vllm", "concurrency": "x", "ngl": "20", "nonsense": "1"},
    )
    assert (d.model, d.context_tokens, d.spec, d.engine, d.concurrency) == (
        "Qwen/Qwen3-8B",
        16384,
        "2x8xh100-80g@ib0",
        "vllm",
        1,  # "x" does not parse: the default stays
    )
    assert d.settings == {"ngl": "20"}
    assert app_defaults({}) == app_defaults() == AppDefaults()


def test_cli_arguments_and_old_engine_names():
    d = app_defaults({"--model": "Qwen/Qwen3-8B", "--engine": "llama.cpp", "--kv": "fp8"})
    assert (d.model, d.engine, d.kv_dtype) == ("Qwen/Qwen3-8B", "llamacpp", "fp8")
    assert app_defaults({"engine": "all three, side by side"}).engine == "all"
    assert app_defaults({"engine": "trt-llm"}).engine == "all"  # unknown: ignored


def test_later_sources_win_and_settings_merge():
    d = app_defaults({"context": "8192", "ngl": "10"}, {"context": "4096", "no-mmap": "on"})
    # an old link's no-mmap is read under the key that replaced it (llama.cpp's --load-mode none)
    assert d.context_tokens == 4096 and d.settings == {"ngl": "10", "load-mode-none": "on"}
    assert to_query(d)["load-mode-none"] == "on" and "no-mmap" not in to_query(d) and "no-mmap" in QUERY_KEYS


def test_only_what_differs_is_written():
    assert to_query(AppDefaults()) == {}
    state = AppDefaults(
        model="Qwen/Qwen3-8B",
        weights=("original (bf16)", "what-if fp8"),
        spec="1x4xl40s-48g",
        context_tokens=8192,
        engine="vllm",
        goal="fastest",
        pinned="0,1",
        settings={"gpu-memory-utilization": "0.8"},
    )
    assert to_query(state) == {
        "model": "Qwen/Qwen3-8B",
        "weights": "original (bf16),what-if fp8",
        "cluster": "1x4xl40s-48g",
        "context": "8192",
        "engine": "vllm",
        "goal": "fastest",
        "gpus": "0,1",
        "gpu-memory-utilization": "0.8",
    }
    assert set(to_query(state)) <= QUERY_KEYS


_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters=","), min_size=1)


@given(
    model=_texts.filter(lambda t: t.strip() == t),
    context=st.integers(min_value=1, max_value=10_000_000),
    concurrency=st.integers(min_value=1, max_value=512),
    engine=st.sampled_from(["all", "vllm", "sglang", "llamacpp"]),
    goal=st.sampled_from(list(GOALS)),
    settings=st.dictionaries(st.sampled_from(sorted(SETTINGS_BY_KEY)), st.sampled_from(["1", "0.5", "on", "3,1"])),
)
def test_a_query_round_trips(model, context, concurrency, engine, goal, settings):
    state = AppDefaults(
        model=model, context_tokens=context, concurrency=concurrency, engine=engine, goal=goal, settings=settings
    )
    assert app_defaults(to_query(state)) == state


def test_every_planner_goal_is_on_the_menu_and_old_links_still_open():
    from explorer.plan.ranking import GOALS as PLANNER_GOALS

    assert list(GOALS) == list(PLANNER_GOALS)
    assert app_defaults({"goal": "speed"}).goal == "fastest"  # a link made before issue 13's goals
    assert app_defaults({"goal": "default"}).goal == "fewest-cards"
    assert app_defaults({"goal": "cheapest"}).goal == "fewest-cards"  # not a goal: ignored


def test_a_suggestions_change_lands_in_the_state():
    state = AppDefaults(model="Qwen/Qwen3-8B", spec="1x1xl4-24g", pinned="0", concurrency=4, kv_dtype="auto")
    assert apply_change(state, {"quant": "int4-awq"}).weights == ("what-if int4-awq",)
    assert apply_change(state, {"kv_dtype": "fp8"}).kv_dtype == "fp8"
    assert apply_change(state, {"context": 40960}).context_tokens == 40960
    assert apply_change(state, {"concurrency": 3}).concurrency == 3
    moved = apply_change(replace(state, cluster_file='{"nodes": []}'), {"cluster": "1x2xl4-24g"})
    assert (moved.spec, moved.cluster_file, moved.pinned) == ("1x2xl4-24g", None, "")  # the pins were other cards
    assert apply_change(state, {"something-new": 1}) == state
    assert app_defaults(to_query(apply_change(state, {"quant": "Q4_K_M"}))).weights == ("what-if Q4_K_M",)


def test_linked_numbers_past_what_the_app_plans_are_refused_with_a_sentence():
    # issue 25: a link of context=10^30 made the app's cells raise; now the default stays and the app says why
    d = app_defaults({"context": str(10**30), "concurrency": "2000000", "model": "Qwen/Qwen3-8B"})
    assert (d.context_tokens, d.concurrency, d.model) == (32768, 1, "Qwen/Qwen3-8B")
    assert d.refused == (
        "context a 31-digit number is past the 1,073,741,824 tokens the app plans for; the default is kept",
        "concurrency 2,000,000 is past the 1,048,576 sequences the app plans for; the default is kept",
    )
    assert app_defaults({"context": "1073741824"}).context_tokens == 2**30 and not app_defaults({}).refused
    assert "refused" not in str(to_query(d))


def test_the_readme_link_opens_the_state_it_describes():
    # README.md: "http://localhost:2718/?model=...: Llama 3.1 8B on two 8 x H100 nodes at 131,072 tokens, vLLM alone"
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    link = re.search(r"\((http://localhost:2718/\?[^)\s]+)\)", readme)
    assert link is not None, "the README shows a link with state"
    query = parse_qs(urlparse(link[1]).query)
    assert set(query) <= QUERY_KEYS
    state = app_defaults(query)
    assert (state.model, state.spec, state.context_tokens, state.engine) == (
        "meta-llama/Meta-Llama-3.1-8B",
        "2x8xh100-80g@ib0",
        131_072,
        "vllm",
    )
    assert to_query(state) == {k: v[0] for k, v in query.items()}  # the link is what the app itself would write
