# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="Many models on one fleet")

with app.setup(hide_code=True):
    import time

    import marimo as mo

    from explorer.engines.registry import FLEET_ENGINE, engine_labels
    from explorer.errors import ExplorerError, OfflineMissError
    from explorer.fleet.footprints import fleet_cards, launch_ids, unique_names
    from explorer.fleet.place import place
    from explorer.safe_text import safe_html
    from explorer.sources.shipped import parse_cluster
    from explorer.ui import charts, vega
    from explorer.ui import fleet_rows as nf
    from explorer.ui import plan_rows as nd
    from explorer.ui.fleet_launch import LAUNCH_COLUMNS, launch_rows
    from explorer.ui.model_pick import UnknownModelError, pick_model


@app.cell(hide_code=True)
def _():
    mo.md("""
    # Many models on one fleet

    A service rarely runs one model: a chat model answers questions, an embedder and a reranker find the
    passages, vision and OCR models read documents as they come in. Pick the **models** (each with its
    context, replicas and the **phases** it runs in), a **cluster** and whose **accounting** sizes them:
    *explorer* places every instance on the cards. Small models share a card; a model too big for one card
    is split; models that never run in the same phase may take turns in the same memory (a **swap group**,
    charged its largest member per card); replicas spread over cards before they stack. Then pin the
    models yourself in the **plan editor** and see whether your plan fits. Sizes are GiB (1024³ bytes).
    """)
    return


@app.cell(hide_code=True)
def _():
    _label = {tokens: label for label, tokens in nf.CONTEXT_CHOICES.items()}
    _rows = [*nf.DEFAULT_FLEET, nf.FleetRow(name="", repo="")]
    model_rows = mo.ui.array(
        [
            mo.ui.dictionary(
                {
                    "name": mo.ui.text(value=_r.name, placeholder="name (default: the id)"),
                    "model": mo.ui.text(
                        value=_r.repo, placeholder="org/name, org/name:FILE.gguf or a path", full_width=True
                    ),
                    "context": mo.ui.dropdown(
                        options=list(nf.CONTEXT_CHOICES), value=_label.get(_r.context_tokens, "default")
                    ),
                    "replicas": mo.ui.number(start=1, stop=16, value=_r.replicas),
                    "phases": mo.ui.text(value=_r.phases, placeholder="always"),
                    "min context": mo.ui.dropdown(options=list(nf.CONTEXT_CHOICES), value="default"),
                }
            )
            for _r in _rows
        ]
    )
    return (model_rows,)


@app.cell(hide_code=True)
def _():
    extra_terms = mo.ui.text_area(
        placeholder="more models, one a line: name = ID[:QUANT][:CONTEXT[/MIN]][xREPLICAS][@phase,...]  e.g.  "
        "small = Qwen/Qwen3-1.7B:16kx2@query",
        rows=2,
        full_width=True,
    )
    return (extra_terms,)


@app.cell(hide_code=True)
def _():
    # models the snapshot and the cache do not know are read from the Hub only when Fetch is pressed
    fetch = mo.ui.run_button(label="Fetch", tooltip="Read the models the snapshot does not know from the Hub")
    get_fetched, set_fetched = mo.state({})
    return fetch, get_fetched, set_fetched


