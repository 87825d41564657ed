"""Where and how to reach the Hub: :class:`HubSettings`, from the arguments, then the environment.

The bottom of the Hub package: the client, the error mapping and the
resolver all read these settings, and this module imports none of them.
A token only ever travels in the ``Authorization`` header: it is kept out of
messages, reprs, logs and the cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["DEFAULT_ENDPOINT", "DEFAULT_TIMEOUT_S", "HubSettings", "env_true"]

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0


def env_true(name: str) -> bool:
    """Whether the environment variable ``name`` says yes (``1``, ``true``, ``yes``, ``on``)."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True, kw_only=True)
class HubSettings:
    """Where and how to reach the Hub.

    Attributes:
        endpoint: base URL, e.g. ``https://huggingface.co`` (no trailing slash).
        timeout_s: seconds to wait for each answer before giving up.
        offline: when true, no request is made and fetchers raise OfflineMissError.
        token: the access token, or None for the one the environment or a saved login
            gives (see :func:`explorer.sources.hub.http.headers`). Never shown: excluded from the repr.
    """

    endpoint: str = DEFAULT_ENDPOINT
    timeout_s: float = DEFAULT_TIMEOUT_S
    offline: bool = False
    token: str | None = field(default=None, repr=False)

    @classmethod
    def resolve(
        cls,
        *,
        token: str | None = None,
        endpoint: str | None = None,
        timeout_s: float | None = None,
        offline: bool | None = None,
    ) -> HubSettings:
        """Arguments first, then ``HF_TOKEN``, ``HF_ENDPOINT``, ``HF_HUB_OFFLINE``, then defaults."""
        env = os.environ
        if offline is None:
            offline = env_true("HF_HUB_OFFLINE")
        return cls(
            endpoint=(endpoint or env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
            timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s),
            offline=offline,
            token=token or env.get("HF_TOKEN") or None,
        )
