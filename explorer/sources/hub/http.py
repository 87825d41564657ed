"""The Hub's HTTP: one shared httpx2 client, request headers, URLs, status checks.

Every request goes through :func:`client`, one ``httpx2.Client`` (the HTTP
library of huggingface_hub 2.x) made on first use, following redirects (the
Hub sends weight files to its CDN), with an explicit timeout on each request
and no retries, so a dead or slow Hub fails within ``timeout_s``.

huggingface_hub itself takes about 0.3 s to import, longer than a whole cold
read of a repo, so it is imported only where it decides something:

- an answer of HTTP 400 or more goes to its ``hf_raise_for_status``, which
  names the failure (gated, repo or revision or file not found...) as the Hub
  client always has; :func:`explorer.sources.hub.errors.hub_errors` turns that
  into explorer's typed errors;
- with no token given (``--token``, ``HF_TOKEN``) but a saved login
  (huggingface_hub's token file, ``HF_OIDC_RESOURCE``), its
  ``build_hf_headers`` finds the token and sends it.

A read of a public repo with no saved login imports neither. The URLs and
the repo-id check are huggingface_hub's (``hf_hub_url``, ``validate_repo_id``),
written out here.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from explorer import __version__
from explorer.errors import RepoNotFoundError
from explorer.sources.hub.settings import HubSettings, env_true

if TYPE_CHECKING:
    import httpx2

__all__ = ["client", "file_url", "headers", "model_info_url", "raise_for_status", "validate_repo_id"]

_client: httpx2.Client | None = None
_client_lock = threading.Lock()

#: huggingface_hub's REPO_ID_REGEX (utils/_validators.py): ASCII word characters, '-' and '.', at most 96
_REPO_ID = re.compile(r"(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b", re.ASCII)


def client() -> httpx2.Client:
    """The process's one HTTP client (thread-safe; its connections are reused across requests)."""
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                import httpx2  # 0.1 s: only a process that asks the Hub pays for it

                _client = httpx2.Client(follow_redirects=True, timeout=None)
    return _client


def _token_file_exists() -> bool:
    """Whether huggingface_hub's saved login file exists (``HF_TOKEN_PATH``, else ``HF_HOME/token``,
    else ``$XDG_CACHE_HOME/huggingface/token``, ``~/.cache`` by default)."""
    cache = os.getenv("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
    home = os.path.expandvars(os.path.expanduser(os.getenv("HF_HOME", os.path.join(cache, "huggingface"))))
    return os.path.exists(
        os.path.expandvars(os.path.expanduser(os.getenv("HF_TOKEN_PATH", os.path.join(home, "token"))))
    )


def headers(s: HubSettings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The headers of a request: user agent, ``Authorization`` when there is a token, then ``extra``.

    With no token in ``s``, the token huggingface_hub would find on its own
    (unless ``HF_HUB_DISABLE_IMPLICIT_TOKEN``): ``HF_TOKEN`` or
    ``HUGGING_FACE_HUB_TOKEN``; a saved login or ``HF_OIDC_RESOURCE`` is left
    to huggingface_hub's ``build_hf_headers`` (it refreshes OAuth tokens).
    """
    token = s.token
    if token is None and not env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        if os.environ.get("HF_OIDC_RESOURCE") or _token_file_exists():
            from huggingface_hub.utils import build_hf_headers  # finds a saved login exactly as it always has

            return {
                **build_hf_headers(token=None, library_name="explorer", library_version=__version__),
                **(extra or {}),
            }
        token = (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or "").strip() or None
    base = {"user-agent": f"explorer/{__version__}"}
    if token:
        base["authorization"] = f"Bearer {token}"
    return {**base, **(extra or {})}


def file_url(s: HubSettings, repo_id: str, revision: str, filename: str) -> str:
    """The download URL of a file at a revision (huggingface_hub's ``hf_hub_url``)."""
    return f"{s.endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(filename)}"


def model_info_url(s: HubSettings, repo_id: str, revision: str | None) -> str:
    """The API URL of a model's info, at a revision when given (huggingface_hub's ``HfApi.model_info``)."""
    base = f"{s.endpoint}/api/models/{repo_id}"
    return base if revision is None else f"{base}/revision/{quote(revision, safe='')}"


def raise_for_status(response: httpx2.Response) -> None:
    """Raise huggingface_hub's error for an answer of HTTP 400 or more; return for anything else."""
    if response.status_code < 400:
        return
    response.read()  # a streamed answer: the error's message is in the body
    from huggingface_hub.utils import hf_raise_for_status  # names the failure from the Hub's X-Error-Code

    hf_raise_for_status(response)


def validate_repo_id(repo_id: Any) -> None:
    """Raise RepoNotFoundError for an id the Hub cannot hold (huggingface_hub's ``validate_repo_id`` rules)."""
    valid = (
        isinstance(repo_id, str)
        and repo_id.count("/") <= 1
        and _REPO_ID.fullmatch(repo_id) is not None
        and "--" not in repo_id
        and ".." not in repo_id
        and not repo_id.endswith(".git")
    )
    if not valid:
        raise RepoNotFoundError(f"{repo_id!r} is not a valid repo id", hint="write it as org/name")
