"""The README's first ``explorer plan`` sample as the app's state, so the README's picture shows what it shows.

The browser test (tests/notebooks/test_browser.py) opens the app at :func:`readme_query` for the 1,440 px
picture and records the first row it shows in docs/screenshots.json; tests/notebooks/test_notebooks.py holds
that record to what the planner ranks first now, so a picture cannot go stale unnoticed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from explorer.ui.app_state import AppDefaults, app_defaults, to_query

ROOT = Path(__file__).resolve().parents[2]
#: the record of what each README picture shows (written with EXPLORER_SCREENSHOT=1)
SHOTS = ROOT / "docs" / "screenshots.json"


def readme_sample() -> list[str]:
    """The arguments of the README's first ``$ explorer plan MODEL ...`` sample (after ``plan``)."""
    line = re.search(r"^\$ explorer plan (.+)$", (ROOT / "README.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert line is not None, "README.md shows an `$ explorer plan` sample"
    return shlex.split(line[1])


def readme_state() -> AppDefaults:
    """The app's state for the README's sample: its model, cluster and context (what the app takes of it)."""
    args = readme_sample()
    pairs = {args[i].lstrip("-"): args[i + 1] for i in range(1, len(args) - 1) if args[i] in ("--cluster", "--context")}
    return app_defaults({"model": args[0], **pairs})


def readme_query() -> str:
    """The URL query (``?model=...``) that opens the app at :func:`readme_state`."""
    from urllib.parse import urlencode

    return "?" + urlencode(to_query(readme_state()))
