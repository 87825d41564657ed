"""Names the snapshot may know a model by: the Hub's renames, and the nearest ids to one it does not know.

The Hub renames repositories and redirects the old names. The snapshot keeps
the name its facts were read under, so ``meta-llama/Llama-3.1-8B`` (today's
name) must find ``meta-llama/Meta-Llama-3.1-8B`` (the name it had):
:data:`HUB_RENAMES` lists such pairs and :func:`snapshot_name` follows them
either way. :func:`nearest_ids` gives the snapshot ids closest to an unknown
one ("did you mean").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["HUB_RENAMES", "nearest_ids", "snapshot_name"]

# fmt: off
#: (name on the Hub today, former name), both redirecting to the same repository.
#: Meta dropped "Meta-" from the names of its Llama 3.1 repositories (December 2024).
HUB_RENAMES: tuple[tuple[str, str], ...] = (
    ("meta-llama/Llama-3.1-8B",             "meta-llama/Meta-Llama-3.1-8B"),
    ("meta-llama/Llama-3.1-8B-Instruct",    "meta-llama/Meta-Llama-3.1-8B-Instruct"),
    ("meta-llama/Llama-3.1-70B",            "meta-llama/Meta-Llama-3.1-70B"),
    ("meta-llama/Llama-3.1-70B-Instruct",   "meta-llama/Meta-Llama-3.1-70B-Instruct"),
    ("meta-llama/Llama-3.1-405B",           "meta-llama/Meta-Llama-3.1-405B"),
    ("meta-llama/Llama-3.1-405B-Instruct",  "meta-llama/Meta-Llama-3.1-405B-Instruct"),
)
# fmt: on


def snapshot_name(repo: str, known: Iterable[str]) -> str | None:
    """The name ``known`` (the snapshot's ids) has for ``repo`` under a Hub rename, either way; None if none.

    Hub ids are case-insensitive: ``META-LLAMA/llama-3.1-8b`` finds ``meta-llama/Meta-Llama-3.1-8B``.
    """
    lower = {k.lower(): k for k in known}
    want = repo.strip().lower()
    for new, old in HUB_RENAMES:
        for a, b in ((new, old), (old, new)):
            if a.lower() == want and b.lower() in lower:
                return lower[b.lower()]
    return None


def nearest_ids(text: str, known: Iterable[str], limit: int = 5) -> list[str]:
    """The ids of ``known`` closest to ``text``, best first (a rename first, then by similarity).

    Compares the whole id and the name after the organisation, case-insensitive;
    an id sharing less than half its letters with ``text`` is not offered.
    """
    known = list(known)
    want = text.strip().lower()
    if not want:
        return []
    name = want.rsplit("/", 1)[-1]
    scored = []
    for k in known:
        low = k.lower()
        score = max(
            difflib.SequenceMatcher(None, want, low).ratio(),
            difflib.SequenceMatcher(None, name, low.rsplit("/", 1)[-1]).ratio(),
        )
        if score >= 0.5:
            scored.append((-score, low, k))
    out = [k for _s, _l, k in sorted(scored)]
    renamed = snapshot_name(text, known)
    if renamed is not None:
        out = [renamed] + [k for k in out if k != renamed]
    return out[:limit]
