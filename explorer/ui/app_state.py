"""The app's whole state as a URL query, and back: what a shared link opens.

:class:`AppDefaults` is what ``notebooks/app.py`` opens with: the model, the
weights, the engine, the context, the KV cache type, the concurrency, the
cluster (a spec, or a cluster file's JSON), the goal, pinned GPUs and every
engine setting (:mod:`explorer.ui.engine_settings`). :func:`app_defaults`
reads it from CLI arguments after ``--`` and URL query parameters (later
sources win; values that do not parse are ignored, so a stale link still
opens); :func:`to_query` writes the parts that differ from the defaults, so a
link stays short. Pure data: no marimo.

The keys are the CLI's words: ``model``, ``weights`` (comma-separated
artifact keys), ``engine`` (``all``, ``vllm``, ``sglang``, ``llamacpp``),
``context``, ``kv``, ``concurrency``, ``cluster``, ``cluster_file`` (compact
JSON), ``preset``, ``goal``, ``gpus`` (pinned, ``NODE:IDX,...``), each
engine setting under its declared key (:attr:`explorer.engines.setting.Setting.key`:
``gpu-memory-utilization``, ``ngl``...), ``size`` (``on``: the size mode open) and each workload setting
under its declared key (``users``, ``prompt``, ``ttft``…: :mod:`explorer.ui.size_view`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from explorer.engines.registry import engine_labels
from explorer.engines.request import PlanRequest
from explorer.engines.setting import declared_settings
from explorer.errors import PlanError
from explorer.plan.ranking import DEFAULT_GOAL, SORT_ALIASES
from explorer.ui.engine_settings import KEY_ALIASES, SETTINGS_BY_KEY, canonical_settings
from explorer.ui.size_view import WORKLOAD_BY_KEY, workload_query

__all__ = [
    "ENGINE_KEYS",
    "ENGINE_MENU",
    "GOALS",
    "QUERY_KEYS",
    "AppDefaults",
    "app_defaults",
    "apply_change",
    "to_query",
]

#: the engine menu: URL key -> the engines planned (``all``, then each engine of the registry by its name)
ENGINE_KEYS: dict[str, tuple[str, ...]] = {"all": tuple(engine_labels()), **{e: (e,) for e in engine_labels()}}
#: the app's engine menu: what it says -> the key (``all three`` -> ``all``, ``vLLM`` -> ``vllm``)
ENGINE_MENU: dict[str, str] = {
    "all three" if len(ENGINE_KEYS) == 4 else f"all {len(ENGINE_KEYS) - 1}": "all",
    **{label: e for e, label in engine_labels().items()},
}
#: what an old link or a label may say instead of the key (``llama.cpp``, ``vLLM``)
_ENGINE_ALIASES = {"all three, side by side": "all", **{label: e for e, label in engine_labels().items()}}

#: the request's settings the app's main controls set, by field (context, concurrency, KV type, weights, engine)
MAIN_SETTINGS = {s.field: s for s in declared_settings(PlanRequest) if s.main}

#: the goal menu: the planner's goal (:data:`explorer.plan.ranking.GOALS`) -> what the menu says
GOALS: dict[str, str] = {
    "fewest-cards": "fewest cards, best precision",
    "fastest": "fastest decode a sequence",
    "throughput": "most tokens/s in all",
    "cost": "cheapest a million tokens",
    "longest-context": "longest context",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AppDefaults:
    """What the app opens with.

    Attributes:
        model: a snapshot repo, any Hub id, ``org/name:FILE.gguf`` or a local path.
        weights: the artifact keys planned (:func:`explorer.ui.plan_rows.artifact_key`); empty: the repo's offer.
        preset: a cluster preset's name (:mod:`explorer.ui.presets`).
        spec: a cluster spec that overrides the preset's (None: the preset's).
        cluster_file: a cluster file's JSON (compact), which overrides the spec.
        context_tokens: the context asked for, tokens a sequence.
        engine: a key of :data:`ENGINE_KEYS`.
        kv_dtype: the KV cache type.
        concurrency: sequences at once.
        goal: a key of :data:`GOALS`.
        pinned: GPUs to pin, ``NODE:IDX,...`` (empty: none).
        settings: engine settings as typed, by URL key (:data:`explorer.ui.engine_settings.SETTINGS_BY_KEY`).
        sizing: the size mode is open (``explorer size`` for a workload).
        workload: the workload's settings as typed, by URL key (:data:`explorer.ui.size_view.WORKLOAD_BY_KEY`);
            an absent key: the app's workload (:data:`explorer.ui.size_view.APP_WORKLOAD`).
        refused: what a link or argument asked that the controls cannot show, each said in a sentence (the
            default is kept instead); the app shows them in a callout.
    """

    model: str = "meta-llama/Meta-Llama-3.1-70B"
    weights: tuple[str, ...] = ()
    preset: str = "One 8×H100 node"
    spec: str | None = None
    cluster_file: str | None = None
    context_tokens: int = 32768
    engine: str = "all"
    kv_dtype: str = "auto"
    concurrency: int = 1
    goal: str = DEFAULT_GOAL
    pinned: str = ""
    settings: Mapping[str, str] = field(default_factory=dict)
    sizing: bool = False
    workload: Mapping[str, str] = field(default_factory=dict)
    refused: tuple[str, ...] = ()


#: the most each linked number may be (its declared setting's own limit): URL key -> (cap, unit)
LINK_MAXIMA: Mapping[str, tuple[int, str]] = {
    MAIN_SETTINGS[name].key: (int(MAIN_SETTINGS[name].high), unit)
    for name, unit in (("context_tokens", "tokens"), ("concurrency", "sequences"))
}


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, (list, tuple)) and value else value


def _text(src: Mapping[str, Any], key: str) -> str | None:
    v = src.get(key)
    return v.strip() if isinstance(v, str) and v.strip() else None


def _declared(src: Mapping[str, Any], field: str) -> Any:
    """A main control's value from its declared setting's text (None: absent, or not a value of it)."""
    setting = MAIN_SETTINGS[field]
    text = str(_first(src.get(setting.key, ""))).replace(",", "")
    try:
        return setting.parse(text) if text.strip() else None
    except PlanError:
        return None


def _past_the_cap(src: Mapping[str, Any], field: str) -> str | None:
    """The callout's sentence when a linked context or concurrency is a whole number past what the app plans for
    (None: it is not, or not such a number): a link of context=10^30 made the app's cells raise (issue 25)."""
    key = MAIN_SETTINGS[field].key
    if key not in LINK_MAXIMA:
        return None
    try:
        n = int(str(_first(src.get(key, ""))).replace(",", "").strip())
    except ValueError:
        return None
    cap, unit = LINK_MAXIMA[key]
    if n <= cap:
        return None
    shown = f"{n:,}" if n < 10**18 else f"a {len(str(n))}-digit number"
    return f"{key} {shown} is past the {cap:,} {unit} the app plans for; the default is kept"


