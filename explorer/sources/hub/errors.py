"""Turning huggingface_hub and httpx2 failures into explorer's typed errors.

An answer of HTTP 400 or more is classified by huggingface_hub 2.x
(:func:`explorer.sources.hub.http.raise_for_status`), which raises, and this maps:

- ``GatedRepoError`` (HTTP 401/403 with ``X-Error-Code: GatedRepo``) -> GatedRepoError
  (its hint says: pass ``--token`` or set ``HF_TOKEN``);
- ``RepositoryNotFoundError`` (``RepoNotFound``, or a bare 401 on a repo URL) -> RepoNotFoundError,
  with the token hint when no token was sent (a private repo looks missing);
- ``RevisionNotFoundError`` -> RevisionNotFoundError;
- ``RemoteEntryNotFoundError`` -> HubFileNotFoundError (callers turn it into "absent" where that is normal);
- any other ``HfHubHTTPError``: 401/403 -> GatedRepoError, else HubError with the status;
- ``httpx2.TimeoutException`` -> HubTimeoutError; other ``httpx2.TransportError``
  (connection refused, DNS, reset) -> HubConnectionError; (a redirect loop is HubResponseError from :mod:`http`),
  a body that cannot be decoded, any other ``httpx2`` failure -> HubResponseError;
- ``OfflineModeIsEnabled`` -> OfflineMissError; ``HFValidationError`` (a malformed repo id)
  -> RepoNotFoundError; ``SafetensorsParsingError`` -> HubError.

Offline settings, or ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` in the
environment (huggingface_hub's own switches), stop a request before it is made.

Messages name the repo, the file and the endpoint, never the token.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from explorer.errors import (
    ExplorerError,
    FetchCancelled,
    GatedRepoError,
    HubConnectionError,
    HubError,
    HubFileNotFoundError,
    HubResponseError,
    HubTimeoutError,
    OfflineMissError,
    RepoNotFoundError,
    RevisionNotFoundError,
)
from explorer.sources.hub.settings import REQUEST_TIMEOUT_S, HubSettings, env_true

_TOKEN_HINT = "pass a token with --token or set HF_TOKEN"


def check_cancel(cancel: threading.Event | None, what: str) -> None:
    """Raise FetchCancelled when ``cancel`` is set; called between steps."""
    if cancel is not None and cancel.is_set():
        raise FetchCancelled(f"cancelled while fetching {what}")


@contextmanager
def hub_errors(s: HubSettings, repo_id: str, what: str, revision: str | None = None) -> Iterator[None]:
    """Turn huggingface_hub and httpx2 failures inside the block into explorer's typed errors."""
    if s.offline or env_true("HF_HUB_OFFLINE") or env_true("TRANSFORMERS_OFFLINE"):
        raise OfflineMissError(f"offline mode (HF_HUB_OFFLINE): not asking the Hub for {what} of {repo_id}")
    try:
        yield
    except ExplorerError:
        raise
    except Exception as e:
        typed = _typed(e, s, repo_id, what, revision)
        if typed is None:
            raise
        raise typed from e


def _typed(e: Exception, s: HubSettings, repo_id: str, what: str, revision: str | None) -> ExplorerError | None:
    """The explorer error for a huggingface_hub or httpx2 failure; None for any other exception."""
    import httpx2  # loaded already: the failure came from a request
    from huggingface_hub import errors as hfe  # the error classes only, not the client

    if isinstance(e, hfe.GatedRepoError):  # before RepositoryNotFoundError: it is a subclass
        return _gated(e.response.status_code, repo_id, what, s)
    if isinstance(e, hfe.RevisionNotFoundError):
        return RevisionNotFoundError(
            f"revision {revision!r} does not exist in {repo_id}",
            hint="give a branch, tag or full commit sha from the model's Hub page, or omit it for main",
        )
    if isinstance(e, hfe.RepositoryNotFoundError):
        status = e.response.status_code
        hint = "check the repo id; if it is private or gated, " + _TOKEN_HINT
        if s.token:
            hint = "check the repo id, and that the token given can see it"
        return RepoNotFoundError(f"{repo_id} was not found on {s.endpoint} (HTTP {status})", hint=hint)
    if isinstance(e, hfe.RemoteEntryNotFoundError):
        return HubFileNotFoundError(f"{repo_id} has no {what} at revision {revision or 'main'} (HTTP 404)")
    if isinstance(e, hfe.HfHubHTTPError):
        status = e.response.status_code if e.response is not None else 0
        if status in (401, 403):
            return _gated(status, repo_id, what, s)
        return HubError(
            f"the Hub at {s.endpoint} answered HTTP {status} for {what} of {repo_id}",
            hint="try again later, or use --offline to plan from the cache and the snapshot",
        )
    if isinstance(e, hfe.OfflineModeIsEnabled):
        return OfflineMissError(f"offline mode (HF_HUB_OFFLINE): not asking the Hub for {what} of {repo_id}")
    if isinstance(e, httpx2.TimeoutException):
        waited = min(REQUEST_TIMEOUT_S, s.timeout_s)
        return HubTimeoutError(f"the Hub at {s.endpoint} did not answer within {waited:g} s ({what} of {repo_id})")
    if isinstance(e, httpx2.TransportError):
        return HubConnectionError(f"could not reach the Hub at {s.endpoint} ({type(e).__name__}: {e})")
    if isinstance(e, (httpx2.HTTPError, httpx2.InvalidURL, httpx2.StreamError)):
        return HubResponseError(
            f"the Hub at {s.endpoint} gave an unusable answer for {what} of {repo_id} ({type(e).__name__}: {e})"
        )
    if isinstance(e, hfe.HFValidationError):
        return RepoNotFoundError(f"{repo_id!r} is not a valid repo id", hint="write it as org/name")
    if isinstance(e, (hfe.SafetensorsParsingError, hfe.NotASafetensorsRepoError)):
        return HubError(f"the safetensors headers of {repo_id} could not be read: {e}")
    return None


def _gated(status: int, repo_id: str, what: str, s: HubSettings) -> GatedRepoError:
    if s.token:
        return GatedRepoError(f"{repo_id} is gated and the token given has no access to it (HTTP {status} for {what})")
    return GatedRepoError(f"{repo_id} is gated or private and no token was sent (HTTP {status} for {what})")
