"""An HTML output that marimo's page draws as it draws any HTML, without parsing it again on every message.

marimo's frontend builds a cell's outline (its headings, for the table of contents) from the cell's output
on *every* message about that cell when the output is ``text/html`` or ``text/markdown``: a ``DOMParser``
parse of the whole HTML, its ``<style>`` and SVG included, four times a run (queued, running, the output,
idle). The app's answer is one cell whose output is its table, per-card SVG and launch lines, re-run on every
slider move, and it has no heading. Sent as a mime bundle of one entry, ``text/html``, the page renders it
with the same HTML renderer (a bundle of one is drawn as that entry, with no chooser) and builds no outline
from it (marimo 0.25's ``MimeBundleOutputRenderer`` and ``cellReducer``; issue 27 §1, docs/notes/app_speed.md).
"""

from __future__ import annotations

__all__ = ["BundledHtml"]

#: the mime type of a bundle, as marimo names it
MIMEBUNDLE = "application/vnd.marimo+mimebundle"


class BundledHtml:
    """HTML shown as a one-entry mime bundle (``text/html``); ``text`` is the HTML, as ``mo.Html``'s is.

    Attributes:
        text: the HTML.
    """

    __slots__ = ("text",)

    def __init__(self, html: str) -> None:
        self.text = html

    def _mime_(self) -> tuple[str, dict[str, str]]:
        """marimo's display protocol: the bundle's mime type and the bundle, a dict (marimo sends it as JSON
        in the cell's message: the HTML is escaped once, as a ``text/html`` output's is)."""
        return MIMEBUNDLE, {"text/html": self.text}
