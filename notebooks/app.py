# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="explorer: will it fit?")

with app.setup(hide_code=True):
    import time
    from dataclasses import replace

    import marimo as mo

    from explorer.engines.common import PlanRequest
    from explorer.errors import ExplorerError
    from explorer.model.dtypes import KV_CACHE_TYPES
    from explorer.model.summary import shape_rows, shape_summary
    from explorer.plan.planner import plan
    from explorer.safe_text import safe_html
    from explorer.sources.resolve import resolve_model
    from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
    from explorer.sources.snapshot.read import load_snapshot
    from explorer.speed.settings import SpeedSettings
    from explorer.ui import charts
    from explorer.ui import plan_rows as nd
    from explorer.ui.presets import PRESETS, AppDefaults, app_defaults, preset_by_name, preset_from_spec, spec_for
    from explorer.units import gib


@app.cell(hide_code=True)
def _():
    mo.md("""
    # Will it fit?

    Pick a **model**, the **weights** to serve, an **engine**, a **context length** and a **cluster**:
    *explorer* lists every way the model can be served, best first, with what each card holds,
    and says why every other way was refused. Sizes are GiB (1024³ bytes).
    Popular models answer offline from the shipped snapshot; any other Hub id is fetched when you press **Fetch**.
    """)
    return


@app.cell(hide_code=True)
def _():
    # --model, --cluster, --context, --engine, --kv, --concurrency after `--`, or the same URL query parameters
    defaults = app_defaults(mo.cli_args().to_dict(), mo.query_params().to_dict())
    return (defaults,)


@app.cell(hide_code=True)
def _(defaults):
    snapshot = load_snapshot()
    get_fetched, set_fetched = mo.state(None)
    _known = snapshot.get(defaults.model)
    popular = mo.ui.dropdown(
        options=sorted(snapshot.repos, key=str.lower),
        value=_known.repo if _known else AppDefaults().model,
        searchable=True,
        label="Popular models (ready offline)",
        on_change=lambda _v: set_fetched(None),
    )
    hub_text = mo.ui.text(
        value="" if _known else defaults.model,
        placeholder="org/name, org/name:FILE.gguf, /path/to/config.json or model.gguf",
        label="…or any Hub id or local path",
        full_width=True,
    )
    hub_token = mo.ui.text(kind="password", placeholder="hf_… (only for gated or private repos)", label="Hub token")
    fetch = mo.ui.run_button(label="Fetch", tooltip="Read the model from the cache, the Hub or the disk")
    mo.vstack(
        [
            mo.md("## 1 · Model"),
            mo.hstack(
                [popular, mo.vstack([hub_text, mo.hstack([hub_token, fetch], justify="start")])],
                justify="start",
                gap=2,
                widths=[1, 2],
            ),
        ]
    )
    return fetch, get_fetched, hub_text, hub_token, popular, set_fetched


@app.cell(hide_code=True)
def _(fetch, hub_text, hub_token, set_fetched):
    # Runs only when Fetch is pressed: typing never reaches the network.
    _text, _token = hub_text.value.strip(), hub_token.value.strip() or None
    fetch_note = None
    if fetch.value and not _text:
        fetch_note = mo.callout(mo.md("Type a Hub id or a path first."), kind="warn")
    elif fetch.value:
        with mo.status.spinner(title=f"Fetching {_text} …", subtitle="cache, then the Hub") as _spinner:

            def _progress(stage, done, total):
                try:
                    _spinner.update(subtitle=f"{stage}: {done:,} of {total:,}")
                except Exception:  # progress may come from a worker thread
                    pass

            try:
                _fetched = resolve_model(_text, token=_token, progress=_progress)
                set_fetched(_fetched)
                fetch_note = mo.callout(
                    mo.md(f"Read **{safe_html(_fetched.repo or _fetched.shape.name)}** from the {_fetched.origin}."),
                    kind="success",
                )
            except Exception as _e:  # ExplorerError says what to do; anything else still gets a callout
                _msg = str(_e) if isinstance(_e, ExplorerError) else f"{type(_e).__name__}: {_e}"
                fetch_note = mo.callout(
                    mo.md(f"**Could not read {safe_html(_text)}.** {safe_html(_msg)}"), kind="danger"
                )
    fetch_note
    return


