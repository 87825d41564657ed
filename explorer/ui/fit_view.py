"""Hardware first, as the app shows it: the rows of :func:`explorer.plan.fit_view.fit_rows` (every known
model's best option on one cluster, and its first change that fits) as text for a table."""

from __future__ import annotations

from collections.abc import Sequence

from explorer.engines.registry import engine_labels
from explorer.plan.fit_view import FitRow
from explorer.units import GiB

__all__ = ["FIT_COLUMNS", "fit_table"]

#: the table's columns
FIT_COLUMNS = ("model", "params (B)", "tier", "best way", "per card (GiB)", "max context", "decode tok/s", "to fit")


def fit_table(rows: Sequence[FitRow]) -> list[dict[str, str]]:
    """One row of text a model, in the view's order (fitting first, by tier and goal; then the nearest misses)."""
    out = []
    for row in rows:
        best, tps, s = row.best, row.decode_tokens_per_s, row.suggestion
        engine = engine_labels().get(best.engine, best.engine) if best else ""
        out.append(
            {
                "model": row.model,
                "params (B)": f"{row.params / 1e9:,.1f}",
                "tier": str(best.tier) if best else "✗",
                "best way": f"{engine} · {best.label.split(' · ', 1)[-1]}" if best else (row.error or "does not fit"),
                "per card (GiB)": f"{best.per_card.total / GiB:,.1f} / {best.per_card.usable / GiB:,.1f}"
                if best
                else "—",
                "max context": f"{best.evaluation.max_context_tokens:,}" if best else "—",
                "decode tok/s": "—" if tps is None else f"{tps:,.1f}",
                "to fit": "quantised: its own weights keep no GPU-only layout here"
                if row.widened
                else ("" if s is None else (s.text if s.fits else f"{s.text} (still short)")),
            }
        )
    return out
