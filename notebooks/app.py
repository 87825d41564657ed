# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="explorer: will it fit?")

with app.setup(hide_code=True):
    import time
    from dataclasses import replace
    from functools import lru_cache

    import marimo as mo

    from explorer.artifacts.offer import fallback_artifacts
    from explorer.cli.size_table import workload_text
    from explorer.engines.request import PlanRequest
    from explorer.errors import ExplorerError
    from explorer.hardware.cluster_dict import cluster_from_text
    from explorer.model.dtypes import KV_CACHE_TYPES
    from explorer.model.summary import shape_rows, shape_summary
    from explorer.plan.planner import plan, with_suggestions
    from explorer.plan.size import size
    from explorer.safe_text import safe_html
    from explorer.sources.shipped import parse_cluster, shipped_catalogue, shipped_prices
    from explorer.sources.snapshot.read import load_snapshot
    from explorer.speed.settings import SpeedSettings
    from explorer.ui import plan_rows as nd
    from explorer.ui import size_view as sv
    from explorer.ui import vega
    from explorer.ui.advice import best_per_engine_strip, suggestion_rows
    from explorer.ui.app_state import (
        ENGINE_KEYS,
        ENGINE_MENU,
        GOALS,
        QUERY_KEYS,
        AppDefaults,
        app_defaults,
        apply_change,
        to_query,
    )
    from explorer.ui.bundled_html import BundledHtml, prose
    from explorer.ui.card_svg import card_memory_svg
    from explorer.ui.cluster_form import (
        GPUS_PER_NODE_RANGE,
        NODE_RANGE,
        cluster_file_json,
        controls_refusal,
        describe_cluster,
        edit_first_gpu_term,
        first_gpu_term,
        host_ram_note,
    )
    from explorer.ui.engine_settings import (
        SETTINGS,
        engine_groups,
        label,
        placeholder,
        request_changes,
        settings_text,
    )
    from explorer.ui.last_plan import LastPlan
    from explorer.ui.lesson_links import lesson_links
    from explorer.ui.model_pick import UnknownModelError, in_browser, pick_model, unknown_model_advice
    from explorer.ui.presets import PRESETS, preset_by_name
    from explorer.ui.published import PASTE_CAPS, audience, over_cap
    from explorer.ui.size_chart import frontier_chart
    from explorer.units import gib

    #: in a browser page (marimo's html-wasm export, Pyodide): the snapshot and a pasted config.json only
    IN_BROWSER = in_browser()
    #: served to visitors (marimo run, the WASM page) or used by its owner: what a visitor may reach
    AUDIENCE = audience(mo.app_meta().mode, in_browser=IN_BROWSER)
    WHAT_IFS = ("bf16", "fp8", "int4-awq", "int4-gptq")
    SEQUENCES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    SIDEBAR = "340px"
    #: markdown whose text repeats from move to move (the model's facts, an option's notes), rendered once: a
    #: context move re-runs the answer's cell and the one below it, and marimo's markdown costs ~0.3–3 ms a text
    kept_md = lru_cache(maxsize=256)(mo.md)
    #: the answer beside the controls: marimo's side padding narrowed, and the cells that only fill the
    #: sidebar take no room in the page (their outputs are drawn in the sidebar)
    LAYOUT_CSS = (
        'div[class~="sm:px-16"] { padding-left: 1rem !important; padding-right: 1rem !important; }'
        ".marimo-cell:has(> .output-area > .output > marimo-sidebar) { display: none; }"
        # below 1,280 px the table's rows wrap: its box scrolls on its own (its head stays) and leaves the
        # 600 px that the heading, the controls under it and the per-card chart take, so the chart of the first
        # option sits directly under the table, in view (tests/notebooks/test_browser.py)
        "@media (max-width: 1279px) { .explorer-table:has(> #explorer-options) { "
        "max-height: max(10rem, calc(100vh - 600px)); "
        "overflow-y: auto; } .explorer-table:has(> #explorer-options) thead th { position: sticky; top: 0; "
        "background: white; } }"
    )


@app.cell(hide_code=True)
def _():
    # a suggestion clicked below: the whole state with its change, which the controls are rebuilt from (defined
    # here, in a cell that never runs again, so that setting it reruns only the cells that read it)
    get_applied, set_applied = mo.state(None)
    mo.vstack(
        [
            # the answer table's look, here once: the table a move sends carries none (nd.rows_html's style)
            mo.Html(f"<style>{LAYOUT_CSS}</style>{nd.table_style('explorer-options')}"),
            mo.md(
                "**Will it fit?** Every way to serve the model on the cluster, best first, and what each card "
                "holds; the controls are on the left (the lessons at their foot). Sizes are GiB (1024³ bytes)."
            ),
        ],
        gap=0,
    )
    return get_applied, set_applied


@app.cell(hide_code=True)
def _(get_applied):
    # the starting point: a clicked suggestion, else URL query parameters (a shared link) over `--` arguments
    defaults = get_applied() or app_defaults(mo.cli_args().to_dict(), mo.query_params().to_dict())
    _refused = " ".join(f"The link's {safe_html(r)}." for r in defaults.refused)
    mo.callout(mo.md(_refused), kind="warn") if _refused else None
    return (defaults,)


