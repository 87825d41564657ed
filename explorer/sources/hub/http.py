"""The Hub's HTTP: one shared httpx2 client, request headers, URLs, and :func:`get`, the one request.

Every request goes through :func:`get`, on one ``httpx2.Client`` (the HTTP
library of huggingface_hub 2.x) made on first use, following at most
:data:`MAX_REDIRECTS` redirects (the Hub sends weight files to its CDN). It
bounds everything a faulty or hostile server could stretch:

- **time**: each wait for bytes is at most ``settings.REQUEST_TIMEOUT_S`` (10 s) and never
  past the resolution's deadline (:meth:`HubSettings.started`); the body is
  streamed and the deadline checked at every chunk, so a server that drips a
  byte every few seconds is cut off at the deadline;
- **size**: at most ``max_bytes`` of a body are read;
- **retries**: a 429 or 503 answer is retried up to :data:`MAX_RETRIES` times,
  after its ``Retry-After`` (seconds or an HTTP date) or a doubling backoff
  from :data:`BACKOFF_S`, while the deadline allows; then
  :class:`~explorer.errors.HubRateLimitError`, which the resolver answers from
  the cache or the snapshot.

huggingface_hub itself takes about 0.3 s to import, longer than a whole cold
read of a repo, so it is imported only where it decides something:

- an answer of HTTP 400 or more goes to its ``hf_raise_for_status``, which
  names the failure (gated, repo or revision or file not found...) as the Hub
  client always has; :func:`explorer.sources.hub.errors.hub_errors` turns that
  into explorer's typed errors;
- with no token given (``--token``, ``HF_TOKEN``) but a saved login
  (huggingface_hub's token file, ``HF_OIDC_RESOURCE``), its
  ``build_hf_headers`` finds the token and sends it (checked as any token is).

A read of a public repo with no saved login imports neither. The URLs and
the repo-id check are huggingface_hub's (``hf_hub_url``, ``validate_repo_id``),
written out here.
"""

from __future__ import annotations

import email.utils
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from explorer import __version__
from explorer.errors import HubRateLimitError, HubResponseError, RepoNotFoundError
from explorer.sources.hub.settings import REQUEST_TIMEOUT_S, HubSettings, clean_token, env_true

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "Answer",
    "client",
    "file_url",
    "get",
    "headers",
    "model_info_url",
    "raise_for_status",
    "retry_after_s",
    "validate_repo_id",
]