@app.cell(hide_code=True)
def _(get_fetched, popular):
    # The resolution result: a fetched model, else the popular pick (snapshot or cache, never the network).
    model, _error = get_fetched(), None
    if model is None and popular.value:
        try:
            model = resolve_model(popular.value, offline=True)
        except ExplorerError as _e:
            _error = str(_e)
    mo.stop(model is None, mo.callout(mo.md(f"**No model.** {safe_html(_error or 'Pick one above.')}"), kind="danger"))
    shape = model.shape
    summary = shape_summary(shape)
    _facts = "\n".join(f"| {k} | {safe_html(v)} |" for k, v in shape_rows(summary))
    mo.hstack(
        [
            mo.md(
                f"**{safe_html(model.repo or shape.name)}** · answered from the **{model.origin}**\n\n"
                f"| | |\n|---|---|\n{_facts}"
            ),
            mo.accordion(
                {
                    f"How it was resolved ({len(model.notes)} notes)": mo.md(
                        "\n".join(f"- {safe_html(n)}" for n in model.notes) or "nothing to note"
                    )
                }
            ),
        ],
        justify="start",
        gap=2,
        widths=[2, 1],
    )
    return model, shape, summary


@app.cell(hide_code=True)
def _(defaults, model, shape):
    artifact_menu = nd.artifact_choices(model.artifacts, model.what_ifs(("bf16", "fp8", "int4-awq", "int4-gptq")))
    weights = mo.ui.multiselect(
        options=list(artifact_menu),
        value=[k for k, a in artifact_menu.items() if not a.what_if],
        label="Weights to plan: the repository's offer, then what-if precisions of the original weights",
        full_width=True,
    )
    context_steps = nd.context_steps(shape.max_context_tokens)
    context = mo.ui.slider(
        steps=context_steps,
        value=nd.nearest_step(context_steps, shape.clamp_context(defaults.context_tokens)),
        label=f"Context per sequence (tokens, log scale, up to the model's {shape.max_context_tokens:,})",
        show_value=True,
        full_width=True,
    )
    mo.vstack([mo.md("## 2 · Weights and context"), weights, context])
    return artifact_menu, context, context_steps, weights


@app.cell(hide_code=True)
def _(defaults):
    engine = mo.ui.radio(options=list(nd.ENGINE_CHOICES), value=defaults.engine, label="Engine", inline=True)
    kv_dtype = mo.ui.dropdown(
        options=list(KV_CACHE_TYPES),
        value=defaults.kv_dtype if defaults.kv_dtype in KV_CACHE_TYPES else "auto",
        label="KV cache type",
    )
    _seqs = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    concurrency = mo.ui.slider(
        steps=_seqs, value=nd.nearest_step(_seqs, defaults.concurrency), label="Concurrent sequences", show_value=True
    )
    sort = mo.ui.radio(
        options={"fewest cards, best precision": "default", "fastest decode": "speed"},
        value="fewest cards, best precision",
        label="Rank by",
        inline=True,
    )
    mo.vstack(
        [mo.md("## 3 · Engine and load"), engine, mo.hstack([kv_dtype, concurrency, sort], justify="start", gap=2)]
    )
    return concurrency, engine, kv_dtype, sort


@app.cell(hide_code=True)
def _(defaults):
    _names = [p.name for p in PRESETS]
    link_preset = preset_from_spec(defaults.spec) if defaults.spec else None
    preset_pick = mo.ui.dropdown(
        options=([link_preset.name] if link_preset else []) + _names,
        value=link_preset.name if link_preset else (defaults.preset if defaults.preset in _names else _names[1]),
        label="Cluster preset",
    )
    return link_preset, preset_pick


