"""The notebooks run headless (``app.run()``) with the network blocked, and compute what they show.

Each test imports a notebook from its file (under the module name
``notebook_<name>``), runs it on the shipped
snapshot and asserts on the values its cells define.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace

from support.corpus import ROOT
from support.readme_sample import SHOTS, readme_query, readme_state

from explorer.artifacts.offer import fallback_artifacts
from explorer.plan.planner import plan, with_suggestions
from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
from explorer.sources.snapshot.read import load_snapshot
from explorer.speed.settings import SpeedSettings
from explorer.ui.app_state import AppDefaults, apply_change, to_query
from explorer.ui.engine_settings import SETTINGS
from explorer.units import GiB

NOTEBOOKS = ROOT / "notebooks"
MINE = ("app.py", "kv_cache.py")


def load_notebook(filename: str):
    """The notebook's marimo ``App``, imported from its file as ``notebook_<name>``."""
    path = NOTEBOOKS / filename
    spec = importlib.util.spec_from_file_location(f"notebook_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def run_explorer(**defaults):
    """Run notebooks/app.py with :class:`AppDefaults` fields overridden; returns its definitions."""
    _outputs, defs = load_notebook("app.py").run(defs={"defaults": AppDefaults(**defaults)})
    return defs


def test_explorer_default_plan(offline):
    defs = run_explorer()
    model, result = defs["model"], defs["result"]
    assert model.origin == "snapshot" and model.repo == "meta-llama/Meta-Llama-3.1-70B"
    assert defs["context"].value == 32768 and defs["request"].context_tokens == 32768
    assert result.options, "the default model must fit the default cluster"
    best = result.options[0]
    assert best.fits
    # the notebook's plan is the planner's own: the same request on the same cluster gives the same best option
    again = plan(
        model.shape, parse_cluster("1x8xh100-80g"), defs["request"], artifacts=model.artifacts, model_ref=model.repo
    )
    assert again.options[0].label == best.label
    assert again.options[0].per_card.total == best.per_card.total
    # and the table shows it, in GiB: "70.9 / 79.1"
    row = defs["option_rows"][0]
    assert row["option"] == best.label
    assert row["per card (GiB)"] == f"{best.per_card.total / GiB:,.1f} / {best.per_card.usable / GiB:,.1f}"
    assert row["max context"] == f"{best.evaluation.max_context_tokens:,}"
    # 70B at 32k on 2 cards just misses for vLLM/SGLang: shown in red with ✗
    assert defs["miss_rows"] and all(r["fits"].startswith("✗") for r in defs["miss_rows"])
    # KV per token: 80 layers × 2 × 8 KV heads × 128 × 2 bytes
    assert model.shape.kv_bytes_per_token() == 327_680
    # the drawn card is the table's first, and the cluster's description is the parsed cluster's
    assert defs["picked"] is best and defs["cluster"].total_gpus == 8
    # the context chart's data: the table's first four at every slider step, then the misses
    steps = defs["context_steps"]
    assert steps[0] == 512 and steps[-1] == model.shape.max_context_tokens
    assert {r["context"] for r in defs["sweep"]} == set(steps)
    drawn = list(dict.fromkeys(r["option"] for r in defs["sweep"]))
    assert drawn[:4] == [f"#{i} {o.label}" for i, o in enumerate(result.options[:4], 1)]
    assert any(not r["fits"] for r in defs["sweep"])


def test_explorer_engines_side_by_side(offline):
    defs = run_explorer(model="meta-llama/Meta-Llama-3.1-8B", context_tokens=8192)
    engines = {o.engine for o in defs["result"].options}
    assert engines == set(defs["request"].engines) == {"vllm", "sglang", "llamacpp"}
    speeds = [o.speed for o in defs["result"].options]
    if any(s is not None for s in speeds):  # the speed column shows when the planner estimates it
        assert defs["option_rows"][0]["decode tok/s"] != "—"


def test_explorer_linked_cluster_and_engine(offline):
    defs = run_explorer(
        model="meta-llama/Meta-Llama-3.1-8B",
        spec="1x1xrtx4090-24g",
        engine="vllm",
        context_tokens=131072,
        kv_dtype="bf16",
    )
    assert defs["spec_box"].value == "1x1xrtx4090-24g" and defs["cluster"].total_gpus == 1
    assert defs["result"].options == ()  # 16 GiB of bf16 KV does not fit a 24 GB card next to 15 GiB of weights
    miss = defs["miss_rows"][0]
    assert miss["engine"] == "vLLM" and miss["fits"].startswith("✗ short by")


def test_explorer_shows_replicas_and_what_the_cluster_decodes_together(offline):
    # a second node doubles the copies of the best way (as `explorer plan` shows in its repl column)
    one, two = (run_explorer(spec=f"{n}x8xh100-80g", engine="vllm") for n in (1, 2))
    best_one, best_two = one["result"].options[0], two["result"].options[0]
    assert best_one.label == best_two.label and best_two.replicas == 2 * best_one.replicas
    assert two["option_rows"][0]["replicas"] == f"{best_two.replicas:,}"
    together = best_two.replicas * best_two.speed.decode_aggregate_estimate_tokens_per_s
    assert two["option_rows"][0]["cluster tok/s"] == f"{together:,.1f}"
    assert two["picked"] is best_two  # the per-card chart draws it, its replicas in the title


def test_the_readme_pictures_show_what_the_planner_ranks_first_now(offline):
    # docs/screenshots.json: what the browser test saw when it took each README picture (EXPLORER_SCREENSHOT=1);
    # a planner that ranks another way first makes the pictures stale: take them again
    shots = json.loads(SHOTS.read_text(encoding="utf-8"))
    _outputs, defs = load_notebook("app.py").run(defs={"defaults": readme_state()})
    first = defs["option_rows"][0]["option"]
    assert set(shots) == {"screenshot-1440.png", "screenshot-1024.png"}
    for name, shot in shots.items():
        assert shot["query"] == readme_query(), f"{name} shows another state than the README's sample"
        assert shot["first option"] == first, (
            f"docs/{name} shows {shot['first option']!r} first; the app ranks {first!r} first now: "
            "EXPLORER_SCREENSHOT=1 python -m pytest -m browser tests/notebooks/test_browser.py takes them again"
        )


def test_explorer_bad_spec_is_a_callout(offline):
    outputs, defs = load_notebook("app.py").run(defs={"defaults": AppDefaults(spec="1x8xnosuchgpu")})
    assert "result" not in defs  # the plan cell stopped
    assert "nosuchgpu" in defs["cluster_error"]
    assert not any("Traceback" in getattr(o, "text", "") for o in outputs if o is not None)


def test_a_count_the_cluster_controls_cannot_show_keeps_the_sidebar_with_a_callout(offline):
    # issue 25: a ?cluster= link with 10^9 nodes made the controls' cell raise, and the sidebar vanished
    outputs, defs = load_notebook("app.py").run(defs={"defaults": AppDefaults(spec="999999999x8xh100-80g")})
    assert "node count is 999,999,999; the controls show 1 to 100,000" in defs["term_refusal"]
    assert defs["term_nodes"] is None and "spec_box" in defs  # the sidebar's cell ran with the spec box
    assert not any("Traceback" in getattr(o, "text", "") for o in outputs if o is not None)


def test_explorer_engine_settings_reach_the_request(offline):
    """The settings section is PlanRequest's fields: a link's values land in the request the planner gets."""
    defs = run_explorer(
        model="meta-llama/Meta-Llama-3.1-8B",
        spec="1x1xrtx4090-24g",
        context_tokens=8192,
        settings={"gpu-memory-utilization": "0.8", "ngl": "20", "load-mode-none": "on", "max-num-seqs": "oops"},
    )
    request = defs["request"]
    assert (request.gpu_memory_utilization, request.n_gpu_layers, request.mmap) == (0.8, 20, False)
    assert request.max_num_seqs is None and defs["settings_errors"] == ["--max-num-seqs: 'oops' is not a whole number"]
    vllm = next(o for o in defs["result"].options if o.engine == "vllm")
    # vLLM may use 0.8 of the card as torch sees it: 0.8 × 24,080 MiB (nvidia-smi says 24,564 MiB)
    assert vllm.per_card.usable == int(0.8 * 24080 * 1024**2)


def test_explorer_builds_the_engine_settings_only_when_asked(offline):
    """An open builds one switch, not the ~40 setting controls: off, no setting is in force and no card is pinned;
    a link that carries a setting or pinned GPUs opens with the controls built and its values in them."""
    plain = run_explorer()
    assert plain["engine_settings_on"].value is False and plain["settings"] is None and plain["pin"] is None
    assert plain["request_settings"] == {} and plain["settings_errors"] == []
    assert set(plain["settings_values"]) == {s.key for s in SETTINGS} and not any(plain["settings_values"].values())
    assert plain["app_state"].pinned == "" and plain["app_state"].settings == {}
    pinned = run_explorer(pinned="0,1")
    assert pinned["engine_settings_on"].value is True and pinned["pin"].value == "0,1"
    assert len(pinned["settings"].value) == len(SETTINGS) and pinned["app_state"].pinned == "0,1"


def test_explorer_state_round_trips_through_the_url(offline):
    state = AppDefaults(
        model="Qwen/Qwen3-8B",
        spec="1x4xl40s-48g",
        context_tokens=16384,
        engine="vllm",
        kv_dtype="fp8",
        concurrency=8,
        goal="fastest",
        settings={"gpu-memory-utilization": "0.85"},
    )
    defs = run_explorer(**{f: getattr(state, f) for f in state.__dataclass_fields__})
    assert defs["app_state"] == state  # what the URL cell writes is what the link opened with
    assert to_query(defs["app_state"])["cluster"] == "1x4xl40s-48g"


def test_explorer_unknown_id_suggests_snapshot_ids(offline):
    outputs, defs = load_notebook("app.py").run(defs={"defaults": AppDefaults(model="Qwen/Qwen3-14B")})
    assert "result" not in defs and defs["model_problem"].suggestions[:2] == ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B"]
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert "Did you mean" in texts and "Qwen/Qwen3-8B" in texts and "--offline" not in texts


def test_explorer_pasted_config(offline):
    import json

    import marimo as mo

    config = json.dumps(load_snapshot().get("Qwen/Qwen3-8B").config)
    _outputs, defs = load_notebook("app.py").run(defs={"pasted": mo.ui.text_area(value=config)})
    assert defs["model"].origin == "pasted" and defs["result"].options
    assert defs["app_state"].model == AppDefaults().model  # a pasted config is not a link


def test_the_app_plans_a_64_gpu_cluster_at_every_context_step(offline):
    """A slider move re-plans only (its latency is a benchmark: ``python -m explorer.bench.plan``)."""
    defs = run_explorer(spec="8x8xh100-80g@ib0")
    assert defs["cluster"].total_gpus == 64
    model, request = defs["model"], defs["request"]
    cluster = parse_cluster("8x8xh100-80g@ib0")
    assert cluster.total_gpus == 64
    for context in defs["context_steps"]:
        result = plan(model.shape, cluster, replace(request, context_tokens=context), artifacts=model.artifacts)
        assert all(o.evaluation.max_context_tokens >= context for o in result.options if o.fits)


def test_kv_notebook_shows_the_shapes_figures(offline):
    _outputs, defs = load_notebook("kv_cache.py").run()
    snapshot = load_snapshot()
    kv, context, seqs = defs["kv_dtype"].value, defs["context"].value, defs["sequences"].value
    assert (kv, context, seqs) == ("auto", 32768, 1)
    for name, (_design, shape) in defs["lesson"].items():
        assert snapshot.shape(shape.name) is shape
        assert defs["per_token"][name] == shape.kv_bytes_per_token(kv)
        assert defs["at_context"][name] == shape.kv_bytes(context, kv, seqs)
        assert sum(r["bytes"] for r in defs["tables"][name]) == defs["at_context"][name]
    gqa = defs["tables"]["Meta-Llama-3.1-8B (GQA)"][0]
    assert gqa["formula"] == "2 × 32 × 8 × 128 × 2 = 131,072 bytes a token"
    mla = defs["tables"]["DeepSeek-V3 (MLA)"][0]
    assert mla["formula"].startswith("61 × (512 + 64) × 2 = 70,272 bytes a token")
    # a hybrid's recurrent layers are flat in context; its attention layers grow
    hybrid = {r["kind"]: r for r in defs["tables"]["Qwen3-Next-80B-A3B-Thinking (hybrid linear)"]}
    assert hybrid["recurrent"]["tokens kept"] == 0 and hybrid["full"]["tokens kept"] == context
    assert {r["model"] for r in defs["curve"]} == set(defs["lesson"])


def test_notebooks_pass_marimo_check():
    files = [str(NOTEBOOKS / f) for f in MINE]
    done = subprocess.run(
        [sys.executable, "-m", "marimo", "check", "--strict", *files],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in (done.stdout + done.stderr).lower()


# --- notebooks/placement.py: many models on one fleet -------------------------------------------------


def run_placement(**defs):
    """Run notebooks/placement.py with some definitions overridden; returns (outputs, definitions)."""
    return load_notebook("placement.py").run(defs=defs)


def _texts(outputs) -> str:
    return "\n".join(getattr(o, "text", "") for o in outputs if o is not None)


def test_placement_default_fleet(offline):
    from explorer.units import gib

    outputs, defs = run_placement()
    placement, models, offer = defs["placement"], defs["models"], defs["offer"]
    assert defs["spec"].value == "1x3xl40s-48g" and defs["engine"].value == "vllm" and defs["usable"].value == 0.9
    assert [m.name for m in models] == ["chat", "vision", "ocr", "rerank", "embed"]
    assert defs["term_errors"] == [] and defs["term_notes"] == []
    assert len(offer.cards) == 3 and len(placement.instances) == 6  # embed's two replicas and one of each other
    # the two 32B models never share a phase and do not both fit: one swap group on cards 0 and 1,
    # charged per card its largest member's charge there (chat's 35.6 GiB), not the sum
    (group,) = placement.swap_groups
    assert group.members == ("chat", "vision") and group.cards == (0, 1)
    chat, vision = placement.instances_of("chat")[0], placement.instances_of("vision")[0]
    assert group.charge_bytes == tuple(max(a, b) for a, b in zip(chat.split_bytes, vision.split_bytes, strict=True))
    assert placement.cards[1].charged_bytes == group.charge_bytes[1] < chat.split_bytes[1] + vision.split_bytes[1]
    assert {i.cards for i in placement.instances_of("embed")} == {(0,), (2,)}  # replicas spread
    assert placement.cards[2].models == ("ocr", "rerank", "embed")  # co-location
    assert not placement.tight and not placement.refused and not placement.missing_replicas
    # what it shows: the table rows, the chart rows, the notes
    assert [r["model"] for r in defs["instance_rows"]] == ["chat", "vision", "ocr", "rerank", "embed", "embed"]
    assert defs["instance_rows"][0]["per card (GiB)"] == ", ".join(f"{b / GiB:,.1f}" for b in chat.split_bytes)
    assert [r["charged (GiB)"] for r in defs["card_rows"]] == [f"{c.charged_bytes / GiB:,.1f}" for c in placement.cards]
    assert sum(r["row"] == "slot" for r in defs["segments"]) == 2  # the group's box on each of its two cards
    assert defs["notes"]["swap groups"][0].startswith("chat / vision: one resident at a time on cards 0, 1")
    # the plan editor starts from the placement, and the planner's check agrees with it
    assert json.loads(defs["plan_editor"].value)["swap_groups"] == [["chat", "vision"]]
    check = defs["plan_check"]
    assert check.fits and [c.charged_bytes for c in check.placement.cards] == [c.charged_bytes for c in placement.cards]
    text = _texts(outputs)
    assert "6 instances of 5 models" in text and "The plan fits" in text and "Traceback" not in text
    assert f"card 0 {gib(group.charge_bytes[0])}" in text


def test_placement_edited_plan_shows_the_planners_violation(offline):
    import marimo as mo

    from explorer.units import gib

    _outputs, defs = run_placement()
    plan = json.loads(defs["plan_editor"].value)
    plan["models"]["ocr"] = {"cards": [0]}  # onto the swap group's card, which has 4.4 GiB left
    outputs, defs = run_placement(plan_editor=mo.ui.text_area(value=json.dumps(plan)))
    ocr = next(m for m in defs["models"] if m.name == "ocr")
    card0, group = defs["placement"].cards[0], defs["placement"].swap_groups[0]
    expected = (
        f"ocr pinned to card 0 needs {gib(ocr.footprint_bytes)} but card 0 has "
        f"{gib(card0.usable_bytes - group.charge_bytes[0])} usable left after chat, vision "
        f"(of {gib(card0.usable_bytes)})"
    )
    assert expected == (
        "ocr pinned to card 0 needs 17.9 GiB but card 0 has 4.4 GiB usable left after chat, vision (of 40.5 GiB)"
    )
    assert [v.message for v in defs["plan_check"].violations] == [expected]
    assert "The plan does not fit" in _texts(outputs) and expected in _texts(outputs)


def test_placement_bad_plan_json_is_a_callout(offline):
    import marimo as mo

    outputs, defs = run_placement(plan_editor=mo.ui.text_area(value='{"models": {"chat": [0, 1],'))
    assert "not valid JSON" in defs["plan_check"].error
    text = _texts(outputs)
    assert "The plan does not read" in text and "not valid JSON" in text and "Traceback" not in text


def test_placement_tight_on_one_card_and_a_bad_spec(offline):
    import marimo as mo

    from explorer.ui.presets import preset_by_name

    one = preset_by_name("One RTX 4090")
    _outputs, defs = run_placement(preset=one, spec=mo.ui.text(value=one.spec))
    placement = defs["placement"]
    assert [t.model for t in placement.tight] == ["chat", "vision", "ocr", "rerank", "embed"]
    assert all(r["fits"].startswith("✗ tight") for r in defs["instance_rows"])
    assert defs["plan_check"].violations  # the tight placement, pinned as it stands, does not fit
    outputs, defs = run_placement(preset=one, spec=mo.ui.text(value="1x2xnosuchgpu"))
    assert "placement" not in defs
    text = _texts(outputs)
    assert "does not work here" in text and "nosuchgpu" in text and "Traceback" not in text


def test_placement_notebook_passes_marimo_check():
    done = subprocess.run(
        [sys.executable, "-m", "marimo", "check", "--strict", str(NOTEBOOKS / "placement.py")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in (done.stdout + done.stderr).lower()


def test_placement_takes_any_id_the_resolver_takes_and_gives_launch_commands(offline):
    """A local config.json path and a Hub rename are placed like snapshot ids; an id nobody knows offline
    says to press Fetch; every instance gets its GPUs and a command."""
    import marimo as mo
    from support.corpus import CONFIGS

    extra = mo.ui.text_area(
        value=f"local = {CONFIGS / 'Qwen__Qwen2.5-1.5B.json'}:4k\nrenamed = meta-llama/Llama-3.1-8B:4k\n"
        "missing = nosuch/model-7b"
    )
    from explorer.ui.fleet_rows import FLEET_PRESETS

    outputs, defs = run_placement(extra_terms=extra, preset=FLEET_PRESETS[0], spec=mo.ui.text(value="1x8xl40s-48g"))
    names = [m.name for m in defs["models"]]
    assert names[-2:] == ["local", "renamed"]
    assert any(
        e.startswith("missing: nosuch/model-7b is neither in the snapshot nor in the cache: press Fetch")
        for e in defs["term_errors"]
    )
    launches = {(r["model"], r["replica"]): r for r in defs["launches"]}
    local = launches[("local", "0")]
    assert (
        local["where"].startswith("l40s-48g#0 GPUs ") and str(CONFIGS / "Qwen__Qwen2.5-1.5B.json") in local["command"]
    )
    gpus = local["where"].split("GPUs ")[1]
    assert local["command"].startswith(f"l40s-48g#0: CUDA_VISIBLE_DEVICES={gpus} vllm serve ")
    assert launches[("renamed", "0")]["command"].split()[4] == "meta-llama/Llama-3.1-8B"  # launched by the asked id
    assert "Traceback" not in _texts(outputs)


def test_kv_notebook_marks_contexts_past_a_models_limit(offline):
    import marimo as mo

    steps = [32_768, 262_144]
    outputs, defs = load_notebook("kv_cache.py").run(
        defs={
            "context": mo.ui.slider(steps=steps, value=262_144),
            "kv_dtype": mo.ui.dropdown(options=["auto"], value="auto"),
            "sequences": mo.ui.slider(steps=[1, 2], value=1),
        }
    )
    text = _texts(outputs)
    past = [n for n, (_d, shape) in defs["lesson"].items() if shape.max_context_tokens < 262_144]
    assert past, "some lesson model reads less than 256k tokens"
    for name in past:  # its KV figure and its limit carry the mark, and the note names it
        limit = defs["lesson"][name][1].max_context_tokens
        assert f"{limit:,} †" in text and name.split(" (")[0] in text.split("† past the model's own limit")[1]
    assert "262,144 tokens is more than" in text


def test_explorer_opens_a_linked_cluster_file(offline):
    """A cluster file (the URL carries it as JSON) is planned on: per-card free memory the spec cannot say."""
    import json

    cluster_json = json.dumps(
        {
            "nodes": [
                {
                    "name": "lab",
                    "gpus": [{"class": "h100-80g", "count": 2, "card_free_bytes": [85520809984, 10737418240]}],
                }
            ]
        }
    )
    defs = run_explorer(model="meta-llama/Meta-Llama-3.1-8B", context_tokens=8192, cluster_file=cluster_json)
    assert defs["cluster"].nodes[0].name == "lab" and defs["cluster_source"] == cluster_json
    assert defs["app_state"].cluster_file == cluster_json  # and the link keeps it
    assert defs["cluster"].nodes[0].gpus[0].card_free_bytes == (85520809984, 10737418240)  # what a spec cannot say
    assert defs["result"].options and defs["result"].options[0].layout.cards == 1


def test_explorer_suggestions_are_changes_a_click_applies(offline):
    """Nothing fits (a bf16 KV cache named: at fp8 the FP8 checkpoint holds the one sequence): the app lists the
    planner's suggestions as buttons; the state a click sets plans a fit."""
    state = AppDefaults(model="meta-llama/Meta-Llama-3.1-8B", spec="1x1xrtx4090-24g", engine="vllm",
                        context_tokens=131072, kv_dtype="bf16")  # fmt: skip
    outputs, defs = load_notebook("app.py").run(defs={"defaults": state})
    assert defs["result"].options == ()
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    again = with_suggestions(
        defs["result"],
        defs["shape"],
        defs["cluster"],
        defs["chosen"],
        speed=SpeedSettings(prices=shipped_prices()),
        catalogue=shipped_catalogue(),
        precisions=fallback_artifacts(defs["shape"], defs["chosen"], defs["model"].checkpoints),
    ).suggestions
    assert len(defs["suggestion_buttons"]) == len(again) >= 2  # one button a suggestion
    assert "Nothing fits" in texts
    # 128k of bf16 KV (16 GiB) beside 15 GiB of weights: a shorter context is the change that fits
    shorter = next(s for s in again if s.kind == "context")
    assert shorter.fits and shorter.change["context"] < 131072
    assert f"a context of {shorter.change['context']:,} tokens" in texts  # its button
    clicked = apply_change(defs["app_state"], shorter.change)
    after = run_explorer(**{f: getattr(clicked, f) for f in clicked.__dataclass_fields__})
    assert after["request"].context_tokens == shorter.change["context"] == after["context"].value
    assert after["result"].options and after["result"].options[0].label == shorter.best.label


def test_explorer_goal_and_the_best_of_each_engine(offline):
    defs = run_explorer(goal="throughput")
    result = defs["result"]
    assert result.goal == "throughput"
    best = result.best_per_engine()
    assert set(best) == {"vllm", "sglang", "llamacpp"}
    assert best[result.options[0].engine] is result.options[0]


def test_explorer_checks_a_pasted_engine_log(offline):
    import marimo as mo
    from support.engine_logs import entry

    text = entry("vllm__gpt-oss-20b__H100__3")["excerpt"]
    _outputs, defs = load_notebook("app.py").run(defs={"engine_log": mo.ui.text_area(value=text)})
    rows = defs["log_rows"]
    assert rows[0]["part"] == "weights" and rows[0]["log"] == "7.01 GiB"  # "Model loading took 7.01 GiB"
    assert rows[-1]["part"] == "verdict" and rows[-1]["difference"] == "agree"
    _outputs, defs = load_notebook("app.py").run(defs={"engine_log": mo.ui.text_area(value="just words")})
    assert defs["log_rows"] is None  # a callout says which lines were expected


def test_explorer_links_the_lessons(offline):
    """Run as one file (`marimo run notebooks/app.py`) the server serves no other notebook: each lesson is named
    with the command that opens it, never a link that answers 404."""
    outputs, _defs = load_notebook("app.py").run(defs={"defaults": AppDefaults()})
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    for page in ("kv_cache.py", "parallelism.py", "quantisation.py", "speed.py"):
        assert f"marimo run notebooks/{page}" in texts and f'href="{page}"' not in texts
        assert (NOTEBOOKS / page).exists()


def test_explorer_plans_the_cli_fallback_when_the_own_weights_keep_no_gpu_layout(offline):
    """70B's 131 GiB of bf16 on one 48 GB card: as `explorer plan` does, the quantised precisions are planned too."""
    outputs, defs = load_notebook("app.py").run(
        defs={"defaults": AppDefaults(spec="1x1xl40s-48g", context_tokens=8192)}
    )
    result = defs["result"]
    assert "Q4_K_M" in result.widened and result.options
    assert result.options[0].layout.cards == 1 and result.options[0].artifact.label in result.widened
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert "own weights keep no layout on the GPUs alone" in texts
    # a what-if chosen by hand is planned alone: no fallback
    chosen = run_explorer(spec="1x1xl40s-48g", context_tokens=8192, weights=("what-if fp8",))
    assert chosen["result"].widened == () and {o.artifact.what_if for o in chosen["result"].options} <= {True}


def test_explorer_shows_the_drawn_options_notes(offline):
    """Issue 24: SGLang's "all 2 GPUs combined need at least X GiB" reached only the JSON, never the app."""
    state = AppDefaults(model="meta-llama/Meta-Llama-3.1-8B", spec="1x2xl4-24g", engine="sglang",
                        context_tokens=65536)  # fmt: skip
    outputs, defs = load_notebook("app.py").run(defs={"defaults": state})
    picked = defs["picked"]
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    combined = [n for n in picked.notes if "GPUs combined need at least" in n]
    assert picked.engine == "sglang" and picked.layout.cards == 2 and combined
    assert all(n in texts for n in combined), combined


def test_explorer_says_why_nothing_fits_when_no_miss_was_sized(offline):
    """Issue 24: an empty table under "The closest misses are in red" when every refusal was a lower bound."""
    state = AppDefaults(model="meta-llama/Meta-Llama-3.1-405B", spec="1x1xh100-80g", engine="vllm")
    outputs, defs = load_notebook("app.py").run(defs={"defaults": state})
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert defs["result"].options == () and defs["miss_rows"] == []
    assert "closest misses are in red" not in texts and "no near miss to show" in texts


def test_explorer_offers_a_precision_with_a_cluster_and_a_click_plans_it(offline):
    """Issue 24: 405B on one H100; the app offers the published FP8 checkpoint on 8 × H100, and a click plans it."""
    state = AppDefaults(model="meta-llama/Meta-Llama-3.1-405B", spec="1x1xh100-80g", context_tokens=4096)
    outputs, defs = load_notebook("app.py").run(defs={"defaults": state})
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert defs["result"].options == ()
    # Meta's own FP8 checkpoint is fbgemm_fp8, one scale a row (its attention kept bf16), not 128 × 128 blocks
    assert "FP8 (fp8 per-channel (FBGEMM)) on 1x8xh100-80g" in texts
    change = {"quant": "fp8 per-channel (FBGEMM)", "cluster": "1x8xh100-80g"}
    clicked = apply_change(defs["app_state"], change)
    after = run_explorer(**{f: getattr(clicked, f) for f in clicked.__dataclass_fields__})
    first = after["result"].options[0]
    assert (first.layout.cards, first.artifact.repo) == (8, "meta-llama/Meta-Llama-3.1-405B-FP8")


def test_explorer_says_what_it_assumed_of_a_class_the_catalogue_lacks(offline):
    state = AppDefaults(model="meta-llama/Meta-Llama-3.1-8B", spec="1x1xm3-pro-36g:36GiB", context_tokens=4096)
    outputs, defs = load_notebook("app.py").run(defs={"defaults": state})
    texts = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert defs["result"].options and "Assumed:" in texts
    assert "m3-pro-36g:36864MiB is not in the catalogue: planned as a discrete card of 36.0 GiB" in texts


def test_explorer_size_mode_is_explorer_size_and_costs_nothing_while_off(offline):
    """The size mode (a link's size=on): the clusters are size()'s for the app's chat workload (200 users,
    2,000 + 500 tokens, TTFT 1 s, TPOT 50 ms) with the user's 8 × H100 as one candidate, and the frontier draws
    its first three clusters; off (the default), neither is computed."""
    from explorer.plan.size import size, sizing_request
    from explorer.ui.size_view import read_workload, size_rows

    outputs, defs = load_notebook("app.py").run(defs={"defaults": AppDefaults(sizing=True)})
    workload = read_workload({})[0]
    assert defs["workload"] == workload
    # the plan's request with the context and concurrency the workload's (2,500 tokens, one sequence asked)
    planned = sizing_request(defs["size_request"], workload)
    assert planned == sizing_request(defs["request"], workload) and planned.context_tokens == 2500
    again = size(defs["shape"], workload, shipped_catalogue(), shipped_prices(), defs["request"],
                 artifacts=defs["chosen"], own=parse_cluster("1x8xh100-80g"))  # fmt: skip
    assert defs["size_table_rows"] == size_rows(again)
    assert any(r["class"] == "h100-80g (yours)" for r in defs["size_table_rows"])
    # the frontier: the first three clusters running different ways (here the user's 8 × H100 runs the h100-80g
    # row's tp4 replicas: one curve), each named as the table ranks it
    named = {f"#{i} {c.option.label}" + (" (yours)" if c.own else ""): c for i, c in enumerate(again.clusters, 1)}
    drawn = list(dict.fromkeys(r["option"] for r in defs["frontier"]))
    assert len(drawn) == 3 and drawn[0] == f"#1 {again.clusters[0].option.label}"
    assert len({named[d].option.label for d in drawn}) == 3
    assert to_query(defs["app_state"]) == {"size": "on"}  # the app's workload needs no key
    shown = "\n".join(getattr(o, "text", "") for o in outputs if o is not None)
    assert "Size a cluster for a workload" in shown and "explorer-sizes" in shown
    # a link's workload opens the controls on it and is sized
    _outputs, linked = load_notebook("app.py").run(
        defs={"defaults": AppDefaults(sizing=True, workload={"users": "1000", "tpot": "0.02"})}
    )
    assert (linked["workload"].users, linked["workload"].tpot_s) == (1000, 0.02)
    assert linked["size_table_rows"] != defs["size_table_rows"]
    _outputs, off = load_notebook("app.py").run(defs={"defaults": AppDefaults()})
    assert "size_table_rows" not in off and "frontier" not in off


def test_explorer_exports_with_the_size_mode_on(tmp_path):
    """``marimo export html`` runs every cell of the app with the size mode on (``-- --size on --users 500``, as a
    link's ``?size=on&users=500``): no cell fails, and the page holds the clusters' table and the frontier."""
    out = tmp_path / "app.html"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "EXPLORER_CACHE": str(tmp_path / "cache.duckdb")}
    done = subprocess.run(
        [sys.executable, "-m", "marimo", "export", "html", "notebooks/app.py", "-o", str(out), "--", "--size", "on",
         "--users", "500"],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    page = out.read_text()
    assert "explorer-sizes" in page and "Clusters for 500 users at once" in page
    assert '\\"datasets\\":{\\"frontier\\"' in page