@app.cell(hide_code=True)
def _(defaults):
    # everything built from the starting point alone, in one cell (an open runs fewer cells): the states, the
    # cluster file, the size mode's controls
    snapshot = load_snapshot()
    get_model_text, set_model_text = mo.state(defaults.model)
    get_context, set_context = mo.state(defaults.context_tokens)
    get_spec, set_spec = mo.state(defaults.spec or preset_by_name(defaults.preset).spec)
    get_fetched, set_fetched = mo.state(None)
    # the answer below the table (curves, refusals, pinning), drawn in a run of its own once the table is shown
    get_below, set_below = mo.state(None)
    # the curves against context, set only when they change: a context move alone redraws no sweep chart
    get_sweep, set_sweep = mo.state(None)
    # the hardware-first list's question (cluster, request, goal): set when its button is pressed, cleared by the
    # next move, so a move that finds no list shown runs no cell for it
    get_fit_asked, set_fit_asked = mo.state(None)
    # the engine settings' controls are built while this is on; a link that carries settings or pinned GPUs
    # opens with it on
    engine_settings_on = mo.ui.switch(
        value=bool(defaults.settings or defaults.pinned), label="Engine settings and pinned GPUs"
    )
    # rebuilt (emptied) when a clicked suggestion replaces the cluster: the new state carries its own
    cluster_file = mo.ui.file(
        filetypes=[".json", ".toml"], max_size=PASTE_CAPS["cluster file"], label="Cluster file (JSON/TOML)"
    )
    # The size mode (explorer size): the workload's controls are its declared settings, one a setting, keyed in
    # the URL by the declared key (explorer.ui.size_view)
    size_mode = mo.ui.switch(value=defaults.sizing, label="**Size a cluster for a workload** (`explorer size`)")
    workload_controls = mo.ui.dictionary(
        {
            c.key: mo.ui.slider(steps=list(c.steps), value=c.value, show_value=True, label=c.label)
            if c.kind == "slider"
            else mo.ui.dropdown(options=list(c.choices), value=c.value, label=c.label)
            for c in sv.controls(defaults.workload)
        }
    )
    return (
        cluster_file,
        engine_settings_on,
        get_below,
        get_context,
        get_fetched,
        get_fit_asked,
        get_model_text,
        get_spec,
        get_sweep,
        set_below,
        set_context,
        set_fetched,
        set_fit_asked,
        set_model_text,
        set_spec,
        set_sweep,
        size_mode,
        snapshot,
        workload_controls,
    )


@app.cell(hide_code=True)
def _(get_model_text, set_model_text, snapshot):
    _entry = snapshot.get(get_model_text())
    popular = mo.ui.dropdown(
        options=sorted(snapshot.repos, key=str.lower),
        value=_entry.repo if _entry else None,
        searchable=True,
        label="Model (the shipped snapshot: ready offline)",
        on_change=lambda v: set_model_text(v) if v else None,
        full_width=True,
    )
    mo.sidebar([popular], width=SIDEBAR)
    return (popular,)


@app.cell(hide_code=True)
def _(get_model_text, set_model_text):
    # outside the browser: any Hub id or path, read from the Hub only when Fetch is pressed
    model_box = mo.ui.text(
        value=get_model_text(),
        placeholder="org/name, org/name:FILE.gguf or a path",
        label="…or any model id",
        on_change=lambda v: set_model_text(v.strip()) if v.strip() else None,
        full_width=True,
    )
    hub_token = mo.ui.text(kind="password", placeholder="hf_… (gated repos only)", label="Hub token")
    fetch = mo.ui.run_button(label="Fetch", tooltip="Read the model from the Hub (or the disk)")
    # in the browser page there is no Hub client, cache or disk: the box and Fetch are not shown
    _shown = None if IN_BROWSER else [model_box, mo.hstack([hub_token, fetch], justify="start", align="end")]
    mo.sidebar(_shown, width=SIDEBAR) if _shown else None
    return fetch, hub_token, model_box


@app.cell(hide_code=True)
def _():
    # any model whose config.json is at hand: in the browser page the only way past the snapshot
    pasted = mo.ui.text_area(
        placeholder='{"model_type": "llama", "hidden_size": 4096, ...}',
        rows=2,
        max_length=PASTE_CAPS["config"],
        full_width=True,
        label="…or paste a config.json",
    )
    mo.sidebar([pasted], width=SIDEBAR)
    return (pasted,)


@app.cell(hide_code=True)
def _(fetch, get_model_text, hub_token, set_fetched):
    # Runs only when Fetch is pressed: typing never reaches the network.
    mo.stop(not fetch.value)
    _text, _token = get_model_text(), hub_token.value.strip() or None
    with mo.status.spinner(title=f"Fetching {_text} …", subtitle="the cache, then the Hub"):
        try:
            _picked = AUDIENCE.run(lambda: pick_model(_text, fetch=True, token=_token, audience=AUDIENCE), what="Fetch")
            set_fetched((_text, _picked, None))
        except Exception as _e:  # ExplorerError says what to do; anything else still gets a callout
            _msg = str(_e) if isinstance(_e, ExplorerError) else f"{type(_e).__name__}: {_e}"
            set_fetched((_text, None, _msg.replace(_token, "…") if _token else _msg))
    return


@app.cell(hide_code=True)
def _(get_fetched, get_model_text, pasted):
    # The model: a pasted config.json, a fetched model, else the snapshot (or the cache), never the network.
    resolved, model_problem, _text = None, None, get_model_text()
    _fetched = get_fetched()
    try:
        if pasted.value.strip():
            from explorer.sources.resolve import resolve_config_text

            if _too_big := over_cap("config", pasted.value):
                raise ExplorerError(_too_big)
            resolved = resolve_config_text(pasted.value)
        elif _fetched is not None and _fetched[0] == _text and _fetched[1] is not None:
            resolved = _fetched[1]
        else:
            resolved = pick_model(_text, audience=AUDIENCE)
    except UnknownModelError as _e:
        model_problem = _e
    except ExplorerError as _e:
        model_problem = str(_e)
    fetch_failure = _fetched[2] if _fetched is not None and _fetched[0] == _text else None
    return fetch_failure, model_problem, resolved


