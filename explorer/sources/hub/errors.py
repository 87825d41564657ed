"""Turning huggingface_hub and httpx2 failures into explorer's typed errors.

huggingface_hub 2.x raises, and this maps:

- ``GatedRepoError`` (HTTP 401/403 with ``X-Error-Code: GatedRepo``) -> GatedRepoError
  (its hint says: pass ``--token`` or set ``HF_TOKEN``);
- ``RepositoryNotFoundError`` (``RepoNotFound``, or a bare 401 on a repo URL) -> RepoNotFoundError,
  with the token hint when no token was sent (a private repo looks missing);
- ``RevisionNotFoundError`` -> RevisionNotFoundError;
- ``RemoteEntryNotFoundError`` -> HubError (callers turn it into "absent" where that is normal);
- any other ``HfHubHTTPError``: 401/403 -> GatedRepoError, else HubError with the status;
- ``httpx2.TimeoutException`` -> HubTimeoutError; other ``httpx2.TransportError``
  (connection refused, DNS, reset) -> HubConnectionError;
- ``OfflineModeIsEnabled`` -> OfflineMissError; ``HFValidationError`` (a malformed repo id)
  -> RepoNotFoundError; ``SafetensorsParsingError`` -> HubError.

Messages name the repo, the file and the endpoint, never the token.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from explorer.errors import (
    ExplorerError,
    FetchCancelled,
    GatedRepoError,
    HubConnectionError,
    HubError,
    HubTimeoutError,
    OfflineMissError,
    RepoNotFoundError,
    RevisionNotFoundError,
)

if TYPE_CHECKING:
    from explorer.sources.hub.client import HubSettings

_TOKEN_HINT = "pass a token with --token or set HF_TOKEN"


def check_cancel(cancel: threading.Event | None, what: str) -> None:
    """Raise FetchCancelled when ``cancel`` is set; called between steps."""
    if cancel is not None and cancel.is_set():
        raise FetchCancelled(f"cancelled while fetching {what}")


@contextmanager
def hub_errors(s: HubSettings, repo_id: str, what: str, revision: str | None = None) -> Iterator[None]:
    """Turn huggingface_hub and httpx2 failures inside the block into explorer's typed errors."""
    if s.offline:
        raise OfflineMissError(f"offline mode (HF_HUB_OFFLINE): not asking the Hub for {what} of {repo_id}")
    import httpx2
    from huggingface_hub import errors as hfe

    try:
        yield
    except ExplorerError:
        raise
    except hfe.GatedRepoError as e:  # before RepositoryNotFoundError: it is a subclass
        raise _gated(e.response.status_code, repo_id, what, s) from e
    except hfe.RevisionNotFoundError as e:
        raise RevisionNotFoundError(
            f"revision {revision!r} does not exist in {repo_id}",
            hint="give a branch, tag or full commit sha from the model's Hub page, or omit it for main",
        ) from e
    except hfe.RepositoryNotFoundError as e:
        status = e.response.status_code
        hint = "check the repo id; if it is private or gated, " + _TOKEN_HINT
        if s.token:
            hint = "check the repo id, and that the token given can see it"
        raise RepoNotFoundError(f"{repo_id} was not found on {s.endpoint} (HTTP {status})", hint=hint) from e
    except hfe.RemoteEntryNotFoundError as e:
        raise HubError(f"{repo_id} has no {what} at revision {revision or 'main'} (HTTP 404)") from e
    except hfe.HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else 0
        if status in (401, 403):
            raise _gated(status, repo_id, what, s) from e
        raise HubError(
            f"the Hub at {s.endpoint} answered HTTP {status} for {what} of {repo_id}",
            hint="try again later, or use --offline to plan from the cache and the snapshot",
        ) from e
    except hfe.OfflineModeIsEnabled as e:
        raise OfflineMissError(f"offline mode (HF_HUB_OFFLINE): not asking the Hub for {what} of {repo_id}") from e
    except httpx2.TimeoutException as e:
        raise HubTimeoutError(
            f"the Hub at {s.endpoint} did not answer within {s.timeout_s:g} s ({what} of {repo_id})"
        ) from e
    except httpx2.TransportError as e:
        raise HubConnectionError(f"could not reach the Hub at {s.endpoint} ({type(e).__name__}: {e})") from e
    except hfe.HFValidationError as e:
        raise RepoNotFoundError(f"{repo_id!r} is not a valid repo id", hint="write it as org/name") from e
    except (hfe.SafetensorsParsingError, hfe.NotASafetensorsRepoError) as e:
        raise HubError(f"the safetensors headers of {repo_id} could not be read: {e}") from e


def _gated(status: int, repo_id: str, what: str, s: HubSettings) -> GatedRepoError:
    if s.token:
        return GatedRepoError(f"{repo_id} is gated and the token given has no access to it (HTTP {status} for {what})")
    return GatedRepoError(f"{repo_id} is gated or private and no token was sent (HTTP {status} for {what})")
