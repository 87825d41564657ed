"""explorer.ui.card_svg: the per-card chart as inline SVG, its bars measured against the plan's own bytes."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import cache
from itertools import pairwise

import pytest

from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster
from explorer.sources.snapshot.read import load_snapshot
from explorer.ui import plan_rows as nd
from explorer.ui.card_svg import FREE_COLOUR, card_memory_svg, gib_per_px, label_width, title_lines
from explorer.ui.vega import PART_COLOURS
from explorer.units import GiB

SVG = "{http://www.w3.org/2000/svg}"


@cache
def llama70b_on_an_h100_node():
    shape = load_snapshot().shape("meta-llama/Meta-Llama-3.1-70B")
    return plan(shape, parse_cluster("1x8xh100-80g"), PlanRequest(context_tokens=32768))


def _parsed(option, title="t"):
    rows = nd.card_parts(option)
    return rows, ET.fromstring(card_memory_svg(rows, title=title))


def _texts(root):
    return [t.text for t in root.iter(f"{SVG}text")]


def test_each_part_is_as_long_as_its_bytes_on_one_scale():
    best = llama70b_on_an_h100_node().options[0]
    rows, root = _parsed(best)
    card = best.evaluation.cards[0]
    parts = {r.get("data-part"): r for r in root.iter(f"{SVG}rect") if r.get("class") == "part"}
    assert list(parts) == ["weights", "kv cache", "activations", "overhead"]
    per_px = gib_per_px(rows)
    # the widest figure is the card's 79.6 GiB of memory: the axis ends at 80 GiB over the 412 px plot
    assert card.capacity / GiB < 80 and per_px == pytest.approx(80 / 412)
    for name, field in (("weights", "weights"), ("kv cache", "kv_cache"), ("activations", "activations")):
        assert float(parts[name].get("width")) == pytest.approx(getattr(card, field) / GiB / per_px, abs=0.006)
    # lengths in proportion to bytes: weights / KV cache on the drawing is weights / KV cache in bytes
    ratio = float(parts["weights"].get("width")) / float(parts["kv cache"].get("width"))
    assert ratio == pytest.approx(card.weights / card.kv_cache, rel=1e-3)
    # stacked: each part starts where the one before ends, the first at the bars' left edge (x = 150)
    xs = [(float(r.get("x")), float(r.get("width"))) for r in parts.values()]
    assert xs[0][0] == 150 and all(abs(a + w - b) < 0.02 for (a, w), (b, _) in pairwise(xs))
    assert [r.get("fill") for r in parts.values()] == list(PART_COLOURS)  # the vega chart's colours


def test_the_usable_tick_the_memory_and_the_labels_are_in_gib():
    best = llama70b_on_an_h100_node().options[0]
    rows, root = _parsed(best)
    card = best.evaluation.cards[0]
    per_px = gib_per_px(rows)
    tick = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "usable")
    assert float(tick.get("x")) + 1.5 == pytest.approx(150 + card.usable / GiB / per_px, abs=0.01)
    grey = next(r for r in root.iter(f"{SVG}rect") if r.get("fill") == FREE_COLOUR and r.get("height") == "22")
    assert float(grey.get("width")) == pytest.approx(card.capacity / GiB / per_px, abs=0.006)
    texts = _texts(root)
    assert f"usable {card.usable / GiB:,.1f}" in texts and f"{card.weights / GiB:,.1f}" in texts
    assert "GiB (1024³ bytes)" in texts and [t for t in texts if t.isdigit()] == ["0", "20", "40", "60", "80"]
    assert {"weights", "kv cache", "activations", "overhead", "free", "usable"} <= set(texts)  # the legend


def test_the_chart_says_what_it_shows_in_words_and_escapes_its_title():
    best = llama70b_on_an_h100_node().options[0]
    card = best.evaluation.cards[0]
    rows, root = _parsed(best, title="<b>70B</b> & co")
    assert root.get("role") == "img" and root.get("aria-labelledby") == "explorer-cards-title explorer-cards-desc"
    assert root.find(f"{SVG}title").text == "<b>70B</b> & co"  # escaped in the markup, read back as text
    desc = root.find(f"{SVG}desc").text
    assert desc.startswith(f"{rows[0]['role']}: weights {card.weights / GiB:,.1f}, kv cache {card.kv_cache / GiB:,.1f}")
    assert f"of {card.usable / GiB:,.1f} GiB usable and {card.capacity / GiB:,.1f} GiB on the card." in desc


def test_a_host_run_draws_the_host_row_on_its_own_scale():
    cpu = next(o for o in llama70b_on_an_h100_node().options if o.layout.cpu)
    rows, root = _parsed(cpu)
    host = cpu.evaluation.host
    assert [t for t in _texts(root) if t == "host"] == ["host"]
    # the host's usable RAM sets the axis: a 1, 2 or 5 × 10^n step, the end a whole number of steps past it
    ticks = [float(t.replace(",", "")) for t in _texts(root) if t.replace(",", "").isdigit()]
    step = ticks[1] - ticks[0]
    assert step in (100, 200, 500) and ticks[-1] >= max(host.capacity, host.usable) / GiB > ticks[-1] - step
    weights = next(r for r in root.iter(f"{SVG}rect") if r.get("data-part") == "weights")
    assert float(weights.get("width")) == pytest.approx(host.weights / GiB / gib_per_px(rows), abs=0.006)


def test_a_long_title_wraps_after_its_separators_and_pushes_the_bars_down():
    # The app's title for the 70B at 64 users: 110 characters, more than an 88-character line at 13 px bold
    title = (
        "vLLM · 8 × h100-80g (tp8) · nvidia/Llama-3.1-70B-Instruct-FP8 (fp8 block 128×128) · fp8 KV cache · × 1 replica"
    )
    assert title_lines(title) == [
        "vLLM · 8 × h100-80g (tp8) · nvidia/Llama-3.1-70B-Instruct-FP8 (fp8 block 128×128) ·",
        "fp8 KV cache · × 1 replica",
    ]
    assert title_lines("short · title") == ["short · title"]
    assert title_lines("x" * 100) == ["x" * 100]  # one part longer than a line stays whole
    best = llama70b_on_an_h100_node().options[0]
    _, one_line = _parsed(best, title="t")
    _, two_lines = _parsed(best, title=" · ".join(["a" * 60, "b" * 60]))
    texts = [t for t in two_lines.iter(f"{SVG}text") if t.get("font-weight") == "bold"]
    assert [t.text for t in texts] == ["a" * 60 + " ·", "b" * 60]
    # every bar 17 px lower (one more title line), and the chart 17 px taller
    heights = [float(r.get("viewBox").split()[3]) for r in (one_line, two_lines)]
    assert heights[1] - heights[0] == 17


def test_a_long_card_role_widens_its_column_and_stays_inside_the_chart():
    """DeepSeek-V3 on two H100 nodes at 64k × 32 (vLLM tp2 pp8 ep2, as the app's first row): each role reads
    "stage 1 of 8 (layers 0–6), 2 cards (×2)"; anchored at the old 150 px column it ran ~110 px past the
    chart's left edge and the page showed "of 8 (layers 0–6)…"."""
    shape = load_snapshot().shape("deepseek-ai/DeepSeek-V3")
    result = plan(shape, parse_cluster("2x8xh100-80g@ib0"), PlanRequest(context_tokens=65536, concurrency=32))
    rows, root = _parsed(result.options[0])
    roles = {r["role"] for r in rows}
    longest = max(roles, key=len)
    assert longest.startswith("stage ") and len(longest) > 30
    left = label_width(rows)
    # 6.2 px a character at 11 px, 14 px of margin: the longest label ends 8 px left of the bars and starts
    # at or right of x = 0
    assert left == pytest.approx(len(longest) * 6.2 + 14) and left - 8 - len(longest) * 6.2 >= 0
    labels = [t for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert {t.text for t in labels} == roles and {float(t.get("x")) for t in labels} == {round(left - 8, 2)}
    # the bars start at the column's edge, on the narrower scale
    first = next(r for r in root.iter(f"{SVG}rect") if r.get("class") == "part")
    assert float(first.get("x")) == pytest.approx(left, abs=0.01)
    assert gib_per_px(rows) == pytest.approx(_axis_end(root) / (640 - left - 78), rel=1e-6)


def _axis_end(root) -> float:
    return max(float(t.text.replace(",", "")) for t in root.iter(f"{SVG}text") if t.text.replace(",", "").isdigit())


def test_a_role_longer_than_the_widest_column_is_cut_and_its_bars_keep_it_whole():
    rows = [
        {"role": "stage 12 of 96 (layers 110–119) on host-with-a-long-name, 4 cards (×4)", "order": 0,
         "part": "weights", "part_order": 0, "gib": 40.0, "capacity_gib": 79.6, "usable_gib": 71.3},
    ]  # fmt: skip
    root = ET.fromstring(card_memory_svg(rows, title="t"))
    assert label_width(rows) == 300
    (label,) = [t for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    # (300 − 14) / 6.2 = 46 characters of room: 45 and the ellipsis
    assert label.text.endswith("…") and len(label.text) == 46 and rows[0]["role"].startswith(label.text[:-1])
    assert any(rows[0]["role"] in (t.text or "") for t in root.iter(f"{SVG}title"))