@app.cell(hide_code=True)
def _(link_preset, preset_pick):
    catalogue = shipped_catalogue()
    preset = link_preset if link_preset and preset_pick.value == link_preset.name else preset_by_name(preset_pick.value)
    if preset.gpu_class not in catalogue:  # an alias in a linked spec: show the catalogue's name
        _found = catalogue.lookup(preset.gpu_class)
        preset = replace(preset, gpu_class=_found.name if _found else "h100-80g")
    nodes = mo.ui.number(start=1, stop=4096, value=preset.nodes, label="Nodes")
    gpus = mo.ui.number(start=1, stop=64, value=preset.gpus_per_node, label="GPUs per node")
    gpu_class = mo.ui.dropdown(
        options=list(catalogue.names), value=preset.gpu_class, searchable=True, label="GPU class"
    )
    free = mo.ui.slider(
        start=0.05,
        stop=1.0,
        step=0.05,
        value=preset.free_fraction,
        show_value=True,
        label="Free share of each card's memory",
    )
    return free, gpu_class, gpus, nodes, preset


@app.cell(hide_code=True)
def _(free, gpu_class, gpus, nodes, preset):
    spec = mo.ui.text(
        value=spec_for(preset, nodes.value, gpus.value, gpu_class.value, free.value),
        label="Cluster spec (the source of truth: edit it freely)",
        full_width=True,
    )
    return (spec,)