@app.cell(hide_code=True)
def _(fetch_failure, get_model_text, model_problem, set_model_text):
    # what the app says about a model it cannot read, with the nearest snapshot ids as buttons
    suggestions = mo.ui.array(
        [
            mo.ui.button(label=s, on_click=lambda _v, s=s: set_model_text(s))
            for s in getattr(model_problem, "suggestions", [])
        ]
    )
    _failed = (
        f"**Could not fetch `{safe_html(get_model_text())}`:** {safe_html(fetch_failure)}\n\n" if fetch_failure else ""
    )
    if isinstance(model_problem, UnknownModelError):
        _note = mo.callout(
            mo.vstack(
                [
                    mo.md(_failed + unknown_model_advice(model_problem, can_fetch=not IN_BROWSER)),
                    suggestions.hstack(justify="start", wrap=True),
                ]
            ),
            kind="warn",
        )
    elif model_problem is not None:
        _note = mo.callout(mo.md(f"**Could not read the model.** {safe_html(model_problem)}"), kind="danger")
    else:
        _note = mo.callout(mo.md(_failed), kind="danger") if _failed else None
    _note
    return (suggestions,)


@app.cell(hide_code=True)
def _(resolved):
    mo.stop(resolved is None)
    model = resolved
    shape = model.shape
    model_name = model.repo or shape.name
    model_ref = model.launch_ref  # what a launch loads: the repository, a local folder, or a placeholder
    return model, model_name, model_ref, shape


@app.cell(hide_code=True)
def _(defaults, get_model_text, model):
    _asked = set(defaults.weights) if get_model_text() == defaults.model else set()
    _what_ifs = model.what_ifs(WHAT_IFS)
    # a what-if a link or a suggestion names by precision (``what-if int4-awq``) that the menu lacks
    _extra = nd.asked_what_ifs(model.what_ifs, sorted(_asked))
    _asked |= {nd.artifact_key(a) for a in _extra}
    _known = {nd.artifact_key(a) for a in (*model.offer, *_what_ifs)}
    artifact_menu = nd.artifact_choices(
        model.offer, (*_what_ifs, *(a for a in _extra if nd.artifact_key(a) not in _known))
    )
    _keys = [k for k, a in artifact_menu.items() if nd.artifact_key(a) in _asked]
    weights = mo.ui.multiselect(
        options=list(artifact_menu),
        value=_keys or [k for k, a in artifact_menu.items() if not a.what_if],
        label="Weights: the repository's offer, then what-if precisions",
        full_width=True,
    )
    mo.sidebar([weights], width=SIDEBAR)
    return artifact_menu, weights


@app.cell(hide_code=True)
def _(get_context, set_context, shape):
    _asked = shape.clamp_context(get_context())  # a suggested (or linked) context is a step of its own
    context_steps = sorted({*nd.context_steps(shape.max_context_tokens), _asked})
    context = mo.ui.slider(
        steps=context_steps,
        value=_asked,
        label=f"Context a sequence (tokens; up to {shape.max_context_tokens:,})",
        show_value=True,
        full_width=True,
        on_change=set_context,
    )
    mo.sidebar([context], width=SIDEBAR)
    return context, context_steps


@app.cell(hide_code=True)
def _(defaults):
    _steps = sorted({*SEQUENCES, defaults.concurrency})  # a suggested (or linked) count is a step of its own
    concurrency = mo.ui.slider(
        steps=_steps,
        value=defaults.concurrency,
        label="Concurrent sequences",
        show_value=True,
        full_width=True,
    )
    kv_dtype = mo.ui.dropdown(
        options=list(KV_CACHE_TYPES),
        value=defaults.kv_dtype if defaults.kv_dtype in KV_CACHE_TYPES else "auto",
        label="KV cache type",
    )
    engine = mo.ui.dropdown(
        options=ENGINE_MENU,
        value=next(k for k, v in ENGINE_MENU.items() if v == defaults.engine),
        label="Engine",
    )
    goal = mo.ui.dropdown(
        options={label: key for key, label in GOALS.items()},
        value=GOALS[defaults.goal],
        label="Goal (ranks the ways inside each tier)",
    )
    mo.sidebar([concurrency, mo.hstack([engine, kv_dtype], justify="start", wrap=True), goal], width=SIDEBAR)
    return concurrency, engine, goal, kv_dtype


@app.cell(hide_code=True)
def _(get_spec, set_spec):
    # the cluster: the spec text is the state; the preset menu and the simple controls write into it
    _names = {p.spec: p.name for p in PRESETS}
    preset_pick = mo.ui.dropdown(
        options=["(as typed)"] + [p.name for p in PRESETS],
        value=_names.get(get_spec().strip(), "(as typed)"),
        label="Cluster preset",
        on_change=lambda name: set_spec(preset_by_name(name).spec) if name != "(as typed)" else None,
        full_width=True,
    )
    return (preset_pick,)


@app.cell(hide_code=True)
def _(get_spec, set_spec):
    # typed text is never replaced by this cell re-running: it runs only when something else sets the spec
    spec_box = mo.ui.text(
        value=get_spec(),
        label="Cluster spec (the source of truth; the controls below edit its first GPU term)",
        on_change=set_spec,
        full_width=True,
    )
    return (spec_box,)


@app.cell(hide_code=True)
def _(get_spec, set_spec):
    # the simple controls show the spec's first GPU term and, moved, edit only that part of it
    _term = first_gpu_term(get_spec())
    term_refusal = controls_refusal(_term) if _term is not None else None

    def _edit(key, read=lambda v: v):
        return lambda value: set_spec(edit_first_gpu_term(get_spec(), **{key: read(value)}))

    if _term is None or term_refusal:
        term_nodes = term_gpus = term_class = term_fabric = term_free = term_ram = None
    else:
        term_nodes = mo.ui.number(*NODE_RANGE, value=_term.nodes, label="Nodes", on_change=_edit("nodes"))
        term_gpus = mo.ui.number(
            *GPUS_PER_NODE_RANGE, value=_term.gpus_per_node, label="GPUs a node", on_change=_edit("gpus_per_node")
        )
        term_class = mo.ui.dropdown(
            options=sorted({*shipped_catalogue().names, _term.gpu_class}),
            value=_term.gpu_class,
            searchable=True,
            label="GPU class",
            on_change=_edit("gpu_class"),
        )
        term_fabric = mo.ui.text(
            value=_term.fabric or "", placeholder="none", label="Fabric", on_change=_edit("fabric")
        )
        term_free = mo.ui.slider(
            start=0.05,
            stop=1.0,
            step=0.05,
            value=min(1.0, max(0.05, _term.free_fraction)),
            show_value=True,
            label="Free share of each card",
            on_change=_edit("free_fraction"),
        )
        term_ram = mo.ui.text(
            value=str(_term.ram_gib or ""),
            placeholder="assumed",
            label="Host RAM a node (GiB)",
            on_change=_edit("ram_gib", lambda v: int(v) if v.strip().isdigit() else None),
        )
    return term_class, term_fabric, term_free, term_gpus, term_nodes, term_ram, term_refusal


