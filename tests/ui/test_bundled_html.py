"""explorer.ui.bundled_html: marimo formats it as a one-entry mime bundle carrying the HTML unchanged."""

from __future__ import annotations

import marimo as mo
from marimo._output.formatting import try_format

from explorer.ui.bundled_html import MIMEBUNDLE, BundledHtml, prose


def test_marimo_sends_the_html_as_a_bundle_of_one_entry():
    html = mo.vstack([mo.md("**8 ways fit**"), mo.Html("<table id='explorer-options'></table>")]).text
    shown = try_format(BundledHtml(html))
    # not text/html: marimo's page builds a cell's outline only from text/html and text/markdown outputs
    assert shown.mimetype == MIMEBUNDLE == "application/vnd.marimo+mimebundle"
    # a dict, not a JSON string: the HTML is escaped once, in the message, as a text/html output's is
    assert shown.data == {"text/html": html}
    assert BundledHtml(html).text == html  # what the notebook tests read


def test_prose_is_the_html_mo_md_draws_for_a_line():
    # mo.md("**8 ways fit** on 8 GPUs") renders <strong> in its markdown wrapper; prose writes the same element
    # tree (attributes quoted with ' rather than ")
    drawn = mo.md("**8 ways fit** on 8 GPUs").text
    assert prose("<strong>8 ways fit</strong> on 8 GPUs").replace("'", '"') == drawn