@app.cell(hide_code=True)
def _(free, gpu_class, gpus, nodes, preset, preset_pick, spec):
    mo.vstack(
        [
            mo.md("## 4 · Cluster"),
            mo.hstack([preset_pick, mo.md(f"*{safe_html(preset.description)}*")], justify="start", gap=2),
            mo.hstack([nodes, gpus, gpu_class, free], justify="start", gap=2),
            spec,
            mo.md(
                "Grammar: `NODESxGPUSxCLASS[@FABRIC][,free=…]` joined by `+`, e.g. "
                "`2x8xh100-80g@ib0 + 1x4xl40s-48g + 1xuma-128g` (see docs/cluster_spec.md)."
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(artifact_menu, concurrency, context, engine, kv_dtype, model, shape, sort, spec, weights):
    # The planner call: everything below reads `result`; nothing here touches the network.
    try:
        cluster, _cluster_error = parse_cluster(spec.value), None
    except ExplorerError as _e:
        cluster, _cluster_error = None, str(_e)
    mo.stop(
        cluster is None,
        mo.callout(mo.md(f"**The cluster spec does not parse.** {safe_html(_cluster_error or '')}"), kind="danger"),
    )
    _chosen = [artifact_menu[k] for k in weights.value] or [next(iter(artifact_menu.values()))]
    request = PlanRequest(
        context_tokens=context.value,
        concurrency=concurrency.value,
        kv_dtype=kv_dtype.value,
        engines=nd.ENGINE_CHOICES[engine.value],
    )
    _t0 = time.perf_counter()
    try:
        result, _plan_error = (
            plan(
                shape,
                cluster,
                request,
                artifacts=_chosen,
                model_ref=model.repo or shape.name,
                sort=sort.value,
                speed=SpeedSettings(prices=shipped_prices()),
            ),
            None,
        )
    except Exception as _e:  # a typed ExplorerError, or a planner bug: a callout either way, never a traceback
        result, _plan_error = None, str(_e) if isinstance(_e, ExplorerError) else f"{type(_e).__name__}: {_e}"
    plan_ms = (time.perf_counter() - _t0) * 1000
    mo.stop(result is None, mo.callout(mo.md(f"**The plan failed.** {safe_html(_plan_error or '')}"), kind="danger"))
    return cluster, plan_ms, request, result


@app.cell(hide_code=True)
def _(cluster, plan_ms, result):
    option_rows = nd.option_rows(result, limit=25)
    miss_rows = nd.near_miss_rows(result, limit=3)
    _has_speed = any(o.speed is not None for o in result.options)
    _columns = [c for c in nd.TABLE_COLUMNS if _has_speed or c not in ("decode tok/s", "TTFT (s)", "$ / M tokens")]
    _head = (
        f"**{len(result.options)} ways fit** on {cluster.total_gpus:,} GPUs "
        f"({result.considered:,} considered, {sum(result.pruned.values()):,} refused) · planned in {plan_ms:.0f} ms. "
        "Per card: what the binding card needs / what the engine may use, GiB. Red rows with ✗ do not fit."
    )
    _notes = []
    if not result.options:
        _notes.append(
            mo.callout(
                mo.md("**Nothing fits.** The closest misses are below in red; the refusals say why."), kind="danger"
            )
        )
    _groups = nd.refusal_groups(result)
    _refusals = (
        mo.accordion(
            {
                f"{rule}: {n:,} ways": mo.Html(
                    nd.rows_html(rows[:40], ("way", "artifact", "reason"), table_id=f"refused-{rule}")
                )
                for rule, n, rows in _groups
            }
        )
        if _groups
        else mo.md("Nothing was refused.")
    )
    mo.vstack(
        [
            mo.md("## 5 · Ways it fits, best first"),
            *_notes,
            mo.md(_head),
            mo.Html(nd.rows_html(option_rows + miss_rows, _columns)),
            mo.md("### Why the other ways were refused"),
            _refusals,
        ]
    )
    return miss_rows, option_rows


@app.cell(hide_code=True)
def _():
    get_pick, set_pick = mo.state(None)
    return get_pick, set_pick


@app.cell(hide_code=True)
def _(get_pick, result, set_pick):
    pickable = {o.label: o for o in result.options[:25]}
    pickable |= {f"✗ {o.label}": o for o in nd.near_misses(result, 3)}
    _want = get_pick()
    option_pick = mo.ui.dropdown(
        options=list(pickable),
        value=_want if _want in pickable else next(iter(pickable), None),
        label="Option to draw",
        on_change=set_pick,
        full_width=True,
    )
    return option_pick, pickable


@app.cell(hide_code=True)
def _(option_pick, pickable):
    picked = pickable.get(option_pick.value)
    mo.stop(picked is None, mo.md(""))
    _card = picked.per_card
    _tps, _ttft, _cost = nd.speed_of_option(picked)
    _speed = (
        f" · about **{_tps:,.1f} tokens/s** a sequence (estimate, {picked.speed.bound_by}-bound)"
        if _tps is not None
        else ""
    )
    mo.vstack(
        [
            mo.md("## 6 · What each card holds"),
            option_pick,
            mo.md(
                f"{'✓ fits' if picked.fits else '✗ does not fit'}: the binding card needs **{gib(_card.total)}** of "
                f"**{gib(_card.usable)}** usable ({gib(_card.capacity)} on the card){_speed}."
            ),
            charts.VegaLite(charts.card_memory_chart(nd.card_parts(picked), title=picked.label)),
            mo.md(f"Launch: `{picked.evaluation.command}`"),
        ]
    )
    return (picked,)


@app.cell(hide_code=True)
def _(context, context_steps, request, result, shape):
    # the best option of each engine and weights (up to four), and the two ways that just missed
    sweep = nd.context_sweep(shape, nd.sweep_options(result, best=4, misses=2), request, context_steps)
    # VegaLite: shown without a second schema validation (a slider move redraws these)
    _tabs = {"Memory vs context": charts.VegaLite(charts.memory_context_chart(sweep, context=context.value))}
    if any(r["tokens_per_s"] is not None for r in sweep):
        _tabs["Tokens/s vs context"] = charts.VegaLite(charts.speed_context_chart(sweep, context=context.value))
    mo.vstack(
        [
            mo.md(
                "## 7 · As the context grows\nEach line is one of the top options re-checked at every context "
                "(weights stay, the KV cache grows); a red cross marks a context it no longer holds."
            ),
            mo.ui.tabs(_tabs) if sweep else mo.md("No option to draw."),
        ]
    )
    return (sweep,)


if __name__ == "__main__":
    app.run()
