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
    # Model loading took 7.01 GiB; explorer's tp-2 shard of the Triton layout is 6.81 GiB
    assert weights["log"] == "7.01 GiB" and weights["explorer"] == "6.81 GiB" and weights["difference %"] == "-2.9%"
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
