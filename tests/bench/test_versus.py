"""explorer.bench.versus: the pairing and the report (the browser run itself is a benchmark)."""

from __future__ import annotations

from explorer.bench.versus import abba, ratio_report


def test_the_sides_alternate_in_pairs_so_a_drift_in_load_falls_on_both():
    assert abba(3) == ["A", "B", "B", "A", "A", "B"]
    order = abba(30)
    assert order.count("A") == order.count("B") == 30
    # each side's mean position is the same (29.5 of 0..59): a load rising through the run hits both alike
    assert sum(i for i, s in enumerate(order) if s == "A") == sum(i for i, s in enumerate(order) if s == "B")


def test_the_report_gives_the_medians_and_b_over_a():
    line = ratio_report("slider → table", "ms", {"A": [80.0, 70.0, 90.0], "B": [60.0, 64.0, 100.0]})
    # medians 80 and 64: 64 / 80 = 0.800
    assert line == "slider → table: A 80.0 ms, B 64.0 ms (medians of 3 and 3); B / A = 0.800"
