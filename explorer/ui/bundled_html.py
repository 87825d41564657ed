"""The app's answer as marimo's page draws it: HTML it does not parse again on every message, and text written
as HTML rather than markdown.

marimo's frontend builds a cell's outline (its headings, for the table of contents) from the cell's output
on *every* message about that cell when the output is ``text/html`` or ``text/markdown``: a ``DOMParser``
parse of the whole HTML, its ``<style>`` and SVG included, four times a run (queued, running, the output,
idle). The app's answer is one cell whose output is its table, per-card SVG and launch lines, re-run on every
slider move, and it has no heading. Sent as a mime bundle of one entry, ``text/html``, the page renders it
with the same HTML renderer (a bundle of one is drawn as that entry, with no chooser) and builds no outline
from it (marimo 0.25's ``MimeBundleOutputRenderer`` and ``cellReducer``; issue 27 §1, docs/notes/app_speed.md).

:func:`prose` wraps HTML as ``mo.md`` wraps the HTML it renders, so a line written with ``<strong>`` looks as its
markdown did, without the markdown render on the server (about 1 ms a ``mo.md`` call, four a context move).
"""

from __future__ import annotations

__all__ = ["BundledHtml", "prose"]

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


def prose(html: str) -> str:
    """``html`` (already safe: text from outside through :func:`explorer.safe_text.safe_html`) in the wrapper
    ``mo.md`` puts around a paragraph, so marimo's styles (font, bold, ``<pre>``) apply as they did to it."""
    return f"<span class='markdown prose dark:prose-invert contents'><span class='paragraph'>{html}</span></span>"
