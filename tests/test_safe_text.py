"""explorer.safe_text: the one redaction of tokens and the one escaping of control characters."""

from __future__ import annotations

import pytest

from explorer.errors import ConfigError, HubError
from explorer.safe_text import REDACTED, escape_controls, redact, register_secret, safe_html, safe_text


@pytest.mark.parametrize(
    "token",
    [
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "hf_oauth_0123456789abcdefghijKLMN",
        "api_org_0123456789abcdefghijKLMNop",
    ],
)
def test_token_shaped_strings_are_redacted_wherever_they_sit(token):
    assert redact(f"Bearer {token}") == f"Bearer {REDACTED}"
    assert redact(f"b'Bearer {token}\\r'") == f"b'Bearer {REDACTED}\\r'"  # a library's repr of a bad header
    assert token not in str(HubError(f"failed for {token}", hint=f"not {token}"))


def test_names_that_only_look_alike_are_kept():
    kept = "hf_quant_config.json, hf_hub_download, hf_transfer, model-hf_q4.gguf"
    assert redact(kept) == kept


def test_a_registered_secret_of_any_shape_is_redacted():
    register_secret("my-private-token-42")
    register_secret("short")  # too short to register: it would redact ordinary words
    assert redact("x my-private-token-42 y short") == f"x {REDACTED} y short"
    assert "my-private-token-42" not in str(ConfigError("saw my-private-token-42"))


def test_control_characters_and_bidi_overrides_are_escaped():
    assert escape_controls("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert escape_controls("lla\u202ema\u2066") == "lla\\u202ema\\u2066"
    assert escape_controls("a\nb\tc\rd") == "a\\x0ab\\x09c\\x0dd"
    assert escape_controls("a\nb\tc\rd", multiline=True) == "a\nb\tc\\x0dd"
    assert escape_controls("Qwen/Qwen3-8B × 2, 中文, café") == "Qwen/Qwen3-8B × 2, 中文, café"


def test_safe_text_and_safe_html_do_both():
    token = "hf_ZYXWVUTSRQPONMLKJIHGFEDCBA987654"
    assert safe_text(f"{token}\x1b[2J") == f"{REDACTED}\\x1b[2J"
    assert safe_html(f"<i>{token}</i>\u202e") == f"&lt;i&gt;{REDACTED}&lt;/i&gt;\\u202e"