#: retries of an answer of 429 (too many requests) or 503 (unavailable)
MAX_RETRIES = 3
#: the wait before the first retry when the answer gives no Retry-After; doubled each time
BACKOFF_S = 0.5
#: the statuses retried
RETRIED_STATUSES = frozenset({429, 503})
#: redirects followed (the Hub uses one, to its CDN); a loop stops here
MAX_REDIRECTS = 10
#: the statuses that redirect (their Location is followed by hand, their body never read)
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: the most of an error answer's body read (its message: the Hub's are under 1 KiB)
ERROR_BODY_BYTES = 64 * 1024

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

                from explorer.sources.hub.deadline import DeadlineBackend

                transport = httpx2.HTTPTransport()
                pool = transport._pool  # the library names no other way to give the pool its network backend
                pool._network_backend = DeadlineBackend(pool._network_backend)
                # redirects are followed by get(), under the same deadline and without reading their bodies
                _client = httpx2.Client(transport=transport, follow_redirects=False, timeout=None)
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
    (unless ``HF_HUB_DISABLE_IMPLICIT_TOKEN``, or ``s.implicit_token`` is False: a published app's visitor): ``HF_TOKEN`` or
    ``HUGGING_FACE_HUB_TOKEN``; a saved login or ``HF_OIDC_RESOURCE`` is left
    to huggingface_hub's ``build_hf_headers`` (it refreshes OAuth tokens).
    """
    token = s.token
    if token is None and s.implicit_token and not env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        if os.environ.get("HF_OIDC_RESOURCE") or _token_file_exists():
            from huggingface_hub.utils import build_hf_headers  # finds a saved login exactly as it always has

            found = build_hf_headers(token=None, library_name="explorer", library_version=__version__)
            auth = next((k for k in found if k.lower() == "authorization"), None)
            if auth is not None:  # a saved token is checked as any other: stripped, token-shaped
                found[auth] = f"Bearer {clean_token(found[auth][7:], source='the saved Hub login')}"
            return {**found, **(extra or {})}
        env = "HF_TOKEN" if os.environ.get("HF_TOKEN") else "HUGGING_FACE_HUB_TOKEN"
        token = clean_token(os.environ.get(env), source=env)
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


def raise_for_status(response: httpx2.Response, s: HubSettings | None = None, what: str = "the answer") -> None:
    """Raise huggingface_hub's error for an answer of HTTP 400 or more; return for anything else.

    The error's body (its message) is read up to :data:`ERROR_BODY_BYTES`, decoded, within the deadline: a
    1 MB gzip body on a 404 decoded to 2.1 GiB, and an endless one ended in ``MemoryError`` (issue 25).
    """
    if response.status_code < 400:
        return
    if not hasattr(response, "_content"):  # a streamed answer: read the start of its message only
        body = _read_body(s or HubSettings(), response, what, ERROR_BODY_BYTES, too_long="")
        response._content = body  # what .json() and .text read (httpx's own attribute)
    from huggingface_hub.utils import hf_raise_for_status  # names the failure from the Hub's X-Error-Code

    hf_raise_for_status(response)


@dataclass(frozen=True, slots=True)
class Answer:
    """A successful answer (HTTP status below 400), its body read.

    Attributes:
        status: the HTTP status (200, or 206 for a range).
        body: the body bytes read (at most the ``max_bytes`` asked for).
        headers: the answer's headers, names in lower case.
    """

    status: int
    body: bytes
    headers: Mapping[str, str]


def retry_after_s(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number, or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def get(
    s: HubSettings, url: str, *, what: str, max_bytes: int, extra: dict[str, str] | None = None, too_long: str = ""
) -> Answer:
    """GET ``url``, retrying 429 and 503, reading at most ``max_bytes`` of the body before the deadline.

    With ``too_long`` set, a body longer than ``max_bytes`` is a HubResponseError
    saying so; without, the body is cut at ``max_bytes`` (a range read whose
    server ignored the range). Run it inside :func:`explorer.sources.hub.errors.hub_errors`,
    which turns the library's failures into typed errors.
    """
    for attempt in range(MAX_RETRIES + 1):
        with _followed(s, url, what, extra) as r:
            if r.status_code not in RETRIED_STATUSES:
                raise_for_status(r, s, what)
                return Answer(r.status_code, _read_body(s, r, what, max_bytes, too_long), r.headers)
            asked = retry_after_s(r.headers.get("retry-after"))
        wait = BACKOFF_S * 2**attempt if asked is None else asked
        if attempt == MAX_RETRIES or wait >= s.seconds_left(what):
            break
        time.sleep(wait)
    said = "" if asked is None else f"; it asked to wait {asked:g} s"
    raise HubRateLimitError(
        f"the Hub at {s.endpoint} answered HTTP {r.status_code} for {what} {attempt + 1} times in a row{said}"
    )


@contextmanager
def _followed(s: HubSettings, url: str, what: str, extra: dict[str, str] | None) -> Iterator[httpx2.Response]:
    """The streamed answer to GET ``url`` after at most :data:`MAX_REDIRECTS` redirects, each sent within the
    deadline, its body never read; the token is not sent on to another host (as httpx does)."""
    from explorer.sources.hub.deadline import bounded_by

    sent = headers(s, extra)
    deadline = s.deadline if s.deadline is not None else time.monotonic() + s.timeout_s
    for _hop in range(MAX_REDIRECTS + 1):
        timeout = min(REQUEST_TIMEOUT_S, s.seconds_left(what))
        with bounded_by(deadline):
            r = client().send(client().build_request("GET", url, headers=sent, timeout=timeout), stream=True)
        location = r.headers.get("location") if r.status_code in REDIRECT_STATUSES else None
        if location is None:
            try:
                with bounded_by(deadline):
                    yield r
            finally:
                r.close()
            return
        r.close()  # a redirect's body is not read
        target = r.url.join(location)
        if target.scheme not in ("http", "https"):
            raise HubResponseError(f"the Hub at {s.endpoint} redirected {what} to a {target.scheme!r} URL")
        if (target.scheme, target.host, target.port) != (r.url.scheme, r.url.host, r.url.port):
            sent = {k: v for k, v in sent.items() if k.lower() != "authorization"}
        url = str(target)
    raise HubResponseError(f"the Hub at {s.endpoint} redirected {what} in a loop (more than {MAX_REDIRECTS} redirects)")


def _read_body(s: HubSettings, r: httpx2.Response, what: str, max_bytes: int, too_long: str) -> bytes:
    out = bytearray()
    for chunk in r.iter_bytes():
        out += chunk
        if len(out) > max_bytes:
            if too_long:
                raise HubResponseError(f"{what}: {too_long} (over {max_bytes:,} bytes)")
            break
        if s.deadline is not None:
            s.seconds_left(what)  # a server dripping bytes is cut off at the deadline
    return bytes(out[:max_bytes])


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
