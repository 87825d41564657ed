"""A cold Hub read started early: the Hub answers while the command loads the rest of explorer.

A cold ``explorer shape ORG/NAME`` used to spend about two thirds of its wall time before its first
request: the interpreter, explorer's model code (the shape is built with it), then httpx2 and its TLS
context. The Hub's answers depend on none of the model code. So the command calls :func:`start_cold_read`
first. When the argument is a Hub id, the Hub may be asked, and the cache cannot answer (there is no cache
file nor journal, or the cache's revision index maps no such branch), a thread runs
:func:`explorer.sources.hub.many.fetch_repo_basics` (the listing, then config.json and the safetensors
headers at once) while the main thread imports. The resolver then calls :func:`take_basics` for the same
repo, revision and settings: it waits for the thread and returns its answer, or raises its error again,
so the read goes on (GGUF headers, the checks, the cache's journal) exactly as a read made in place.

Nothing else changes: the requests are the same ones with the same guards (deadline, size caps, JSON
depth), an early read nobody takes is dropped with the process, and a read whose key differs (another
revision, token or endpoint) is made in place. Only the command line starts one; a library caller (the
app, ``fetch_many``) reads in place as before.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from explorer.errors import ExplorerError
from explorer.sources.cache.location import absent_cache_path, indexed_miss
from explorer.sources.hub.settings import HubSettings
from explorer.sources.spec import parse_model_spec

__all__ = ["start_cold_read", "take_basics"]

_Key = tuple[str, str | None, HubSettings]

#: the reads started, by (repo, revision, settings without a deadline); each is taken at most once
_started: dict[_Key, _EarlyRead] = {}
_lock = threading.Lock()


class _EarlyRead:
    """A thread reading one repo's basics; :meth:`result` waits for it and returns or raises what it got."""

    def __init__(self, repo: str, revision: str | None, settings: HubSettings) -> None:
        self._answer: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(repo, revision, settings), name="early-hub-read", daemon=True
        )
        self._thread.start()

    def _run(self, repo: str, revision: str | None, settings: HubSettings) -> None:
        # imported on the thread: httpx2 and the Hub's readers load while the main thread imports the model code
        from explorer.sources.hub.many import default_progress, fetch_repo_basics, has_gguf_model

        try:
            self._answer = fetch_repo_basics(
                repo, revision, settings=settings.started(), has_gguf=has_gguf_model, progress=default_progress(None)
            )
        except BaseException as e:  # handed to the reader, which raises it as its own
            self._error = e

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._answer


def _key(repo: str, revision: str | None, settings: HubSettings) -> _Key:
    return repo, revision, dataclasses.replace(settings, deadline=None)


def start_cold_read(text: str, *, settings: HubSettings, revision: str | None = None) -> bool:
    """Start reading ``text``'s repo from the Hub on a thread when a resolution of it is sure to ask the Hub.

    That is: ``text`` is a Hub id (not a path), ``settings`` are not offline, the revision is given at most
    once, and the default cache cannot answer (no file nor journal, or its index maps no such branch). Returns
    whether a read started. Never raises: whatever is wrong with ``text`` is the resolver's to say.
    """
    if settings.offline:
        return False
    try:
        spec = parse_model_spec(text)
    except ExplorerError:  # the resolver parses it again and reports the error
        return False
    if spec.kind != "hub" or spec.repo is None or (revision and spec.revision and revision != spec.revision):
        return False
    revision = revision or spec.revision
    if absent_cache_path() is None and indexed_miss(settings.endpoint, spec.repo, revision) is None:
        return False  # the cache may answer: a read now could be a wasted one
    # the HTTP client first, here: its import and TLS context are CPU work, which a thread would share with
    # the main thread's imports; made before the thread starts, the requests go out while the model code loads
    from explorer.sources.hub.http import client

    client()
    key = _key(spec.repo, revision, settings)
    with _lock:
        if key not in _started:
            _started[key] = _EarlyRead(spec.repo, revision, settings)
    return True


def take_basics(repo: str, revision: str | None, settings: HubSettings) -> Any:
    """The basics (listing, configs, safetensors counts) of an early read of this repo, revision and settings,
    waited for; its error raised again; None when no such read was started (or it was taken already)."""
    with _lock:
        early = _started.pop(_key(repo, revision, settings), None)
    return None if early is None else early.result()