@app.cell(hide_code=True)
def _(
    cluster_file,
    defaults,
    get_spec,
    preset_pick,
    spec_box,
    term_class,
    term_fabric,
    term_free,
    term_gpus,
    term_nodes,
    term_ram,
    term_refusal,
):
    # The cluster planned on, and the sidebar's cluster section, in one cell (both follow the spec, so they ran
    # together anyway): an uploaded (or linked) cluster file wins over the spec.
    cluster, cluster_error, cluster_source = None, None, "spec"
    _json = defaults.cluster_file
    try:
        if cluster_file.value and (_too_big := over_cap("cluster file", cluster_file.contents())):
            raise ExplorerError(_too_big)
        if cluster_file.value:
            _json = cluster_file_json(cluster_file.contents().decode("utf-8", "replace"), cluster_file.name())
        if _json:
            cluster = cluster_from_text(_json, shipped_catalogue(), source=cluster_file.name() or "the linked file")
            cluster_source = _json
        else:
            cluster = parse_cluster(get_spec())
    except ExplorerError as _e:
        cluster_error = str(_e)
    _about = (
        [mo.md("\n".join(f"- {safe_html(line)}" for line in describe_cluster(cluster)))]
        + ([mo.md(f"*{safe_html(_note)}*")] if (_note := host_ram_note(cluster)) else [])
        if cluster is not None
        else [mo.callout(mo.md(f"**The cluster does not parse.** {safe_html(cluster_error or '')}"), kind="danger")]
    )
    _controls = (
        [
            mo.hstack([term_nodes, term_gpus], justify="start"),
            term_class,
            mo.hstack([term_fabric, term_ram], justify="start"),
            term_free,
        ]
        if term_nodes is not None
        else [mo.callout(mo.md(safe_html(term_refusal)), kind="warn")]
        if term_refusal
        else [mo.md("*The spec has no `NODESxGPUSxCLASS` term for the simple controls to edit.*")]
    )
    _file = (
        [
            mo.callout(
                mo.md("Planning on the **uploaded cluster file**; reload the page to go back to the spec."), "info"
            )
        ]
        if cluster_source != "spec"
        else []
    )
    mo.sidebar(
        [mo.md("**Cluster**"), preset_pick, spec_box, *_file, *_controls, *_about, cluster_file],
        width=SIDEBAR,
    )
    return cluster, cluster_error, cluster_source


@app.cell(hide_code=True)
def _(defaults, engine_settings_on):
    # Engine settings: one box per PlanRequest field the controls above do not set (explorer.ui.engine_settings),
    # built only while the switch is on (~40 controls: an open builds one switch); off, none is in force
    def _control(s):
        text = defaults.settings.get(s.key, "")
        if s.kind == "bool":
            return mo.ui.checkbox(value=text == "on", label=f"`{s.flag}` {label(s)}")
        if s.kind == "choice":
            options = {"(default)" if s.optional else str(s.default): ""} | {c: c for c in s.choices if c != s.default}
            return mo.ui.dropdown(
                options=options,
                value=next((k for k, v in options.items() if v == text), next(iter(options))),
                label=f"`{s.flag}` {label(s)}",
            )
        return mo.ui.text(value=text, placeholder=placeholder(s), label=f"`{s.flag}` {label(s)}", full_width=True)

    settings = pin = None
    _shown = [engine_settings_on]
    if engine_settings_on.value:
        settings = mo.ui.dictionary({s.key: _control(s) for s in SETTINGS})
        pin = mo.ui.text(
            value=defaults.pinned,
            placeholder="0,1,2,3 or NODE:IDX,…",
            label="Pin GPUs (vLLM or SGLang): checks exactly these cards",
            full_width=True,
        )
        _groups = {t: mo.vstack([settings[s.key] for s in group], gap=0.25) for t, group in engine_groups().items()}
        _shown.append(mo.accordion({**{f"{t} settings": g for t, g in _groups.items()}, "Pin GPUs": pin}, lazy=True))
    mo.sidebar(_shown, width=SIDEBAR)
    return pin, settings


@app.cell(hide_code=True)
def _(settings):
    # the settings' text as the URL carries it: a bool is "on" when its flag is given
    settings_values = {
        k: ("on" if v is True else "" if v is False else str(v or ""))
        for k, v in (settings.value if settings is not None else dict.fromkeys(s.key for s in SETTINGS)).items()
    }
    request_settings, settings_errors = request_changes(settings_values)
    return request_settings, settings_errors, settings_values


@app.cell(hide_code=True)
def _():
    # the table's rows and columns and the option drawn under it: built and drawn once, above the answer (a move
    # does not re-run this cell, so the page does not rebuild its controls)
    more_columns = mo.ui.multiselect(
        options=[c for c in nd.TABLE_COLUMNS if c not in nd.ESSENTIAL_COLUMNS],
        value=[],
        label="More columns",
    )
    table_rows = mo.ui.number(start=1, stop=100, value=10, label="Rows")
    # a menu, narrower than a number box: the row stays one line at 1,024 px
    draw = mo.ui.dropdown(options=[str(n) for n in range(1, 101)], value="1", label="Draw option #")
    mo.hstack([table_rows, more_columns, draw], justify="start")
    return draw, more_columns, table_rows


