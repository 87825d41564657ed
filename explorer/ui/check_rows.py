"""An engine log beside explorer's plan, as rows for a table (the app's "paste your engine log" box).

:func:`check_rows` takes the log's text and returns one row a part the
engine measured: what the log says, what explorer predicts, the difference
(GiB, or tokens), and the verdicts. :func:`comparison_rows` does the same
for a check already made.
"""

from __future__ import annotations

from typing import Any

from explorer.engines.logs.check import PARTS, READ_ONLY, LogCheck
from explorer.sources.engine_log import check_log_text
from explorer.units import GiB

#: the columns of :func:`comparison_rows`
COLUMNS = ("part", "log", "explorer", "difference", "difference %")


def _shown(key: str, value: int) -> str:
    return f"{value:,} tokens" if key.endswith("_tokens") else f"{value / GiB:,.2f} GiB"


def _row(part: str, log: str, explorer: str) -> dict[str, Any]:
    return {"part": part, "log": log, "explorer": explorer, "difference": "", "difference %": ""}


def _has_kv_tokens(check: LogCheck, key: str) -> bool:
    """Whether a KV room missing in bytes is compared in tokens instead."""
    return key == "kv_cache_bytes" and "kv_cache_tokens" in check.observed


def comparison_rows(check: LogCheck) -> list[dict[str, Any]]:
    """One row a part both the log and explorer have, in :data:`~explorer.engines.logs.check.PARTS` order; the
    weights and KV room the log does not print (explorer's figure, not compared); the figures it prints that
    explorer does not predict (a refusal's, an out-of-memory error's); then the verdict."""
    rows = []
    diff = check.differences
    for key, label in PARTS.items():
        if key not in diff:
            continue
        observed = check.observed[key]
        rows.append(
            {
                "part": label,
                "log": _shown(key, observed),
                "explorer": _shown(key, check.predicted[key]),
                "difference": ("+" if diff[key] >= 0 else "-") + _shown(key, abs(diff[key])),
                "difference %": f"{diff[key] / abs(observed):+.1%}" if observed else "",
            }
        )
    for key in ("weights_bytes", "kv_cache_bytes"):
        if key not in check.observed and key in check.predicted and not _has_kv_tokens(check, key):
            rows.append(_row(PARTS[key], "not in the log", _shown(key, check.predicted[key])))
    for key, label in READ_ONLY.items():
        if key in check.log.observed:
            rows.append(_row(label, _shown(key, check.log.observed[key]), "(not predicted)"))
    started = {None: "not in the log", True: "started", False: "refused"}[check.started]
    rows.append(
        {
            "part": "verdict",
            "log": started,
            "explorer": "fits" if check.fits else f"refuses: {check.reason}",
            "difference": "" if check.agrees is None else ("agree" if check.agrees else "DISAGREE"),
            "difference %": "",
        }
    )
    return rows


def check_rows(text: str, *, model: str | None = None, card: str | None = None, **resolve: Any) -> list[dict[str, Any]]:
    """The rows for a pasted log (the model and card detected from it unless given).

    Raises:
        EngineLogError: the log cannot be read (the message says which lines were expected), or names no
            model or card and none is given.
    """
    return comparison_rows(check_log_text(text, model=model, card=card, **resolve))
