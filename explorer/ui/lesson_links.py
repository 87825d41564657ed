"""The app's links to the lessons, written for where the app runs, so that no link answers 404.

- ``marimo run notebooks/`` (folder mode: the app's URL holds ``?file=app.py``): each lesson is
  ``?file=LESSON.py`` on the same server;
- the published WASM site: the lessons exported beside the app (``LESSON.py/``), all five (their
  charts are plain vega-lite dicts, so they need nothing Pyodide lacks);
- ``marimo run notebooks/app.py`` (one file): the server serves no other notebook, so each lesson is
  named with the command that opens it.
"""

from __future__ import annotations

from collections.abc import Iterable

#: (file in notebooks/, title) of each lesson, in teaching order
LESSONS: tuple[tuple[str, str], ...] = (
    ("kv_cache.py", "Why long context eats memory"),
    ("parallelism.py", "Splitting a model across cards"),
    ("quantisation.py", "What a precision costs and saves"),
    ("speed.py", "Why decode is memory-bound"),
    ("serving.py", "Serving many users from one card"),
)
#: the lessons the WASM export carries (.ci/wasm/export.sh): every one
EXPORTED: frozenset[str] = frozenset(name for name, _title in LESSONS)


def lesson_links(*, in_browser: bool, query_file: str | None, exported: Iterable[str] = EXPORTED) -> str:
    """Markdown: ``**Lessons:**`` and each lesson as a link that resolves where the app runs, else its
    title with ``marimo run notebooks/FILE``. ``query_file`` is the ``file`` query parameter (folder mode)."""
    shipped = frozenset(exported)
    parts = []
    for name, title in LESSONS:
        if query_file:
            parts.append(f"[{title}](?file={name})")
        elif in_browser and name in shipped:
            parts.append(f"[{title}]({name})")
        else:
            parts.append(f"{title} (`marimo run notebooks/{name}`)")
    return "**Lessons:** " + " · ".join(parts)