def _changes(src: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name in (("model", "model"), ("cluster", "spec"), ("cluster_file", "cluster_file"), ("preset", "preset")):
        if (v := _text(src, key)) is not None:
            out[name] = v
    if (v := _text(src, "weights")) is not None:
        out["weights"] = tuple(w.strip() for w in v.split(",") if w.strip())
    refused = []
    for name in ("context_tokens", "concurrency", "kv_dtype"):  # read as the CLI reads --context, --kv-dtype…
        if (value := _declared(src, name)) is not None:
            out[name] = value
        elif (why := _past_the_cap(src, name)) is not None:
            refused.append(why)
    if refused:
        out["refused"] = tuple(refused)
    engine = str(src.get("engine", "")).strip()
    engine = _ENGINE_ALIASES.get(engine, engine.lower())
    if engine in ENGINE_KEYS:
        out["engine"] = engine
    goal = _text(src, "goal")
    if (goal := SORT_ALIASES.get(goal or "", goal)) in GOALS:  # an old link's default/speed
        out["goal"] = goal
    if (v := _text(src, "gpus")) is not None:
        out["pinned"] = v
    keys = (*SETTINGS_BY_KEY, *KEY_ALIASES)  # an old link's key is read as the key that replaced it
    settings = canonical_settings(
        {k: str(_first(src[k])).strip() for k in keys if k in src and str(_first(src[k])).strip()}
    )
    if settings:
        out["settings"] = settings
    if _text(src, "size") is not None:
        out["sizing"] = _text(src, "size").lower() in ("on", "1", "true", "yes")
    workload = {k: str(_first(src[k])).strip() for k in WORKLOAD_BY_KEY if k in src}
    if workload:
        out["workload"] = workload
    return out


def app_defaults(*sources: Mapping[str, Any] | None) -> AppDefaults:
    """Defaults from CLI arguments (``--model X --cluster SPEC --context N --engine vllm --kv fp8 ...``)
    or URL query parameters with the same keys; later sources win; values that do not parse are ignored."""
    d = AppDefaults()
    for src in sources:
        plain = {str(k).lstrip("-"): _first(v) for k, v in dict(src or {}).items()}
        changes = _changes(plain)
        for merged in ("settings", "workload"):
            if merged in changes:
                changes[merged] = {**getattr(d, merged), **changes[merged]}
        d = replace(d, **changes)
    return d


#: AppDefaults field -> its URL key (the engine settings add theirs)
_FIELD_KEYS = {
    "model": "model",
    "weights": "weights",
    "preset": "preset",
    "spec": "cluster",
    "cluster_file": "cluster_file",
    "context_tokens": "context",
    "engine": "engine",
    "kv_dtype": "kv",
    "concurrency": "concurrency",
    "goal": "goal",
    "pinned": "gpus",
    "sizing": "size",
}
#: every URL key the app reads and writes (an old link's settings keys too, so the app replaces them)
QUERY_KEYS: frozenset[str] = (
    frozenset(_FIELD_KEYS.values()) | frozenset(SETTINGS_BY_KEY) | frozenset(KEY_ALIASES) | frozenset(WORKLOAD_BY_KEY)
)


def to_query(state: AppDefaults) -> dict[str, str]:
    """The URL query of ``state``: only what differs from :class:`AppDefaults` (``app_defaults(to_query(s)) == s``)."""
    base = AppDefaults()
    out: dict[str, str] = {}
    for f in fields(AppDefaults):
        value = getattr(state, f.name)
        if f.name in ("settings", "workload", "refused") or value == getattr(base, f.name) or value is None:
            continue
        shown = "on" if value is True else ",".join(value) if isinstance(value, tuple) else str(value)
        out[_FIELD_KEYS[f.name]] = shown
    out.update({k: v for k, v in state.settings.items() if k in SETTINGS_BY_KEY and v != ""})
    out.update(workload_query(state.workload))
    return out


def apply_change(state: AppDefaults, change: Mapping[str, Any]) -> AppDefaults:
    """``state`` with a suggestion's change made (:attr:`explorer.plan.suggestion.Suggestion.change`):
    ``quant`` plans that what-if precision alone, ``kv_dtype``, ``context`` and ``concurrency`` set their
    control, ``cluster`` replaces the spec (and any cluster file). Keys it does not know are left alone."""
    out: dict[str, Any] = {}
    if "quant" in change:
        out["weights"] = (f"what-if {change['quant']}",)
    if "kv_dtype" in change:
        out["kv_dtype"] = str(change["kv_dtype"])
    if "context" in change:
        out["context_tokens"] = int(change["context"])
    if "concurrency" in change:
        out["concurrency"] = int(change["concurrency"])
    if "cluster" in change:
        out["spec"], out["cluster_file"], out["pinned"] = str(change["cluster"]), None, ""
    return replace(state, **out)
