"""Turn what a user typed (a path, a .gguf file, a Hub id) into a model to plan.

``MODEL`` may be:

- a path to a ``config.json`` or to a folder holding one;
- a path to a ``.gguf`` file (the first part of a split set stands for all);
- a Hub id: ``org/name``, ``org/name@revision`` or ``org/name:FILE.gguf``
  (the file may sit in a folder of the repo: ``org/name:sub/x-Q4_K_M.gguf``).

Text longer than :data:`MAX_MODEL_CHARS`, or a path the system cannot even
look up (a name too long), is a typed error, never an ``OSError``.

This module only classifies the text (it looks at the disk to see whether a
path exists): :mod:`explorer.sources.resolve` reads what it names. It is the
bottom of the resolver: it imports nothing else of :mod:`explorer.sources`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from explorer.errors import ConfigError

SpecKind = Literal["config", "gguf", "hub"]

_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[\w./-]+?))?(?::(?P<file>[^:]+\.gguf))?$")
#: characters no Hub id (nor its ``:FILE.gguf`` part) holds, refused so that an id shown in HTML or markdown
#: can never open a tag, an attribute or a code span (issue 25: a crafted ``?model=`` link drew a form)
FORBIDDEN_ID_CHARS = "<>\"'`"
#: the longest MODEL argument read (a path may be 4,096 bytes; a Hub id is far shorter)
MAX_MODEL_CHARS = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A parsed MODEL argument.

    Attributes:
        kind: ``config`` (a local config.json or folder), ``gguf`` (a local file) or ``hub``.
        text: what the user typed.
        path: the local path, for ``config`` and ``gguf``.
        repo: the Hub repository, for ``hub``.
        revision: a branch, tag or commit, for ``hub`` (None: the default branch).
        filename: a GGUF file inside the repository, for ``hub``.
    """

    kind: SpecKind
    text: str
    path: Path | None = None
    repo: str | None = None
    revision: str | None = None
    filename: str | None = None


def parse_model_spec(text: str, *, local_paths: bool = True, local_root: str | Path | None = None) -> ModelSpec:
    """Classify a MODEL argument; an existing path wins over a Hub id of the same spelling.

    ``local_paths=False`` (the published app, for a visitor): the disk is never looked at, and text that
    names a path is a ConfigError; with ``local_root`` too, a path inside that one folder (the operator's,
    symbolic links followed) is still read, and any other is refused the same way.
    """
    text = text.strip()
    if not text:
        raise ConfigError("no model given", hint="pass a config.json path, a .gguf file or a Hub id like org/name")
    if len(text) > MAX_MODEL_CHARS:
        raise ConfigError(
            f"the model argument is {len(text):,} characters long; at most {MAX_MODEL_CHARS:,} are read",
            hint="pass a path to config.json / a model folder / a .gguf file, or org/name[@revision][:FILE.gguf]",
        )
    if not local_paths:
        _refuse_markup(text)
        return _visitor_spec(text, local_root)
    path = Path(text).expanduser()
    if _exists(path):
        kind: SpecKind = "gguf" if path.suffix.lower() == ".gguf" else "config"
        return ModelSpec(kind=kind, text=text, path=path)
    _refuse_markup(text)
    m = _HUB_ID.match(text)
    if m and m["file"] and not text.startswith((".", "/", "~")):  # org/name:sub/file.gguf is a Hub id, not a path
        return _hub_spec(text, m)
    looks_like_path = text.startswith((".", "/", "~")) or (
        text.lower().endswith((".json", ".gguf")) and text.count("/") != 1
    )
    if looks_like_path:
        raise ConfigError(f"{text} does not exist", hint="check the path")
    if m:
        return _hub_spec(text, m)
    raise ConfigError(
        f"{text[:200]} is neither an existing file nor a Hub id",
        hint="pass a path to config.json / a model folder / a .gguf file, or org/name[@revision][:FILE.gguf]",
    )


def _refuse_markup(text: str) -> None:
    """ConfigError when ``text`` holds a character no id takes (:data:`FORBIDDEN_ID_CHARS`)."""
    if bad := sorted({c for c in text if c in FORBIDDEN_ID_CHARS}):
        raise ConfigError(
            f"the model id holds {' '.join(bad)}, which no Hub id or file name does",
            hint="write org/name, org/name@revision or org/name:FILE.gguf",
        )


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~", "\\")) or (
        text.lower().endswith((".json", ".gguf")) and text.count("/") != 1 and ":" not in text
    )


def _visitor_spec(text: str, local_root: str | Path | None) -> ModelSpec:
    """A published app's visitor's MODEL: a Hub id, or a path inside the operator's ``local_root``; the
    server's disk is looked at only there (issue 25: ``?model=/dev/zero`` read the server's files)."""
    if local_root is not None and _looks_like_path(text):
        root = Path(local_root).resolve()
        try:
            path = (root / text.lstrip("/\\")).resolve()
        except (OSError, ValueError, RuntimeError):
            path = None
        if path is not None and path.is_relative_to(root) and _exists(path):
            return ModelSpec(kind="gguf" if path.suffix.lower() == ".gguf" else "config", text=text, path=path)
    m = _HUB_ID.match(text)
    if m and not _looks_like_path(text):
        return _hub_spec(text, m)
    raise ConfigError(
        "this page reads models from the Hugging Face Hub"
        + (" and its own models folder" if local_root is not None else "")
        + ", not from files of the server",
        hint="write a Hub id such as org/name or org/name:FILE.gguf, or paste the model's config.json",
    )


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; a path the system cannot look up (too long, a NUL byte) does not."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _hub_spec(text: str, m: re.Match[str]) -> ModelSpec:
    """The Hub spec of a match; a file path that climbs out of the repo (``..``, a leading ``/``) is refused."""
    filename = m["file"]
    if filename and (filename.startswith("/") or ".." in filename.split("/") or "\\" in filename):
        raise ConfigError(
            f"{text}: the file {filename!r} is not a path inside the repo", hint="write org/name:FOLDER/FILE.gguf"
        )
    return ModelSpec(kind="hub", text=text, repo=m["repo"], revision=m["rev"], filename=filename)
