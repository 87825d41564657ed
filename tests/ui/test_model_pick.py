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
    assert text.startswith("**explorer does not know `Qwen/Qwen3-14B` offline.**")
    assert "Did you mean `Qwen/Qwen3-1.7B`, `Qwen/Qwen3-8B`" in text and "Press **Fetch**" in text
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
