"""explorer.engines.evaluation: every per-card figure is checked where it is made.

The engines' records refuse a negative, NaN or infinite figure for every caller (the app, the widgets, a
script), so no option is ever ranked on one.
"""

from __future__ import annotations

import math

import pytest

from explorer.engines.evaluation import CardMemory, Evaluation
from explorer.errors import ImplausibleFigureError


@pytest.mark.parametrize("part", ["weights", "kv_cache", "activations", "overhead", "usable", "capacity"])
@pytest.mark.parametrize("value", [-512, math.nan, math.inf])
def test_card_memory_refuses_a_negative_or_non_finite_part(part, value):
    parts = dict.fromkeys(("weights", "kv_cache", "activations", "overhead", "usable", "capacity"), 1 << 30)
    with pytest.raises(ImplausibleFigureError, match=f"{part} came out as"):
        CardMemory(role="GPU 0", **{**parts, part: value})


def test_an_evaluation_refuses_a_negative_limit():
    card = CardMemory(role="GPU 0", weights=1, kv_cache=1, activations=1, overhead=1, usable=10, capacity=10)
    with pytest.raises(ImplausibleFigureError, match="max_context_tokens came out as -1"):
        Evaluation(cards=(card,), host=None, max_context_tokens=-1, max_concurrency=1, command="")
