"""GPU rental prices: USD per GPU-hour by GPU class, read from ``data/prices.csv``.

The table is meant to be edited: each row names its provider, the page the
figure was read from and when (sources in ``data/prices.md``). A class with
no row has no price, and explorer then shows no cost rather than a guess.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

from explorer.errors import CatalogueError

#: the columns of data/prices.csv, in order
COLUMNS = ("gpu_class", "usd_per_gpu_hour", "provider", "product", "source", "retrieved")


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """One class's hourly price.

    Attributes:
        gpu_class: the catalogue class name (``h100-80g``).
        usd_per_gpu_hour: US dollars for one GPU for one hour, on demand.
        provider: who rents it at that price.
        product: the provider's name for it.
        source: where the figure was read.
        retrieved: when it was read (``YYYY-MM-DD``).
    """

    gpu_class: str
    usd_per_gpu_hour: float
    provider: str = ""
    product: str = ""
    source: str = ""
    retrieved: str = ""


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by GPU class.

    Attributes:
        rows: one price per class.
    """

    rows: tuple[Price, ...] = ()

    def price(self, gpu_class: str) -> Price | None:
        """The row of a class; a stated-memory label (``h100-80g:81000MiB``) uses its base class's row."""
        name = gpu_class.split(":", 1)[0].lower()
        for row in self.rows:
            if row.gpu_class == name:
                return row
        return None

    def usd_per_gpu_hour(self, gpu_class: str) -> float | None:
        """USD per GPU-hour of a class, or None when the table has no price for it."""
        row = self.price(gpu_class)
        return row.usd_per_gpu_hour if row else None


def parse_prices(text: str, *, source: str = "prices.csv") -> PriceTable:
    """Parse a price table (the columns of :data:`COLUMNS`; only the first two are required).

    Raises:
        CatalogueError: a column is missing, a price is not a positive number, or a class appears twice.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS[:2] if c not in (reader.fieldnames or ())]
    if missing:
        raise CatalogueError(
            f"price table {source} lacks columns: {', '.join(missing)}", hint=f"columns are {', '.join(COLUMNS)}"
        )
    rows: list[Price] = []
    seen: set[str] = set()
    try:
        for line, r in enumerate(reader, start=2):
            name = (r.get("gpu_class") or "").strip().lower()
            text_price = (r.get("usd_per_gpu_hour") or "").strip()
            try:
                usd = float(text_price)
            except ValueError:
                usd = math.nan
            if not name or not (0 < usd < math.inf):
                raise CatalogueError(
                    f"price table {source} line {line}: {name or '(no class)'} has price "
                    f"{text_price!r}, not a positive number of USD per GPU-hour"
                )
            if name in seen:
                raise CatalogueError(f"price table {source} line {line}: {name} appears twice")
            seen.add(name)
            rows.append(
                Price(
                    gpu_class=name,
                    usd_per_gpu_hour=usd,
                    provider=(r.get("provider") or "").strip(),
                    product=(r.get("product") or "").strip(),
                    source=(r.get("source") or "").strip(),
                    retrieved=(r.get("retrieved") or "").strip(),
                )
            )
    except csv.Error as e:
        raise CatalogueError(f"price table {source} is not a CSV table: {e}") from None
    return PriceTable(tuple(rows))
