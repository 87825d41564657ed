"""explorer in Jupyter: the app's controls, live table, charts and refusals as ipywidgets.

>>> from explorer.ui.widgets import ExplorerWidget
>>> ExplorerWidget(model="meta-llama/Meta-Llama-3.1-8B", cluster="1x8xh100-80g")   # doctest: +SKIP

The widget is an ``ipywidgets.VBox``: a model box with a **Fetch** button
(and a password box for a Hub token), the weights to plan, the engine, a
log-scale context slider, the KV cache type, concurrent sequences, a
cluster preset and the editable cluster spec, the engine settings (one box
per request setting, grouped by engine, as in the app:
:mod:`explorer.ui.engine_settings`), then the ranked table, the
app's charts (what each card of the best option holds; memory against
context for the options the table ranks first), drawn by altair's renderer,
and the refusals grouped by rule. Every control but the model box re-plans
at once; the model is read only when Fetch is pressed (or when the widget is
built). Errors show as a red line with the message, never a traceback; a
token never appears in them.

For scripts and tests the state is plain attributes: :attr:`model` (the
resolved model), :attr:`result` (the last ``PlanResult``), :attr:`rows`
(the table's rows), :attr:`chart_specs` (the charts' vega-lite specs, by
name), :attr:`refusals` (the refusal groups), :attr:`settings` (the engine
settings' controls, by URL key) and :attr:`error` (the last message, or None).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import ipywidgets as w

from explorer.engines.request import PlanRequest
from explorer.errors import ExplorerError, PlanError
from explorer.model.dtypes import KV_CACHE_TYPES
from explorer.plan.planner import plan
from explorer.safe_text import safe_html
from explorer.sources.shipped import parse_cluster, shipped_prices
from explorer.speed.settings import SpeedSettings
from explorer.ui import plan_rows as nd
from explorer.ui import vega
from explorer.ui.engine_settings import SETTINGS, engine_groups, label, placeholder, request_changes
from explorer.ui.presets import PRESETS

__all__ = ["ExplorerWidget"]

_SEQUENCES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_WHAT_IFS = ("bf16", "fp8", "int4-awq", "int4-gptq")


def _resolve(text: str, *, offline: bool, token: str | None) -> Any:
    from explorer.sources.resolve import resolve_model

    return resolve_model(text, offline=offline, token=token)


class ExplorerWidget(w.VBox):
    """The explorer controls and ranked table as one ipywidget.

    Args:
        model: a Hub id (``org/name``, ``org/name:FILE.gguf``) or a local config.json / .gguf path.
        cluster: a cluster spec (``2x8xh100-80g@ib0``; see docs/cluster_spec.md).
        context: tokens a sequence must hold (snapped to the slider's log steps).
        engine: a key of :data:`explorer.ui.plan_rows.ENGINE_CHOICES` (``vLLM``, ``all three, side by side``…).
        kv_dtype: the KV cache type (``auto``, ``fp8``, ``q8_0``…).
        concurrency: sequences at once.
        token: a Hub token for gated repos (kept in a password box, never shown).
        offline: never ask the Hub (the cache and the shipped snapshot answer).
        resolver: ``resolver(text, offline=, token=)`` -> ResolvedModel (tests pass a fake).
    """

    def __init__(
        self,
        model: str = "meta-llama/Meta-Llama-3.1-8B",
        cluster: str = "1x8xh100-80g",
        *,
        context: int = 8192,
        engine: str = "all three, side by side",
        kv_dtype: str = "auto",
        concurrency: int = 1,
        token: str | None = None,
        offline: bool = False,
        resolver: Callable[..., Any] | None = None,
    ) -> None:
        self.offline = offline
        self._resolver = resolver or _resolve
        self.model: Any = None
        self.result: Any = None
        self.rows: list[dict[str, Any]] = []
        self.chart_specs: dict[str, dict[str, Any]] = {}
        self.refusals: list[tuple[str, int, list[dict[str, str]]]] = []
        self.error: str | None = None
        self._menu: dict[str, Any] = {}
        self._quiet = True  # no re-plans while controls are being built or rebuilt

        self.model_text = w.Text(
            value=model,
            description="Model",
            layout=w.Layout(width="480px"),
            placeholder="org/name, org/name:FILE.gguf, or a path",
        )
        self.token = w.Password(value=token or "", description="Hub token", placeholder="only for gated repos")
        self.fetch_button = w.Button(description="Fetch", button_style="primary", tooltip="Read the model")
        self.weights = w.SelectMultiple(description="Weights", rows=5, layout=w.Layout(width="640px"))
        self.engine = w.Dropdown(options=list(nd.ENGINE_CHOICES), value=engine, description="Engine")
        self.context = w.SelectionSlider(
            options=[("512", 512)], description="Context", continuous_update=False, layout=w.Layout(width="640px")
        )
        self.kv_dtype = w.Dropdown(options=list(KV_CACHE_TYPES), value=kv_dtype, description="KV cache")
        self.concurrency = w.SelectionSlider(
            options=[(str(n), n) for n in _SEQUENCES],
            value=nd.nearest_step(_SEQUENCES, concurrency),
            description="Sequences",
            continuous_update=False,
        )
        self.preset = w.Dropdown(
            options=["(as typed)"] + [p.name for p in PRESETS], value="(as typed)", description="Preset"
        )
        self.cluster = w.Text(
            value=cluster, description="Cluster", continuous_update=False, layout=w.Layout(width="640px")
        )
        self.settings = {s.key: _setting_control(s) for s in SETTINGS}
        groups = engine_groups()
        engine_box = w.Accordion(
            children=[w.VBox([self.settings[s.key] for s in group]) for group in groups.values()],
            titles=tuple(groups),
        )
        self.status = w.HTML()
        self.table = w.HTML()
        self.charts = w.Output(layout=w.Layout(width="100%"))
        self.why_not = w.HTML()
        super().__init__(
            children=[
                w.HBox([self.model_text, self.token, self.fetch_button]),
                self.weights,
                w.HBox([self.engine, self.kv_dtype, self.concurrency]),
                self.context,
                w.HBox([self.preset, self.cluster]),
                engine_box,
                self.status,
                self.table,
                self.charts,
                self.why_not,
            ]
        )

        self.fetch_button.on_click(lambda _b: self.fetch())
        self.preset.observe(self._on_preset, names="value")
        controls = (self.weights, self.engine, self.context, self.kv_dtype, self.concurrency, self.cluster)
        for control in (*controls, *self.settings.values()):
            control.observe(lambda _change: self.refresh(), names="value")
        self._want_context = context
        self.fetch()

    def setting_texts(self) -> dict[str, str]:
        """The engine settings as typed, by URL key (a switch: ``on``/``off``), as the app's link carries them."""
        return {
            key: ("on" if c.value else "off") if isinstance(c, w.Checkbox) else str(c.value)
            for key, c in self.settings.items()
        }

    # --- actions ---------------------------------------------------------------------------

    def fetch(self) -> None:
        """Read the model named in the model box (cache, Hub, snapshot), rebuild the weights and context, re-plan."""
        text, token = self.model_text.value.strip(), self.token.value.strip() or None
        try:
            model = self._resolver(text, offline=self.offline, token=token)
        except ExplorerError as e:
            msg = str(e).replace(token, "…") if token else str(e)
            self._show_error(f"Could not read {text!r}: {msg}")
            return
        self.model = model
        self._quiet = True
        try:
            self._menu = nd.artifact_choices(model.offer, model.what_ifs(_WHAT_IFS))
            self.weights.options = list(self._menu)
            self.weights.value = tuple(k for k, a in self._menu.items() if not a.what_if)
            steps = nd.context_steps(model.shape.max_context_tokens)
            want = self.context.value if self.result is not None else self._want_context
            self.context.options = [(f"{c:,}", c) for c in steps]
            self.context.value = nd.nearest_step(steps, model.shape.clamp_context(want))
        finally:
            self._quiet = False
        self.refresh()

    def refresh(self) -> None:
        """Plan with the controls' values and redraw the table (errors become the status line)."""
        if self._quiet or self.model is None:
            return
        shape = self.model.shape
        try:
            cluster = parse_cluster(self.cluster.value)
            chosen = [self._menu[k] for k in self.weights.value] or [next(iter(self._menu.values()))]
            changes, errors = request_changes(self.setting_texts())
            if errors:
                raise PlanError("; ".join(errors))
            request = replace(
                PlanRequest(
                    context_tokens=int(self.context.value),
                    concurrency=int(self.concurrency.value),
                    kv_dtype=self.kv_dtype.value,
                    engines=nd.ENGINE_CHOICES[self.engine.value],
                ),
                **changes,
            )
            self.result = plan(
                shape,
                cluster,
                request,
                artifacts=chosen,
                model_ref=self.model.repo or shape.name,
                speed=SpeedSettings(prices=shipped_prices()),
            )
        except ExplorerError as e:
            self._show_error(str(e))
            return
        self.error = None
        self.rows = nd.option_rows(self.result, limit=25) + nd.near_miss_rows(self.result, limit=3)
        r = self.result
        self.status.value = (
            f"<b>{safe_html(self.model.repo or shape.name)}</b> ({self.model.origin}): "
            f"<b>{len(r.options)} ways fit</b> on {cluster.total_gpus:,} GPUs; "
            f"{sum(r.pruned.values()):,} refused. Per card: needs / usable, GiB."
        )
        self.table.value = nd.rows_html(self.rows)
        self._draw(shape, request)

    def _draw(self, shape: Any, request: PlanRequest) -> None:
        """The charts (altair's renderer picks what this front end shows) and the refusals, from ``result``."""
        r = self.result
        drawn = nd.sweep_options(r, best=4, misses=2)
        first = r.options[0] if r.options else (drawn[0] if drawn else None)
        steps = nd.context_steps(shape.max_context_tokens)
        sweep = nd.context_sweep(shape, drawn, request, steps, names=nd.option_names(r, drawn))
        self.chart_specs = {}
        if first is not None:
            self.chart_specs["cards"] = vega.card_memory_spec(nd.card_parts(first), title=first.label)
        if sweep:
            self.chart_specs["memory"] = vega.memory_context_spec(sweep, context=request.context_tokens)
        self.charts.clear_output(wait=True)
        with self.charts:
            for spec in self.chart_specs.values():
                _show_chart(spec)
        self.refusals = nd.refusal_groups(r)
        self.why_not.value = "".join(
            f"<details><summary>{safe_html(rule)}: {n:,} ways</summary>"
            f"{nd.rows_html(rows[:40], ('way', 'artifact', 'reason'), table_id=f'refused-{rule}')}</details>"
            for rule, n, rows in self.refusals
        )

    def _on_preset(self, change: dict) -> None:
        preset = next((p for p in PRESETS if p.name == change["new"]), None)
        if preset is not None:
            self.cluster.value = preset.spec  # observing the spec re-plans

    def _show_error(self, message: str) -> None:
        self.error = message
        self.status.value = f"<span style='color:#b91c1c'><b>Error:</b> {safe_html(message)}</span>"


def _setting_control(s: Any) -> w.Widget:
    """One engine setting's control: a checkbox for a switch, a menu for a choice, else a text box."""
    description = s.flag
    style = {"description_width": "initial"}
    if s.kind == "bool":
        return w.Checkbox(value=False, description=f"{s.flag}: {label(s)}", style=style, indent=False)
    if s.kind == "choice":
        first = "(default)" if s.optional else str(s.default)
        options = [(first, "")] + [(c, c) for c in s.choices if c != s.default]
        return w.Dropdown(options=options, value="", description=description, tooltip=label(s), style=style)
    return w.Text(value="", placeholder=placeholder(s), description=description, tooltip=label(s),
                  continuous_update=False, style=style)  # fmt: skip


def _show_chart(spec: dict[str, Any]) -> None:
    """Display a vega-lite spec through altair's active renderer (JupyterLab draws the vega-lite MIME type;
    other front ends get what altair gives them)."""
    import altair as alt
    from IPython.display import display

    bundle = alt.renderers.get()(spec)
    display(bundle[0] if isinstance(bundle, tuple) else bundle, raw=True)
