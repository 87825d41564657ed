"""Text that is safe to show: secrets redacted, control characters escaped.

Everything explorer shows comes, in part, from outside: file names, GGUF
metadata, config values, the Hub's answers, library error texts. Two things
in them must never reach a terminal, a page or a file as they are:

- **a token.** :func:`redact` replaces every token-shaped string (``hf_…``,
  ``hf_oauth_…``, ``api_org_…``) and every token registered with
  :func:`register_secret` (the one the user gave, whatever its shape) by
  ``hf_***``. It is the one redaction: :class:`explorer.errors.ExplorerError`
  applies it to every message, the CLI to everything it prints, the cache to
  what it exports, the notebooks to their callouts.
- **control characters.** :func:`escape_controls` writes ANSI escapes, other C0
  and C1 controls, right-to-left overrides and line separators as visible
  ``\\x1b`` / ``\\u202e`` escapes, so that a name read from a file cannot
  recolour the terminal, move the cursor or reverse the text around it.

:func:`safe_text` does both; :func:`safe_html` then escapes it for a page (the
notebooks and widgets use it wherever they show text from outside). The registry of secrets is the one piece of
process state here: a few strings, capped at :data:`MAX_SECRETS`. Inside :func:`secret_scope` (a published
app's visitor's action) a secret is registered in that scope only (a context variable): one visitor's
token then redacts that visitor's text, never the text other visitors see (issue 25).
"""

from __future__ import annotations

import contextvars
import html
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "MAX_SECRETS",
    "REDACTED",
    "escape_controls",
    "redact",
    "register_secret",
    "safe_html",
    "safe_text",
    "secret_scope",
]

#: what a secret is replaced by
REDACTED = "hf_***"
#: registered secrets kept (the oldest is dropped past it)
MAX_SECRETS = 16
#: a registered secret shorter than this is not registered (it would redact ordinary words)
MIN_SECRET_CHARS = 8

#: Hub user tokens (``hf_`` + 34 letters and digits), OAuth tokens and organisation API tokens; the
#: body needs 20 letters or digits in a row, so ``hf_quant_config.json`` is not mistaken for one
_TOKEN_SHAPED = re.compile(r"(?:hf_(?:oauth_)?|api_org_)[A-Za-z0-9]{20,}")

#: C0 and C1 controls but tab and newline; bidirectional overrides, embeddings and isolates (Trojan
#: Source, CVE-2021-42574); the Arabic letter mark; line and paragraph separators
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_CONTROLS_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")

_secrets: list[str] = []
_secrets_lock = threading.Lock()
#: the secrets of the scope under way (None: no scope, secrets go to the process's list)
_scoped: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("explorer_secrets", default=None)


@contextmanager
def secret_scope() -> Iterator[None]:
    """Within the block, :func:`register_secret` keeps secrets to this context (a visitor's session action)."""
    reset = _scoped.set(())
    try:
        yield
    finally:
        _scoped.reset(reset)


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` (a token the user gave) so that :func:`redact` removes it wherever it appears
    (within the :func:`secret_scope` under way, when one is)."""
    if not secret or len(secret) < MIN_SECRET_CHARS:
        return
    scoped = _scoped.get()
    if scoped is not None:
        if secret not in scoped:
            _scoped.set((*scoped, secret)[-MAX_SECRETS:])
        return
    with _secrets_lock:
        if secret in _secrets:
            return
        _secrets.append(secret)
        del _secrets[:-MAX_SECRETS]


def redact(text: str) -> str:
    """``text`` with every token-shaped string and every registered secret replaced by ``hf_***``."""
    if not text:
        return text
    for secret in (*_secrets, *(_scoped.get() or ())):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _TOKEN_SHAPED.sub(REDACTED, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str, *, multiline: bool = False) -> str:
    """``text`` with control and bidirectional-override characters written as escapes.

    ``\\x1b[31m`` becomes the six visible characters ``\\x1b[31m``; U+202E
    becomes ``\\u202e``. With ``multiline``, newlines and tabs are kept.
    """
    pattern = _CONTROLS if multiline else _CONTROLS_ONE_LINE
    return pattern.sub(_escape, text) if text else text


def safe_text(text: object, *, multiline: bool = False) -> str:
    """``str(text)`` redacted, then with its control characters escaped: fit for a terminal or a page."""
    return escape_controls(redact(str(text)), multiline=multiline)


def safe_html(text: object) -> str:
    """:func:`safe_text`, then HTML-escaped: fit for a notebook's markdown or a widget's HTML."""
    return html.escape(safe_text(text, multiline=True))