@app.cell(hide_code=True)
def _(
    artifact_menu,
    cluster,
    concurrency,
    context,
    draw,
    engine,
    get_below,
    goal,
    kv_dtype,
    model,
    model_name,
    model_ref,
    more_columns,
    request_settings,
    set_below,
    settings_errors,
    shape,
    table_rows,
    weights,
):
    # The answer, in one cell and one output (a move runs one cell here, and the table, the drawn option's chart
    # and its summary reach the page together, painted in one frame): the request, the planner call, the table,
    # the option drawn. Nothing here touches the network.
    mo.stop(cluster is None)
    request = replace(
        PlanRequest(
            context_tokens=context.value,
            concurrency=concurrency.value,
            kv_dtype=kv_dtype.value,
            engines=ENGINE_KEYS[engine.value],
        ),
        **request_settings,
    )
    chosen = [artifact_menu[k] for k in weights.value] or [next(iter(artifact_menu.values()))]
    # the last plan, kept in `get_below`: more rows, other columns or another drawn option plan nothing again,
    # and the cells below (which read it) do not run
    _last = get_below()
    if _last is not None and _last.same_question(shape, cluster, request, chosen, goal.value):
        result, plan_ms = _last.result, _last.plan_ms
    else:
        # as `explorer plan` does: when the model's own weights keep no layout on the GPUs alone, quantised
        # what-ifs are planned too; not when a what-if precision was chosen
        _fallback = (
            _last.fallback  # the same model and weights: a context move, another goal
            if _last is not None and _last.same_weights(shape, chosen)
            else ()
            if any(a.what_if for a in chosen)
            else fallback_artifacts(shape, chosen, model.checkpoints)
        )
        _t0 = time.perf_counter()
        try:
            result, _error = (
                AUDIENCE.run(
                    lambda: plan(
                        shape,
                        cluster,
                        request,
                        artifacts=chosen,
                        model_ref=model_ref,
                        goal=goal.value,
                        speed=SpeedSettings(prices=shipped_prices()),
                        suggest=False,  # the table first; the ways forward are planned by the cell below
                        fallback=_fallback,
                    ),
                    what="the plan",
                ),
                None,
            )
        except Exception as _e:  # a typed ExplorerError, or a planner bug: a callout either way, never a traceback
            result, _error = None, str(_e) if isinstance(_e, ExplorerError) else f"{type(_e).__name__}: {_e}"
        plan_ms = (time.perf_counter() - _t0) * 1000
        if result is None:  # the callout is built only when it is shown
            mo.stop(True, mo.callout(mo.md(f"**The plan failed.** {safe_html(_error or '')}"), kind="danger"))
        # a new plan hands it on to the cells below (curves, ways forward, refusals)
        set_below(LastPlan(shape=shape, cluster=cluster, request=request, chosen=tuple(chosen), goal=goal.value,
                           result=result, plan_ms=plan_ms, fallback=tuple(_fallback)))  # fmt: skip
    # the table's rows place each option's copies for the command column only when that column is shown
    _columns = [c for c in nd.TABLE_COLUMNS if c in nd.ESSENTIAL_COLUMNS or c in more_columns.value]
    option_rows = nd.option_rows(result, limit=table_rows.value, commands="command" in _columns)
    miss_rows = nd.near_miss_rows(result, limit=2 if result.options else 5, commands="command" in _columns)
    _strip = best_per_engine_strip(result)
    # the answer's lines are written as HTML in mo.md's wrapper (`prose`): they look as their markdown did, and a
    # move renders no markdown (about 1 ms a line on the server)
    _head = (
        f"<strong>{safe_html(model_name)}</strong>: <strong>{len(result.options)} ways fit</strong> on "
        f"{cluster.total_gpus:,} GPUs at {request.context_tokens:,} tokens × {request.concurrency} "
        f"sequence{'s' if request.concurrency > 1 else ''} ({result.considered:,} considered, "
        f"{sum(result.pruned.values()):,} refused; planned in {plan_ms:.0f} ms)"
        + (f"<br>\nBest of each engine ({GOALS[result.goal]}): {_strip}" if _strip else "")
    )
    _ignored = "**Some settings are ignored:** " + safe_html("; ".join(settings_errors))
    _notes = [mo.callout(kept_md(_ignored), kind="warn")] if settings_errors else []  # built only when shown
    if result.widened:
        _notes.append(
            mo.callout(
                mo.md(
                    "**The model's own weights keep no layout on the GPUs alone with headroom,** so these "
                    "precisions were "
                    f"planned too (as `explorer plan` does): {safe_html(', '.join(result.widened))}."
                ),
                kind="info",
            )
        )
    if cluster.assumptions:
        _notes.append(mo.callout(kept_md("**Assumed:** " + safe_html("; ".join(cluster.assumptions))), kind="warn"))
    if not result.options:
        _notes.append(mo.callout(mo.md(nd.nothing_fits_md(result, len(miss_rows))), kind="danger"))
    # the option the table ranks #N (the nearest miss when nothing fits): what each card holds (inline SVG, drawn
    # here: the page parses no chart spec on a move), what it needs, how it is launched (its lines computed for
    # this option alone), its notes
    _drawable = list(result.options) or nd.near_misses(result, 1)
    _rank = min(int(draw.value), len(_drawable))
    picked = _drawable[_rank - 1] if _drawable else None
    _drawn = []
    if picked is not None:
        _card = picked.per_card
        _tps, _ttft, _cost = nd.speed_of_option(picked)
        _speed = f" · about <strong>{_tps:,.1f} tokens/s</strong> a sequence (estimate)" if _tps is not None else ""
        if picked.fits:  # as the CLI's repl and all tok/s: the copies the cluster holds at once, and together
            _together = nd.cluster_tokens_per_s(picked)
            _speed += f" · <strong>× {picked.replicas:,} replica{'s' if picked.replicas > 1 else ''}</strong>" + (
                f", about <strong>{_together:,.1f} tokens/s</strong> all together" if _together is not None else ""
            )
        _host = nd.host_note(picked)
        _title = picked.label + (
            f" · × {picked.replicas:,} replica{'s' if picked.replicas > 1 else ''}" if picked.fits else ""
        )
        _drawn = [
            mo.Html(card_memory_svg(nd.card_parts(picked), title=_title)),
            mo.Html(
                prose(
                    f"Option #{_rank}: {'✓ fits' if picked.fits else '✗ does not fit'}: the binding card needs "
                    f"<strong>{gib(_card.total)}</strong> of <strong>{gib(_card.usable)}</strong> usable{_speed}"
                )
            ),
            mo.Html(
                prose(
                    (f"<em>{safe_html(_host)}</em> · " if _host else "")
                    + f"Launch (devices, port, a line a node):<pre>{safe_html(nd.launch_text(result, picked))}</pre>"
                )
            ),
            *[mo.Html(prose(f"<em>Note:</em> {safe_html(_n)}")) for _n in nd.option_notes(picked)],
        ]
    # one output, sent as a one-entry mime bundle: the page draws it as HTML but does not parse it again for an
    # outline on each of the run's four messages about this cell (explorer.ui.bundled_html)
    BundledHtml(
        mo.vstack(
            [
                mo.Html(prose(_head)),
                *_notes,
                mo.Html(nd.rows_html(option_rows + miss_rows, _columns, style=False)),
                *_drawn,
            ],
            gap=0.5,
        ).text
    )
    return chosen, miss_rows, option_rows, picked, plan_ms, request, result


