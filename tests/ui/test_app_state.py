"""explorer.ui.app_state: the app's whole state in a URL query and back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from explorer.ui.app_state import GOALS, QUERY_KEYS, AppDefaults, app_defaults, to_query
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
    assert d.context_tokens == 4096 and d.settings == {"ngl": "10", "no-mmap": "on"}


def test_only_what_differs_is_written():
    assert to_query(AppDefaults()) == {}
    state = AppDefaults(
        model="Qwen/Qwen3-8B",
        weights=("original (bf16)", "what-if fp8"),
        spec="1x4xl40s-48g",
        context_tokens=8192,
        engine="vllm",
        goal="speed",
        pinned="0,1",
        settings={"gpu-memory-utilization": "0.8"},
    )
    assert to_query(state) == {
        "model": "Qwen/Qwen3-8B",
        "weights": "original (bf16),what-if fp8",
        "cluster": "1x4xl40s-48g",
        "context": "8192",
        "engine": "vllm",
        "goal": "speed",
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
