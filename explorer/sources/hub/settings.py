"""Where and how to reach the Hub: :class:`HubSettings`, from the arguments, then the environment.

The bottom of the Hub package: the client, the error mapping and the
resolver all read these settings, and this module imports none of them.

Every value is checked here, at the edge, before a request is made:

- a token is stripped of spaces and line ends (a token file saved on Windows
  ends in CR LF) and must then be printable ASCII with no spaces, else
  :class:`~explorer.errors.TokenError`, which never shows it; a good token is
  registered with :func:`explorer.safe_text.register_secret`, so it is
  redacted from anything shown even where a library quotes it. It only ever
  travels in the ``Authorization`` header;
- the endpoint must be an ``http(s)://host[:port]`` URL with a port in range;
- the timeout must be a finite number of seconds above zero. It bounds a
  whole resolution (:meth:`HubSettings.started` sets the deadline), not each
  request.
"""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from explorer.errors import HubSettingsError, HubTimeoutError, TokenError
from explorer.safe_text import register_secret, safe_text

__all__ = [
    "DEFAULT_ENDPOINT",
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "REQUEST_TIMEOUT_S",
    "HubSettings",
    "clean_token",
    "env_true",
]

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 30.0
#: the most one wait for bytes (connect, each read) takes, within the resolution's deadline
REQUEST_TIMEOUT_S = 10.0
#: the longest a resolution may be given (a day); past it a typo is likelier than a wish
MAX_TIMEOUT_S = 86_400.0
#: the longest endpoint URL accepted
MAX_ENDPOINT_CHARS = 2048
#: a token once stripped: printable ASCII, no spaces, at most 4,096 characters (Hub tokens have 37)
_TOKEN_SHAPE = re.compile(r"[\x21-\x7e]{1,4096}")


def env_true(name: str) -> bool:
    """Whether the environment variable ``name`` says yes (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def clean_token(raw: str | None, *, source: str) -> str | None:
    """The token in ``raw`` stripped of spaces and line ends, or None when empty; registered for redaction.

    Raises:
        TokenError: what is left holds a space, a control or a non-ASCII character, or is too long;
            the message says which, never the token.
    """
    if raw is None:
        return None
    token = raw.strip()
    if not token:
        return None
    if _TOKEN_SHAPE.fullmatch(token) is None:
        bad = next((i for i, c in enumerate(token) if not "\x21" <= c <= "\x7e"), None)
        why = (
            f"its character {bad + 1} of {len(token)} is a space, a control or a non-ASCII character"
            if bad is not None
            else f"it is {len(token):,} characters long"
        )
        register_secret(token)
        raise TokenError(f"the token from {source} is not a Hub token: {why} (the token is not shown)")
    register_secret(token)
    return token


def _check_endpoint(endpoint: str) -> str:
    shown = safe_text(endpoint[:200])
    if len(endpoint) > MAX_ENDPOINT_CHARS:
        raise HubSettingsError(f"the Hub endpoint is {len(endpoint):,} characters long", hint="check HF_ENDPOINT")
    try:
        parts = urlsplit(endpoint)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as e:
        raise HubSettingsError(f"the Hub endpoint {shown!r} is not a URL ({e})", hint="check HF_ENDPOINT") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HubSettingsError(
            f"the Hub endpoint {shown!r} is not an http(s)://host URL",
            hint="check HF_ENDPOINT, e.g. https://huggingface.co",
        )
    if port == 0:
        raise HubSettingsError(f"the Hub endpoint {shown!r} has port 0; ports run 1 to 65535", hint="check HF_ENDPOINT")
    return endpoint


def _check_timeout(timeout_s: float) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise HubSettingsError(
            f"the Hub timeout is {timeout_s!r} s; it must be a number of seconds in (0, {MAX_TIMEOUT_S:,.0f}]",
            hint="pass --timeout SECONDS, e.g. --timeout 30",
        )
    return float(timeout_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class HubSettings:
    """Where and how to reach the Hub.

    Attributes:
        endpoint: base URL, e.g. ``https://huggingface.co`` (no trailing slash).
        timeout_s: seconds one whole resolution (listing, configs, headers, retries) may take.
        offline: when true, no request is made and fetchers raise OfflineMissError.
        token: the access token, or None for the one the environment or a saved login
            gives (see :func:`explorer.sources.hub.http.headers`). Never shown: excluded from the repr.
        deadline: the ``time.monotonic()`` by which the resolution under way must end (None: not started).
        implicit_token: whether, with no ``token``, the environment's (``HF_TOKEN``) or a saved login's is
            sent; False for a published app's visitor, who is never lent the operator's account.
    """

    endpoint: str = DEFAULT_ENDPOINT
    timeout_s: float = DEFAULT_TIMEOUT_S
    offline: bool = False
    token: str | None = field(default=None, repr=False)
    deadline: float | None = None
    implicit_token: bool = True

    def __post_init__(self) -> None:
        _check_endpoint(self.endpoint)
        object.__setattr__(self, "timeout_s", _check_timeout(self.timeout_s))
        object.__setattr__(self, "token", clean_token(self.token, source="the settings"))

    @classmethod
    def resolve(
        cls,
        *,
        token: str | None = None,
        endpoint: str | None = None,
        timeout_s: float | None = None,
        offline: bool | None = None,
        implicit_token: bool = True,
    ) -> HubSettings:
        """Arguments first, then ``HF_TOKEN`` (unless ``implicit_token`` is False), ``HF_ENDPOINT``,
        ``HF_HUB_OFFLINE``, then defaults."""
        env = os.environ
        if offline is None:
            offline = env_true("HF_HUB_OFFLINE")
        given = clean_token(token, source="--token") if token is not None else None
        if given is None and implicit_token:
            given = clean_token(env.get("HF_TOKEN"), source="HF_TOKEN")
        return cls(
            endpoint=(endpoint or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
            offline=offline,
            token=given,
            implicit_token=implicit_token,
        )

    def started(self) -> HubSettings:
        """These settings with the deadline set ``timeout_s`` from now, unless a resolution already set it."""
        return self if self.deadline is not None else replace(self, deadline=time.monotonic() + self.timeout_s)

    def seconds_left(self, what: str) -> float:
        """Seconds left before the deadline (``timeout_s`` when none is set); HubTimeoutError when none are."""
        if self.deadline is None:
            return self.timeout_s
        left = self.deadline - time.monotonic()
        if left <= 0 or math.isnan(left):
            raise HubTimeoutError(f"the Hub at {self.endpoint} did not finish within {self.timeout_s:g} s ({what})")
        return left