@app.cell(hide_code=True)
def _(extra_terms, fetch, model_rows):
    _widths = [2, 5, 1.2, 1, 2, 1.2]
    _head = mo.hstack(
        [
            mo.md(f"**{h}**")
            for h in (
                "name",
                "model (any id: the snapshot, a .gguf, a path; Hub ids after Fetch)",
                "context",
                "replicas",
                "phases (comma-separated; empty: always)",
                "min context (default: the context)",
            )
        ],
        widths=_widths,
        gap=1,
    )
    _story = "\n".join(f"- **{r.name}** ({r.repo}): {safe_html(r.why)}" for r in nf.DEFAULT_FLEET)
    mo.vstack(
        [
            mo.md(
                "## 1 · Models\nRow order is placement priority, as on the command line: earlier rows are charged "
                "first. Clear a row's model to leave it out."
            ),
            _head,
            *[
                mo.hstack(
                    [_row[k] for k in ("name", "model", "context", "replicas", "phases", "min context")],
                    widths=_widths,
                    gap=1,
                )
                for _row in model_rows
            ],
            extra_terms,
            mo.hstack(
                [fetch, mo.md("the models the snapshot and the cache do not know, from the Hub")], justify="start"
            ),
            mo.accordion(
                {
                    "The default fleet, and why": mo.md(
                        "A document-search service on three 48 GB cards. The two 32B models never run in the same phase "
                        "(vision reads documents at **ingest**, chat answers at **query**) and cannot both be resident, so "
                        "they form a swap group on two cards; the small models share the third card; the embedder runs in "
                        "both phases and spreads its two replicas over two cards. The snapshot has no embedder or reranker, "
                        "so the models they are built on stand in (same layers, same footprint).\n\n" + _story
                    )
                }
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _():
    preset_pick = mo.ui.dropdown(
        options=[p.name for p in nf.FLEET_PRESETS], value=nf.FLEET_PRESETS[0].name, label="Cluster preset"
    )
    engine = mo.ui.radio(
        options={label: name for name, label in engine_labels().items()},
        value=engine_labels()[FLEET_ENGINE.name],
        inline=True,
        label="Footprints by the accounting of",
    )
    precision = mo.ui.dropdown(
        options={
            "as published": None,
            "bf16": "bf16",
            "fp8": "fp8",
            "int4-awq": "int4-awq",
            "Q8_0 (GGUF)": "Q8_0",
            "Q4_K_M (GGUF)": "Q4_K_M",
        },
        value="as published",
        label="Weights of every model",
    )
    usable = mo.ui.slider(start=0.5, stop=1.0, step=0.05, value=0.9, show_value=True, label="Usable share of each card")
    return engine, precision, preset_pick, usable


@app.cell(hide_code=True)
def _(preset_pick):
    preset = next(p for p in nf.FLEET_PRESETS if p.name == preset_pick.value)
    spec = mo.ui.text(value=preset.spec, label="Cluster spec (the source of truth: edit it freely)", full_width=True)
    return preset, spec


@app.cell(hide_code=True)
def _(engine, precision, preset, preset_pick, spec, usable):
    mo.vstack(
        [
            mo.md("## 2 · Cluster and accounting"),
            mo.hstack([preset_pick, mo.md(f"*{safe_html(preset.description)}*")], justify="start", gap=2),
            spec,
            mo.md(
                "Grammar: `NODESxGPUSxCLASS[@FABRIC][,free=…]` joined by `+` (see docs/cluster_spec.md). Every GPU "
                "becomes a card, numbered in node order; a cluster without GPUs gives one unified-memory pool."
            ),
            mo.hstack([engine, precision, usable], justify="start", gap=2),
        ]
    )
    return


@app.cell(hide_code=True)
def _(extra_terms, fetch, get_fetched, model_rows, set_fetched):
    # Each model id as the resolver reads it: the snapshot, a local config.json or .gguf, the cache;
    # the Hub only for the ids Fetch was pressed for (kept for the session).
    def model_of(model_id):
        if model_id in get_fetched():
            return get_fetched()[model_id]
        try:
            return pick_model(model_id)
        except UnknownModelError as e:
            near = f" (did you mean {', '.join(e.suggestions[:3])}?)" if e.suggestions else ""
            raise OfflineMissError(
                f"{model_id} is neither in the snapshot nor in the cache: press Fetch to read it from the Hub{near}",
                hint="",
            ) from None

    if fetch.value:
        _terms, _ = nf.terms_from_rows(model_rows.value, extra_terms.value)
        _got = dict(get_fetched())
        with mo.status.spinner(title="Fetching from the Hub …"):
            for _name, _term in _terms:
                try:
                    _got.setdefault(_term.model_id, pick_model(_term.model_id, fetch=True))
                except ExplorerError:
                    pass  # the model's row says why below
        set_fetched(_got)
    return (model_of,)


@app.cell(hide_code=True)
def _(engine, extra_terms, model_of, model_rows, precision, spec, usable):
    # Library calls only: rows -> model terms -> footprints (the engine's accounting) -> a placement.
    try:
        offer, _error = fleet_cards(parse_cluster(spec.value), usable_fraction=usable.value), None
    except ExplorerError as _e:
        offer, _error = None, str(_e)
    mo.stop(
        offer is None,
        mo.callout(mo.md(f"**The cluster spec does not work here.** {safe_html(_error or '')}"), kind="danger"),
    )
    terms, term_errors = nf.terms_from_rows(model_rows.value, extra_terms.value)
    models, term_notes, _errors = nf.fleet_demands(
        terms,
        model_of,
        gpu=offer.gpu,
        engine=engine.value,
        precision=precision.value,
    )
    term_errors = term_errors + _errors
    _t0 = time.perf_counter()
    try:
        placement, _error = (
            (place(models, offer.cards, unified_budget_bytes=offer.unified_budget_bytes) if models else None),
            None,
        )
    except Exception as _e:  # a typed ExplorerError, or a planner bug: a callout either way, never a traceback
        placement, _error = None, str(_e) if isinstance(_e, ExplorerError) else f"{type(_e).__name__}: {_e}"
    place_ms = (time.perf_counter() - _t0) * 1000
    _problems = (
        [
            mo.callout(
                mo.md("**Some models were left out.**\n\n" + "\n".join(f"- {safe_html(e)}" for e in term_errors)),
                kind="warn",
            )
        ]
        if term_errors
        else []
    )
    if term_notes:
        _problems.append(mo.callout(mo.md("\n".join(f"- {safe_html(n)}" for n in term_notes)), kind="info"))
    mo.stop(
        placement is None,
        mo.vstack(
            [
                *_problems,
                mo.callout(
                    mo.md(f"**Nothing was placed.** {safe_html(_error or 'Pick at least one model above.')}"),
                    kind="danger",
                ),
            ]
        ),
    )
    mo.vstack(_problems)
    return models, offer, place_ms, placement, term_errors, term_notes, terms


@app.cell(hide_code=True)
def _(models, offer, place_ms, placement):
    notes = nf.placement_notes(placement)
    segments = nf.card_segments(placement, offer.labels)
    _count = {k: len(v) for k, v in notes.items()}
    mo.vstack(
        [
            mo.md(
                f"## 3 · The placement\n**{len(placement.instances)} instances of {len(models)} models** on "
                f"{nf.fleet_text(offer.labels, offer.unified_budget_bytes)}: "
                f"{_count['swap groups']} swap group(s), {_count['tight']} tight, {_count['refused']} refused, "
                f"{_count['missing replicas']} short of replicas · placed in {place_ms:.1f} ms."
            ),
            vega.VegaLiteSpec(charts.placement_chart(segments)),
        ]
    )
    return notes, segments


@app.cell(hide_code=True)
def _(notes):
    def _callout(key, kind, head):
        return mo.callout(mo.md(f"**{head}**\n\n" + "\n".join(f"- {safe_html(s)}" for s in notes[key])), kind=kind)

    _out = []
    if notes["swap groups"]:
        _out.append(
            _callout("swap groups", "info", "Swap groups: phase-disjoint models taking turns in the same memory")
        )
    if notes["tight"]:
        _out.append(_callout("tight", "danger", "Tight: placed although they fit nowhere (expect a failed load)"))
    if notes["refused"]:
        _out.append(_callout("refused", "danger", "Refused"))
    if notes["missing replicas"]:
        _out.append(_callout("missing replicas", "warn", "Fewer replicas than asked"))
    if not any(notes[k] for k in ("tight", "refused", "missing replicas")):
        _out.append(mo.callout(mo.md("Every model fits with all its replicas."), kind="success"))
    mo.vstack(_out)
    return


@app.cell(hide_code=True)
def _(engine, models, offer, placement, precision, spec, terms, usable):
    instance_rows = nf.instance_rows(placement)
    card_rows = nf.card_rows(placement, offer.labels)
    _names = unique_names([n or t.model_id for n, t in terms])
    _ids = launch_ids(models, dict(zip(_names, [t.model_id for _n, t in terms], strict=True)))
    launches = launch_rows(placement, offer, _ids, engine=engine.value)
    _cli = nf.cli_command(
        spec.value, terms, engine=engine.value, usable_fraction=usable.value, precision=precision.value
    )
    mo.vstack(
        [
            mo.md(
                "### Instances\nPer card: what each of its cards is charged (weights + KV cache at its context + the "
                "engine's fixed cost per card), GiB. Red rows with ✗ are tight."
            ),
            mo.Html(nd.rows_html(instance_rows, nf.INSTANCE_COLUMNS, table_id="placement-instances")),
            mo.md("### Cards"),
            mo.Html(nd.rows_html(card_rows, nf.CARD_COLUMNS, table_id="placement-cards")),
            mo.md(
                "### Starting each instance\nIts node and GPUs, and the engine's command with the memory the "
                "placement charged it (vLLM: the largest share of a card, rounded up; llama.cpp: the split)."
            ),
            mo.Html(nd.rows_html(launches, LAUNCH_COLUMNS, table_id="placement-launch")),
            mo.accordion(
                {
                    "The same from the command line": mo.md(
                        f"```\n{_cli}\n```\nThe command line names each model by its id rather than by the rows' names."
                    )
                }
            ),
        ]
    )
    return card_rows, instance_rows, launches


@app.cell(hide_code=True)
def _(placement):
    plan_editor = mo.ui.text_area(
        value=nf.plan_text(placement),
        rows=12,
        full_width=True,
        disabled=placement.unified,
        label="The planner's placement as a plan: move a model to other cards, change a context or a ratio, "
        "add a replica entry (a list of entries), or a swap group",
    )
    return (plan_editor,)


@app.cell(hide_code=True)
def _(models, offer, placement, plan_editor):
    mo.stop(
        placement.unified,
        mo.vstack(
            [
                mo.md("## 4 · Your own plan"),
                mo.callout(
                    mo.md("A unified-memory pool has no cards to pin models to, so there is no plan to edit."),
                    kind="info",
                ),
            ]
        ),
    )
    plan_check = nf.check_plan_text(plan_editor.value, models, offer.plan_cards)  # charged against each total
    if plan_check.error:
        _verdict = mo.callout(mo.md(f"**The plan does not read.** {safe_html(plan_check.error)}"), kind="danger")
    elif plan_check.violations:
        _verdict = mo.callout(
            mo.md(
                f"**The plan does not fit** ({len(plan_check.violations)} problem(s)):\n\n"
                + "\n".join(f"- {safe_html(v.message)}" for v in plan_check.violations)
            ),
            kind="danger",
        )
    else:
        _verdict = mo.vstack(
            [
                mo.callout(mo.md("**The plan fits.** Its charges per card:"), kind="success"),
                mo.Html(
                    nd.rows_html(
                        nf.card_rows(plan_check.placement, offer.labels), nf.CARD_COLUMNS, table_id="plan-cards"
                    )
                ),
                vega.VegaLiteSpec(
                    charts.placement_chart(
                        nf.card_segments(plan_check.placement, offer.labels),
                        title="What each card holds under your plan",
                    )
                ),
            ]
        )
    mo.vstack(
        [
            mo.md(
                "## 4 · Your own plan\nJSON, checked as you type by the planner's own charges: `models` maps a name "
                'to `{"cards": [...], "ratio": [...], "context": N, "replicas": N}` (or a list of them); '
                "`swap_groups` lists names that take turns. Changing the models or the cluster above refills it."
            ),
            plan_editor,
            _verdict,
        ]
    )
    return (plan_check,)


if __name__ == "__main__":
    app.run()