@app.cell(hide_code=True)
def _(
    artifact_menu,
    cluster,
    cluster_source,
    concurrency,
    context,
    context_steps,
    engine,
    fit_button,
    get_below,
    get_fit_asked,
    get_model_text,
    get_spec,
    get_sweep,
    goal,
    kv_dtype,
    model,
    model_name,
    model_ref,
    pin,
    set_applied,
    set_fit_asked,
    set_sweep,
    settings_values,
    shape,
    size_mode,
    weights,
    workload_values,
):
    # Below the answer, in one cell (a context move runs two: the answer's and this): the URL, the ways forward,
    # the curves against context (drawn below, from get_sweep), why the other ways were refused, pinning, the
    # model. It reads the plan from get_below (the answer's cell sets it only when it plans again), never a name
    # the answer's cell defines: another drawn option, more rows or columns do not run it.
    # The URL carries the whole state: a link restores it (marimo run and the WASM page alike), written before
    # the plan is read, so a cluster that does not parse is in the link too.
    _offer = tuple(nd.artifact_key(a) for a in artifact_menu.values() if not a.what_if)
    _weights = tuple(nd.artifact_key(artifact_menu[k]) for k in weights.value)
    app_state = AppDefaults(
        model=get_model_text() if model.origin != "pasted" else AppDefaults().model,
        weights=() if _weights == _offer else _weights,
        spec=get_spec() if get_spec() != preset_by_name(AppDefaults().preset).spec else None,
        cluster_file=cluster_source if cluster_source != "spec" else None,
        context_tokens=context.value,
        engine=engine.value,
        kv_dtype=kv_dtype.value,
        concurrency=concurrency.value,
        goal=goal.value,
        pinned=pin.value.strip() if pin is not None else "",
        settings={k: v for k, v in settings_values.items() if v},
        sizing=size_mode.value,
        workload=sv.workload_query(workload_values),
    )
    _want, _params = to_query(app_state), mo.query_params()
    for _key in [k for k in _params if k in QUERY_KEYS and k not in _want]:
        del _params[_key]
    for _key, _value in _want.items():
        if _params.get(_key) != _value:
            _params[_key] = _value
    # the answer's cell stopped (the cluster does not parse, the plan failed): nothing below for a plan not shown
    mo.stop(get_below() is None or get_below().cluster is not cluster or get_below().shape is not shape)
    _result, _request, _chosen = get_below().result, get_below().request, list(get_below().chosen)
    # the ways forward when the best way leaves layers off the accelerators (or nothing fits): each change
    # planned again; a click applies the change to the controls
    _ways = with_suggestions(
        _result,
        shape,
        cluster,
        _chosen,
        speed=SpeedSettings(prices=shipped_prices()),
        catalogue=shipped_catalogue(),
        precisions=get_below().fallback,  # the answer's cell computed them for its plan
    )
    _rows = suggestion_rows(_ways)
    suggestion_buttons = mo.ui.array(
        [
            mo.ui.button(
                label=("✓ " if r["fits"] else "") + r["text"],
                tooltip=r["outcome"],
                on_click=lambda _v, change=r["change"]: set_applied(apply_change(app_state, change)),
            )
            for r in _rows
        ]
    )
    _lead = (
        "**Nothing fits.** Each change below was planned again; click one to make it:"
        if not _ways.options
        else "**To keep every layer on the accelerators with the model's own weights**, click a change to make it:"
        if _ways.widened
        else f"**To keep every layer on the accelerators** (the best way now is tier {_ways.options[0].tier}), "
        "click a change to make it:"
    )
    _forward = (
        [
            mo.callout(
                mo.vstack(
                    [
                        mo.md(_lead),
                        *[
                            mo.hstack([b, mo.md(safe_html(r["outcome"]))], justify="start", align="center")
                            for b, r in zip(suggestion_buttons, _rows, strict=True)
                        ],
                    ],
                    gap=0.25,
                ),
                kind="warn" if _ways.options else "danger",
            )
        ]
        if _rows
        else []
    )
    _drawn = nd.sweep_options(_result, best=4, misses=2)
    try:
        sweep, _tabs = (
            AUDIENCE.run(
                lambda: nd.context_sweep(
                    shape, _drawn, _request, context_steps, names=nd.option_names(_result, _drawn)
                ),
                what="the context sweep",
            ),
            {},
        )
    except ExplorerError as _e:
        sweep, _tabs = [], {"Curves against context": mo.callout(mo.md(safe_html(str(_e))), kind="warn")}
    if sweep != get_sweep():  # the same curves after a context move (explorer.ui.sweep_cache): no redraw
        set_sweep(sweep)
    if fit_button.value or get_fit_asked() is not None:  # asked now, or a list shown for the last plan: cleared
        set_fit_asked((cluster, _request, _result.goal) if fit_button.value else None)

    def _why_not(result=_result):
        _groups = nd.refusal_groups(result)
        return (
            mo.accordion(
                {
                    f"{rule}: {n:,} ways": mo.Html(
                        nd.rows_html(rows[:40], ("way", "artifact", "reason"), table_id=f"refused-{rule}")
                    )
                    for rule, n, rows in _groups
                },
                lazy=True,  # a closed group's rows are not sent on every move
            )
            if _groups
            else mo.md("Nothing was refused.")
        )

    # the refusals and the model's facts are built when their tab is opened (the tabs are lazy): a move builds
    # neither (the refusals' accordion and tables were ~1.5 ms of a 70B move's ~10 ms of Python)
    _tabs["Why not"] = _why_not
    if pin is not None and pin.value.strip():
        from explorer.ui.pinned_view import pinned_answer, pinned_launch

        try:
            _pinned = pinned_answer(
                shape,
                cluster,
                pin.value,
                engines=ENGINE_KEYS[engine.value],
                request=_request,
                artifacts=_chosen,
                model_ref=model_ref,
            )
            _o = _pinned.option
            _lines = "\n".join(pinned_launch(_pinned))
            _tabs["Pinned GPUs"] = mo.callout(
                mo.md(
                    f"**{safe_html(_o.label)}**: the worst card needs {gib(_o.per_card.total)} of "
                    f"{gib(_o.per_card.usable)} usable. {safe_html(_pinned.message)}\n\n"
                    f"<pre>{safe_html(_lines)}</pre>"
                ),
                kind="danger" if _pinned.overcommitted else "success",
            )
        except ExplorerError as _e:
            _tabs["Pinned GPUs"] = mo.callout(mo.md(f"**Cannot pin:** {safe_html(str(_e))}"), kind="danger")

    _flags = settings_text(settings_values)

    def _model_facts(name=model_name, model=model, flags=_flags):
        _facts = "\n".join(f"| {k} | {safe_html(v)} |" for k, v in shape_rows(shape_summary(model.shape)))
        return kept_md(
            f"**{safe_html(name)}**, answered from the **{model.origin}**\n\n| | |\n|---|---|\n{_facts}\n\n"
            + "\n".join(f"- {safe_html(n)}" for n in model.notes)
            + (f"\n\nEngine settings in force: `{safe_html(flags)}`" if flags else "")
        )

    _tabs["Model"] = _model_facts
    # a tab's content is sent when it is shown; a bundle, as the answer's output: no outline parse a message
    BundledHtml(mo.vstack([*_forward, mo.ui.tabs(_tabs, lazy=True)], gap=0.5).text)
    return app_state, suggestion_buttons, sweep


