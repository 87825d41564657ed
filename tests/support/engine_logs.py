"""The engine-log corpus (tests/data/engine_logs): published start-up logs and how each is replayed.

Each file holds a log's URL, engine version, model, card, settings, the
figures read from it (``observed``, GiB or MiB as printed), the verbatim
excerpt and a ``replay`` block: the config that stands for the model (from
tests/data/configs or tests/data/engine_logs/configs), the card class,
settings the excerpt leaves out, or why the log cannot be replayed, and the
strict xfail reasons of its known misses (``misses``: part → mechanism).
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

from explorer.engines.logs import EngineLog, read_engine_log
from explorer.errors import EngineLogError
from explorer.units import GiB
from support.corpus import CONFIGS, DATA

LOGS = DATA / "engine_logs"
LOG_CONFIGS = LOGS / "configs"
#: research figures (GiB as printed) → observed keys
_GIB_KEYS = {
    "model_loading_gib": "weights_bytes",
    "weights_gib": "weights_bytes",
    "available_kv_cache_gib": "kv_cache_bytes",
    "activation_peak_gib": "activation_bytes",
    "non_torch_increase_gib": "non_torch_bytes",
    "cuda_graph_gib": "cuda_graph_bytes",
    "torch_total_gib": "torch_total_bytes",
    "free_at_start_gib": "free_at_start_bytes",
    "requested_memory_gib": "requested_bytes",
}


def names() -> list[str]:
    """Every log's file stem, sorted."""
    return sorted(p.stem for p in LOGS.glob("*.json"))


@cache
def entry(name: str) -> dict:
    """A corpus file as stored."""
    return json.loads((LOGS / f"{name}.json").read_text())


def replayable(name: str) -> bool:
    """Whether the log can be replayed (its model has a config, its card a class)."""
    return "not_replayable" not in entry(name)["replay"]


def config_path(config: str) -> Path:
    """Where a replay's config lives: the config corpus, else the corpus's own configs."""
    path = CONFIGS / f"{config}.json"
    return path if path.is_file() else LOG_CONFIGS / f"{config}.json"


@cache
def shape_for(config: str, overrides: str = ""):
    """The (cached) shape of a replay's config, with the run's config overrides (a JSON object) applied on top.

    ``overrides`` are the keys the run itself replaced in the checkpoint's config, as the engine does:
    vLLM's ``--rope-scaling`` / ``--hf-overrides`` replace top-level keys of the HF config before the
    model config is derived (vllm/config.py ``ModelConfig``: ``hf_overrides_kw.update({"rope_scaling": ...})``).
    """
    from explorer.model.shapes import shape_from_config

    raw = json.loads(config_path(config).read_text())
    raw.update(json.loads(overrides) if overrides else {})
    return shape_from_config(raw, name=config)


def _research_figures(observed: dict) -> dict[str, int]:
    out = {key: round(observed[k] * GiB) for k, key in _GIB_KEYS.items() if isinstance(observed.get(k), (int, float))}
    if "k_size_gib" in observed and "v_size_gib" in observed:
        out["kv_cache_bytes"] = round(observed["k_size_gib"] * GiB) + round(observed["v_size_gib"] * GiB)
    for k in ("kv_cache_tokens", "kv_tokens"):
        if isinstance(observed.get(k), int):
            out["kv_cache_tokens"] = observed[k]
    return out


@cache
def parsed(name: str) -> EngineLog | None:
    """explorer's reading of the excerpt, or None when it is not a log explorer reads."""
    try:
        return read_engine_log(entry(name)["excerpt"])
    except EngineLogError:
        return None


@cache
def log_record(name: str) -> EngineLog:
    """The log as replayed: explorer's reading of the excerpt, completed by the corpus's figures and settings
    where the excerpt lacks them (records and cut excerpts)."""
    e = entry(name)
    read = parsed(name) or EngineLog(engine=e["engine"])
    research = {k: v for k, v in _research_figures(e["observed"]).items() if k not in read.observed}
    refused = read.refused if read.refused is not None else e["observed"].get("refused")
    settings = {**e["settings"], **read.settings}
    return replace(
        read,
        version=read.version or e["engine_version"],
        model=read.model or e["model"],
        observed={**research, **read.observed},
        settings=settings,
        refused=refused,
        cards=max(read.cards, e.get("card_count") or 1),
    )
