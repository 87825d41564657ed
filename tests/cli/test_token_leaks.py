"""The token is never shown: every output of every command, the cache file and its export, grepped for it.

The token comes as a CRLF token file leaves it (``HF_TOKEN=$'hf_…\\r\\n'``), as
``--token``, and wrong (a line end inside it; one the gated repo refuses).
Commands run in-process through ``explorer.cli.main`` against the test Hub,
also while it fails (an HTML answer, 429s) so that fallback notes carry the
Hub's errors. Every stdout, stderr, JSON document, warning, the cache file's
bytes and the exported cache are searched for the token and for its 20-letter
body. A token-shaped string inside a repo's own config.json is redacted from
what is printed and exported as well.
"""

from __future__ import annotations

import json
import warnings

import pytest
from support.hub_fixtures import GATED, GATED_TOKEN, make_repo

from explorer.cli import main
from explorer.safe_text import REDACTED, redact, safe_html

#: a token-shaped string a repo's config.json carries (a leaked token in someone's config)
CONFIG_CANARY = "hf_CONFIGcanary0123456789ABCDEFGHIJ"
LEAKY = "tmp-org/leaky-config"


@pytest.fixture
def hub(new_hub_server, tmp_path, monkeypatch):
    server = new_hub_server(copy=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
        "torch_dtype": "bfloat16", "_name_or_path": f"/home/me/{CONFIG_CANARY}/model",
    }  # fmt: skip
    make_repo(server.root, LEAKY, {"config.json": config})
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "cache.duckdb"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("EXPLORER_SNAPSHOT", raising=False)
    return server


def run(capsys, *argv: str) -> tuple[int, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    out = capsys.readouterr()
    return code, out.out + out.err + "".join(str(w.message) for w in caught)


def test_no_output_holds_the_token(hub, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", f"{GATED_TOKEN}\r\n")  # read from a token file saved on Windows
    texts, codes = [], {}

    def go(name: str, *argv: str) -> None:
        codes[name], text = run(capsys, *argv)
        texts.append(text)

    go("shape json", "shape", GATED, "--json")
    go("shape table (cache)", "shape", GATED)
    go("plan json", "plan", GATED, "--cluster", "1x1xh100-80g", "--json")
    go("plan --token", "plan", GATED, "--cluster", "1x1xh100-80g", "--token", f"{GATED_TOKEN}\n", "--top", "3")
    go("place json", "place", "--cluster", "1x2xl40s-48g", "--model", GATED, "--json")
    go("leaky config", "shape", LEAKY, "--json")
    with hub.fault("html", r"^/api/models/"):
        go("html, snapshot fallback", "shape", "Qwen/Qwen3-8B", "--json", "--revision", "main")
    with hub.fault("status", r"^/api/models/", status=429, headers={"Retry-After": "0"}):
        go("429, fallback", "shape", "Qwen/Qwen3-30B-A3B")
    go("wrong token", "shape", "meta-llama/Meta-Llama-3.1-8B@other", "--token", "hf_WRONGtoken0123456789abcdefgh")
    go("token with a CR inside", "shape", GATED, "--token", GATED_TOKEN[:10] + "\r" + GATED_TOKEN[10:])
    go("cache info", "cache", "info", "--json")
    go("cache export", "cache", "export", str(tmp_path / "export.json"))
    texts.append((tmp_path / "export.json").read_text())
    cache_bytes = (tmp_path / "cache.duckdb").read_bytes()

    assert codes["shape json"] == 0 and json.loads(texts[0])["source"]["origin"] == "hub"
    assert codes["plan json"] == 0 and codes["place json"] in (0, 3) and codes["cache export"] == 0
    assert codes["html, snapshot fallback"] == 0 and "HubResponseError" in texts[6]
    assert codes["429, fallback"] == 0 and "HubRateLimitError" in texts[7]
    assert codes["wrong token"] == 2 and codes["token with a CR inside"] == 2 and "not a Hub token" in texts[9]
    body = GATED_TOKEN[3:23]  # 20 letters of it: a partial leak is a leak
    leaks = [(name, t) for name, t in zip(codes, texts, strict=False) if GATED_TOKEN in t or body in t]
    assert not leaks, leaks
    assert GATED_TOKEN.encode() not in cache_bytes and body.encode() not in cache_bytes
    # a token-shaped string in a repo's config: redacted wherever it is shown or exported
    assert not [t for t in texts if CONFIG_CANARY in t] and REDACTED in texts[-1]  # the export holds the config


def test_one_redaction_serves_every_edge():
    text = f"failed with Bearer {GATED_TOKEN} and hf_quant_config.json ({CONFIG_CANARY})"
    assert redact(text) == f"failed with Bearer {REDACTED} and hf_quant_config.json ({REDACTED})"
    page = safe_html(f"<b>{GATED_TOKEN}</b>\x1b[31m\u202e")
    assert page == "&lt;b&gt;hf_***&lt;/b&gt;\\x1b[31m\\u202e"  # the notebooks' callouts