@app.cell(hide_code=True)
def _(get_sweep):
    # the curves against context (memory, then speed where estimated) in one cell, redrawn only when they change
    # (the asked context is the slider's and the table's; a marker here would redraw them on every move), each
    # chart carrying only the columns it draws, and drawn when scrolled into view: an open sends and draws no
    # chart below the fold
    _rows = get_sweep()
    mo.stop(not _rows)
    _specs = [vega.memory_context_spec]
    if any(r["tokens_per_s"] is not None for r in _rows):
        _specs.append(vega.speed_context_spec)
    mo.lazy(lambda rows=_rows, specs=_specs: mo.vstack([vega.VegaLiteSpec(spec(rows)) for spec in specs]))
    return


@app.cell(hide_code=True)
def _():
    # the question and its button never change: drawn once, not again on every move
    fit_button = mo.ui.run_button(label="What runs on this cluster?")
    mo.vstack(
        [
            mo.md(
                "**Hardware first.** Which known models run on this cluster, with the context and engines "
                "above, ranked by the goal, the best way for each, and the first change that fits the rest."
            ),
            fit_button,
        ]
    )
    return (fit_button,)


@app.cell(hide_code=True)
def _(cluster, get_fit_asked):
    # Hardware first: every model known offline (the snapshot, then the cache) on this cluster with this
    # request, its own weights, ranked by the goal, with the first change that fits (explorer fit), on demand.
    fit_list, _fit_problem = None, None
    # asked for this cluster (another cluster, or none that parses, clears the list at once)
    if get_fit_asked() is not None and get_fit_asked()[0] is cluster:
        # imported on the first press, not at open: the list of known models reads the cache too
        from explorer.plan.fit_view import fit_rows as _fit_rows
        from explorer.sources.known_models import known_models as _known_models
        from explorer.ui.fit_view import FIT_COLUMNS as _FIT_COLUMNS
        from explorer.ui.fit_view import fit_table as _fit_table

        _cluster, _request, _goal = get_fit_asked()
        _known = _known_models(use_cache=not IN_BROWSER and AUDIENCE.listing_uses_cache, chosen=AUDIENCE.chosen_models)
        with mo.status.spinner(title=f"Planning the {len(_known.models)} known models on this cluster …"):
            _t0 = time.perf_counter()
            try:
                fit_list = AUDIENCE.run(
                    lambda: _fit_table(
                        _fit_rows(
                            _known.models,
                            _cluster,
                            _request,
                            goal=_goal,
                            speed=SpeedSettings(prices=shipped_prices()),
                            catalogue=shipped_catalogue(),
                        )
                    ),
                    what="the list of known models",
                )
            except ExplorerError as _e:
                _fit_problem = str(_e)
            _ms = (time.perf_counter() - _t0) * 1000
    _shown = (
        [
            mo.md(
                f"{sum(r['tier'] != '✗' for r in fit_list)} of {len(fit_list)} models fit "
                f"(planned in {_ms / 1000:.1f} s)."
            ),
            mo.Html(nd.rows_html(fit_list, _FIT_COLUMNS, table_id="explorer-fit")),
        ]
        if fit_list is not None
        else []
    ) + ([mo.callout(mo.md(safe_html(_fit_problem)), kind="warn")] if _fit_problem else [])
    mo.vstack(_shown) if _shown else None
    return (fit_list,)


