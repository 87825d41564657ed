"""explorer.ui.model_pick: the snapshot first, the cache offline, did-you-mean phrased for the app."""

from __future__ import annotations

import pytest

from explorer.errors import ConfigError
from explorer.ui import model_pick
from explorer.ui.model_pick import UnknownModelError, pick_model, unknown_model_advice


def test_a_snapshot_model_never_reaches_the_hub(offline):
    m = pick_model("Qwen/Qwen3-8B")
    assert m.origin == "snapshot" and m.repo == "Qwen/Qwen3-8B"


def test_an_unknown_id_names_the_nearest_snapshot_ids(offline):
    with pytest.raises(UnknownModelError) as e:
        pick_model("Qwen/Qwen3-14B")
    assert e.value.suggestions[:2] == ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B"]
    text = unknown_model_advice(e.value, can_fetch=True)
    assert text.startswith("**explorer does not know <code>Qwen/Qwen3-14B</code> offline.**")
    assert "Did you mean <code>Qwen/Qwen3-1.7B</code>, <code>Qwen/Qwen3-8B</code>" in text and "Press **Fetch**" in text
    assert "--offline" not in text and "go online" not in text and "paste" not in text
    in_page = unknown_model_advice(e.value, can_fetch=False)
    assert "paste the model's config.json" in in_page and "Fetch" not in in_page


def test_in_the_browser_only_the_snapshot_answers(offline, monkeypatch):
    monkeypatch.setattr(model_pick, "in_browser", lambda: True)
    assert pick_model("Qwen/Qwen3-8B").origin == "snapshot"
    with pytest.raises(UnknownModelError):
        pick_model("/some/local/config.json")  # no disk, no cache, no Hub in a browser page


def test_a_missing_local_file_is_a_typed_error(offline):
    with pytest.raises(ConfigError, match="does not exist"):
        pick_model("./no/such/config.json")


def test_the_advice_escapes_what_the_visitor_typed():
    # issue 25: the text went raw into markdown, so a crafted ?model= link drew a link and a form in the warning
    hostile = 'a/b:x`</code><a href="https://evil">log in</a><form>`.gguf'
    text = unknown_model_advice(UnknownModelError(hostile, ["Qwen/Qwen3-8B"]), can_fetch=True)
    assert "<a " not in text and "<form>" not in text and '"https' not in text
    assert "&lt;a href=&quot;https://evil&quot;&gt;" in text and "&lt;form&gt;" in text


@pytest.mark.parametrize(
    "text", ["a/b:<img src=x onerror=alert(1)>.gguf", "org/name'", 'org/na"me', "org/`name`", "org/<b>x</b>"]
)
def test_ids_refuse_markup_characters(offline, text):
    with pytest.raises(ConfigError, match="which no Hub id or file name does"):
        pick_model(text)
