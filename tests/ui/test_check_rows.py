"""The rows the app shows for a pasted engine log."""

from __future__ import annotations

import pytest
from support.engine_logs import entry

from explorer.errors import EngineLogError
from explorer.ui.check_rows import COLUMNS, check_rows


def test_rows_for_a_pasted_vllm_log():
    text = entry("vllm__gpt-oss-20b__H100__3")["excerpt"]
    rows = check_rows(text, offline=True)
    assert all(tuple(r) == COLUMNS for r in rows)
    parts = [r["part"] for r in rows]
    assert parts[0] == "weights" and parts[-1] == "verdict" and "KV cache" in parts
    weights = rows[0]
    # Model loading took 7.01 GiB; explorer's tp-2 shard of the Triton layout (padded as 0.19 pads it) and the
    # RoPE cache: 6.99 GiB
    assert weights["log"] == "7.01 GiB" and weights["explorer"] == "6.99 GiB" and weights["difference %"] == "-0.3%"
    assert rows[-1] == {
        "part": "verdict",
        "log": "started",
        "explorer": "fits",
        "difference": "agree",
        "difference %": "",
    }


def test_a_pasted_text_that_is_no_log_is_a_typed_error():
    with pytest.raises(EngineLogError, match="expected lines such as"):
        check_rows("just some words", offline=True)


def test_a_refusal_shows_the_kv_it_needed_and_names_the_weights_it_does_not_print():
    # vllm-project/vllm#25350: a V1 refusal alone, the model named by the user
    text = (
        "ValueError: To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the "
        "estimated maximum model length is 122080.\n"
    )
    rows = {r["part"]: r for r in check_rows(text, model="Qwen/Qwen3-8B", card="h100-80g", offline=True)}
    assert rows["KV cache"]["log"] == "5.59 GiB" and rows["KV of one max_model_len sequence"]["log"] == "10.12 GiB"
    assert rows["weights"]["log"] == "not in the log" and rows["weights"]["difference"] == ""
    estimate = rows["longest context the KV room holds (vLLM's estimate)"]
    assert estimate["log"] == "122,080 tokens" and estimate["explorer"] == "(not predicted)"
    assert rows["verdict"]["log"] == "refused"
