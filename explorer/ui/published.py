"""Who the app is for: its owner (``marimo edit``, Jupyter, a script) or visitors (``marimo run``, the WASM
page), and what a visitor may reach.

Issue 25: a ``marimo run`` server (every visitor in one process) resolved any path a visitor typed or a link
carried (``?model=/dev/zero``), lent the server's ``HF_TOKEN`` to every anonymous Fetch, cached what any
visitor fetched where every other could list it, and registered each visitor's token in one redaction list.
:func:`audience` decides the mode; :meth:`Audience.hub_access` is what one visitor's action may use:

- **no file of the server's**: a path is refused without the disk being looked at, unless the operator
  names one folder visitors may read models from (``EXPLORER_PUBLISHED_MODELS_DIR``);
- **no token but the visitor's own**: never ``HF_TOKEN`` nor a saved login; the visitor's token is
  registered for redaction in that action's scope only (:func:`explorer.safe_text.secret_scope`);
- **nothing private shared**: a fetch with the visitor's token (which may see gated or private repos) uses a
  cache in memory that ends with the action; an anonymous fetch (public repos only) uses the shared cache;
- **the hardware-first list** is the snapshot's (:attr:`Audience.listing_uses_cache` is False) and the
  operator's chosen models (``EXPLORER_PUBLISHED_MODELS``, read from the cache), never what visitors fetched;
- **each action on time**: the expensive calls run off the visitor's thread and are waited for at most
  :attr:`Audience.deadline_s` (``EXPLORER_ACTION_DEADLINE_S``, default :data:`DEFAULT_DEADLINE_S`), through
  :meth:`Audience.run` (:mod:`explorer.ui.deadline`); the WASM page (no threads) and the owner run inline;
- **each action bounded**: a pasted log, a pasted config.json and an uploaded cluster file are refused past
  their caps (:data:`PASTE_CAPS`, :func:`over_cap`), for every audience.

``EXPLORER_PUBLISHED=1`` (or ``0``) overrides the detection. The operator's side is in docs/publishing.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from explorer.safe_text import register_secret, secret_scope
from explorer.ui.deadline import within_deadline

__all__ = [
    "CHOSEN_MODELS_ENV",
    "DEADLINE_ENV",
    "DEFAULT_DEADLINE_S",
    "MODELS_DIR_ENV",
    "OWNER",
    "PASTE_CAPS",
    "PUBLISHED_ENV",
    "Audience",
    "audience",
    "over_cap",
]

T = TypeVar("T")

#: the operator's override of the detection: 1/true/yes (published) or 0/false/no (the owner's)
PUBLISHED_ENV = "EXPLORER_PUBLISHED"
#: the one folder whose models visitors may read (absent: none)
MODELS_DIR_ENV = "EXPLORER_PUBLISHED_MODELS_DIR"
#: the operator's chosen models, listed to visitors beside the snapshot: Hub ids, separated by commas or spaces
CHOSEN_MODELS_ENV = "EXPLORER_PUBLISHED_MODELS"
#: the seconds the server waits for one visitor's expensive call (a plan, the hardware-first list, …)
DEADLINE_ENV = "EXPLORER_ACTION_DEADLINE_S"
DEFAULT_DEADLINE_S = 30.0
#: marimo's app modes in which the app is served to others (``mo.app_meta().mode``)
SERVED_MODES = frozenset({"run"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Audience:
    """Whom the app serves.

    Attributes:
        published: True when served to visitors (``marimo run``, the WASM page), False for its owner.
        models_dir: the one folder a visitor's paths may name (the operator's), or None.
        chosen_models: the Hub ids the operator lists to visitors beside the snapshot (from the cache).
        deadline_s: the seconds each expensive call is waited for off the session's thread, or None to run
            it inline (the owner's app; the WASM page, which has no threads).
    """

    published: bool
    models_dir: Path | None = None
    chosen_models: tuple[str, ...] = ()
    deadline_s: float | None = None

    def run(self, call: Callable[[], T], *, what: str) -> T:
        """``call()`` within this audience's deadline (:func:`explorer.ui.deadline.within_deadline`)."""
        return within_deadline(call, what=what, seconds=self.deadline_s)

    @property
    def listing_uses_cache(self) -> bool:
        """Whether the hardware-first list adds the cache's models (the owner's); visitors see the snapshot's."""
        return not self.published

    def spec_options(self) -> dict[str, Any]:
        """What :func:`explorer.sources.spec.parse_model_spec` takes for this audience."""
        return {} if not self.published else {"local_paths": False, "local_root": self.models_dir}

    @contextmanager
    def hub_access(self, token: str | None) -> Iterator[dict[str, Any]]:
        """The resolver's keyword arguments for one action (``token``: what the visitor typed, or None)."""
        if not self.published:
            yield {"token": token}
            return
        from explorer.sources.cache.store import Cache
        from explorer.sources.hub.settings import HubSettings

        with secret_scope():
            register_secret(token)
            settings = HubSettings.resolve(token=token, implicit_token=False)
            # what a token reads (gated, private) stays in this action
            private = Cache.open(":memory:", endpoint=settings.endpoint) if token else None
            try:
                yield {"settings": settings, "cache": private, **self.spec_options()}
            finally:
                if private is not None:
                    private.close()


#: the owner's audience: everything the machine offers
OWNER = Audience(published=False)


def audience(app_mode: str | None, *, in_browser: bool = False, env: Mapping[str, str] = os.environ) -> Audience:
    """The audience of an app run in marimo's ``app_mode`` (``mo.app_meta().mode``: ``run``, ``edit``,
    ``script``, None outside marimo); the WASM page (``in_browser``) is published; ``EXPLORER_PUBLISHED``
    overrides both."""
    flag = env.get(PUBLISHED_ENV, "").strip().lower()
    if flag in ("1", "true", "yes"):
        published = True
    elif flag in ("0", "false", "no"):
        published = False
    else:
        published = in_browser or app_mode in SERVED_MODES
    folder = env.get(MODELS_DIR_ENV, "").strip()
    chosen = tuple(dict.fromkeys(env.get(CHOSEN_MODELS_ENV, "").replace(",", " ").split())) if published else ()
    return Audience(
        published=published,
        models_dir=Path(folder) if published and folder else None,
        chosen_models=chosen,
        deadline_s=_deadline_s(env) if published and not in_browser else None,
    )


def _deadline_s(env: Mapping[str, str]) -> float:
    """The operator's ``EXPLORER_ACTION_DEADLINE_S`` (0.1 s to an hour), else :data:`DEFAULT_DEADLINE_S`."""
    try:
        seconds = float(env.get(DEADLINE_ENV, ""))
    except ValueError:
        return DEFAULT_DEADLINE_S
    return seconds if 0.1 <= seconds <= 3600 else DEFAULT_DEADLINE_S


#: the most a visitor (or the owner) may hand one action, bytes of UTF-8: a start-up log (a few hundred kB
#: at most; the readers are linear, 1 MB in about 0.4 s), a config.json (a few kB), a cluster file (a few kB)
PASTE_CAPS: Mapping[str, int] = {"log": 2 * 1024 * 1024, "config": 1024 * 1024, "cluster file": 1024 * 1024}


def over_cap(what: str, text: str | bytes) -> str | None:
    """The message for a ``what`` (a key of :data:`PASTE_CAPS`) past its cap, or None when within it.

    The page's own boxes stop at the cap, but a client may send more: this is the server's check.
    """
    cap = PASTE_CAPS[what]
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size <= cap:
        return None
    return f"the {what} is {size:,} bytes; at most {cap:,} ({cap // 1024:,} KiB) are read. Paste its start."
