"""The published app's visitor (issue 25): no file of the server's, no token but the visitor's own, nothing
private in the shared cache, redaction scoped to the visitor. Against the local test Hub; nothing mocked."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from support.hub_fixtures import GATED, GATED_TOKEN, SINGLE

from explorer.errors import ConfigError, GatedRepoError
from explorer.safe_text import REDACTED, redact, register_secret, secret_scope
from explorer.sources.cache.store import Cache
from explorer.ui.model_pick import pick_model
from explorer.ui.published import OWNER, Audience, audience

VISITOR = Audience(published=True)


@pytest.mark.parametrize(
    ("mode", "browser", "env", "published"),
    [
        ("run", False, {}, True),
        ("edit", False, {}, False),
        ("script", False, {}, False),
        (None, False, {}, False),  # Jupyter, a script, the CLI
        (None, True, {}, True),  # the WASM page
        ("edit", False, {"EXPLORER_PUBLISHED": "1"}, True),
        ("run", False, {"EXPLORER_PUBLISHED": "no"}, False),
    ],
)
def test_the_audience_follows_marimos_mode_and_the_operators_override(mode, browser, env, published):
    assert audience(mode, in_browser=browser, env=env).published is published


def test_the_models_folder_counts_only_when_published():
    env = {"EXPLORER_PUBLISHED_MODELS_DIR": "/srv/models"}
    assert audience("run", env=env).models_dir == Path("/srv/models")
    assert audience("edit", env=env).models_dir is None


def test_the_operators_chosen_models_are_read_once_each_and_only_when_published():
    env = {"EXPLORER_PUBLISHED_MODELS": " org/a, org/b  org/a,,org/c "}
    assert audience("run", env=env).chosen_models == ("org/a", "org/b", "org/c")
    assert audience("edit", env=env).chosen_models == ()  # the owner's list already has the whole cache
    assert audience("run", env={}).chosen_models == ()


@pytest.mark.parametrize("text", ["/dev/zero", "~/.ssh/id_rsa", "/nonexistent/config.json", "./x.gguf", "/etc"])
def test_a_visitor_reaches_no_path_and_learns_nothing_of_it(offline, text):
    # before: ?model=/dev/zero took the server from 88 MiB to 6.1 GiB; ~/.ssh/id_rsa "does not exist" told
    # a visitor what exists. Every path now gets the same answer, the disk never looked at
    with pytest.raises(ConfigError) as e:
        pick_model(text, audience=VISITOR)
    assert str(e.value).startswith("this page reads models from the Hugging Face Hub, not from files of the server")


def test_the_operators_folder_is_the_only_one_a_visitor_reads(offline, tmp_path, config):
    import json

    models = tmp_path / "models"
    (models / "tiny").mkdir(parents=True)
    (models / "tiny" / "config.json").write_text(json.dumps(config("Qwen__Qwen3-0.6B")))
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "config.json").write_text(json.dumps(config("Qwen__Qwen3-0.6B")))
    os.symlink(tmp_path / "secret", models / "link")
    visitor = Audience(published=True, models_dir=models)
    assert pick_model("./tiny", audience=visitor).shape.params > 0
    for outside in ("../secret", "./link", str(tmp_path / "secret"), "./../secret/config.json"):
        with pytest.raises(ConfigError, match="and its own models folder, not from files of the server"):
            pick_model(outside, audience=visitor)


@pytest.fixture
def operator_token(hub_endpoint, monkeypatch, tmp_path):
    """The server's environment holds a token that sees the gated repo; the cache is a fresh file."""
    monkeypatch.setenv("HF_TOKEN", GATED_TOKEN)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
    return tmp_path / "cache.duckdb"


def test_a_visitor_is_never_lent_the_operators_token(operator_token):
    # before: with the token box empty, Fetch sent the server's HF_TOKEN: an anonymous visitor read gated repos
    with pytest.raises(GatedRepoError):
        pick_model(GATED, fetch=True, audience=VISITOR)
    assert pick_model(GATED, fetch=True, audience=OWNER).shape.params > 0  # the owner's own token still works


def test_what_a_visitors_token_reads_never_reaches_the_shared_cache(operator_token):
    # before: everything any visitor fetched landed in one cache every visitor could read and list
    got = pick_model(GATED, fetch=True, token=GATED_TOKEN, audience=VISITOR)
    assert got.shape.params > 0
    assert pick_model(SINGLE, fetch=True, audience=VISITOR).origin == "hub"  # public, anonymous: shared
    with Cache.open(operator_token, read_only=True, endpoint=os.environ["HF_ENDPOINT"]) as cache:
        assert SINGLE in cache.repos() and GATED not in cache.repos()


def test_a_visitors_secret_redacts_only_that_visitors_text():
    # before: one visitor's typed token was registered for every session, so others' pages changed
    secret, seen = "visitorsecretword", {}
    with secret_scope():
        register_secret(secret)
        seen["own"] = redact(f"token {secret}")
        other = threading.Thread(target=lambda: seen.__setitem__("other", redact(f"token {secret}")))
        other.start()
        other.join()
    seen["after"] = redact(f"token {secret}")
    assert seen == {"own": f"token {REDACTED}", "other": f"token {secret}", "after": f"token {secret}"}


def test_a_model_named_in_a_pasted_log_is_held_to_the_same_rule(offline):
    # before: a pasted log's model ("/dev/zero", a JSON file of the server's) was resolved from the disk
    from explorer.ui.check_rows import check_rows

    log = "INFO non-default args: {'model': '/root/.docker/config.json'}\nINFO Available KV cache memory: 10.0 GiB\n"
    with pytest.raises(ConfigError, match="not from files of the server"):
        check_rows(log, offline=True, **VISITOR.spec_options())


def test_each_paste_and_upload_is_capped_with_a_message_saying_the_cap():
    # before: the log box took 8 MB; the server checks whatever the browser sends
    from explorer.ui.published import PASTE_CAPS, over_cap

    assert over_cap("log", "x" * 1_000_000) is None  # a 1 MB log is read
    assert over_cap("log", "x" * (PASTE_CAPS["log"] + 1)) == (
        "the log is 2,097,153 bytes; at most 2,097,152 (2,048 KiB) are read. Paste its start."
    )
    assert over_cap("config", "é" * 600_000).startswith("the config is 1,200,000 bytes")  # UTF-8 bytes, not chars
    assert over_cap("cluster file", b"{" * (1024 * 1024)) is None