@app.cell(hide_code=True)
def _():
    engine_log = mo.ui.text_area(
        placeholder="Paste a vLLM, SGLang or llama.cpp start-up log: its model, card and settings are read from it",
        rows=4,
        max_length=PASTE_CAPS["log"],
        full_width=True,
    )
    return (engine_log,)


@app.cell(hide_code=True)
def _(engine_log):
    # An engine's own log beside explorer's figures for the same launch (explorer check), offline.
    log_rows, _problem = None, None
    if engine_log.value.strip():
        from explorer.ui.check_rows import COLUMNS as LOG_COLUMNS
        from explorer.ui.check_rows import check_rows

        try:
            if _too_big := over_cap("log", engine_log.value):
                raise ExplorerError(_too_big)
            log_rows = AUDIENCE.run(
                lambda: check_rows(engine_log.value, offline=True, **AUDIENCE.spec_options()), what="the log check"
            )
        except ExplorerError as _e:
            _problem = str(_e)
    mo.accordion(
        {
            "Check an engine log: what the engine measured beside explorer's figures": mo.vstack(
                [
                    engine_log,
                    *([mo.Html(nd.rows_html(log_rows, LOG_COLUMNS, table_id="explorer-log"))] if log_rows else []),
                    *(
                        [mo.callout(mo.md(f"**The log was not read.** {safe_html(_problem)}"), kind="warn")]
                        if _problem
                        else []
                    ),
                ]
            )
        },
        lazy=False,
    )
    return (log_rows,)


@app.cell(hide_code=True)
def _(size_mode, workload_controls):
    workload_values = {k: sv.control_text(k, v) for k, v in workload_controls.value.items()}
    workload, _errors = sv.read_workload(workload_values)
    _shown = [mo.hstack([workload_controls[k] for k in workload_values], wrap=True, justify="start", gap=1.5)]
    if _errors:
        _shown.append(mo.callout(mo.md("**The workload is not read:** " + safe_html("; ".join(_errors))), kind="warn"))
    mo.vstack([size_mode, *(_shown if size_mode.value else [])], gap=0.5)
    return workload, workload_values


@app.cell(hide_code=True)
def _(artifact_menu, cluster, engine, kv_dtype, request_settings, shape, size_mode, weights, workload):
    # The clusters to buy for the workload, best first; computed only while the size mode is on, so the main
    # controls cost nothing more while it is off. Not the context or the concurrency: the workload sets them
    # (prompt + answer, the batch), so a context move sizes nothing again.
    mo.stop(not size_mode.value or workload is None)
    mo.stop(not workload.given, mo.md("Set the users (or a request rate) to size a cluster."))
    size_request = replace(PlanRequest(kv_dtype=kv_dtype.value, engines=ENGINE_KEYS[engine.value]), **request_settings)
    _weights = [artifact_menu[k] for k in weights.value] or [next(iter(artifact_menu.values()))]
    try:
        sized, _error = (
            AUDIENCE.run(
                lambda: size(
                    shape,
                    workload,
                    shipped_catalogue(),
                    shipped_prices(),
                    size_request,
                    artifacts=_weights,
                    own=cluster,
                ),
                what="the sizing",
            ),
            None,
        )
    except Exception as _e:  # a typed ExplorerError, or a bug: a callout either way, never a traceback
        sized, _error = None, str(_e) if isinstance(_e, ExplorerError) else f"{type(_e).__name__}: {_e}"
    mo.stop(sized is None, mo.callout(mo.md(f"**The sizing failed.** {safe_html(_error or '')}"), kind="danger"))
    size_table_rows = sv.size_rows(sized)
    _advice = sv.advice_md(sized)
    _head = [
        mo.md(
            f"**Clusters for {safe_html(workload_text(workload))}**, cheapest an hour first "
            f"({len(sized.searched)} priced card classes and your cluster searched, each replica planned at "
            f"{workload.context_tokens:,} tokens and launched with the command shown; estimates from the "
            "roofline speed model):"
        ),
        *([mo.callout(mo.md(_advice), kind="danger")] if _advice else []),
    ]
    mo.vstack([*_head, mo.Html(nd.rows_html(size_table_rows, sv.SIZE_COLUMNS, table_id="explorer-sizes"))], gap=0.5)
    return size_request, size_table_rows, sized


@app.cell(hide_code=True)
def _(shape, size_request, sized):
    # The frontier of the first three clusters, live with the workload's sliders and the model and cluster
    frontier = sv.frontier_of(sized, shape, size_request)
    _tpot, _ttft = sized.workload.tpot_target_s, sized.workload.ttft_s
    _spec = frontier_chart(
        frontier, user_tokens_per_s=1 / _tpot if _tpot else None, ttft_ms=_ttft * 1e3 if _ttft else None
    )
    vega.VegaLiteSpec(_spec) if frontier else mo.md("No cluster to draw.")
    return (frontier,)


@app.cell(hide_code=True)
def _():
    # the lessons at the sidebar's foot: the answer starts at the top of the page
    mo.sidebar([mo.md(lesson_links(in_browser=IN_BROWSER, query_file=mo.query_params().get("file")))], width=SIDEBAR)
    return


if __name__ == "__main__":
    app.run()
