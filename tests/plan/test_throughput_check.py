"""Published throughput at concurrency against the load model (explorer/plan/throughput_check.py): every row
of data/published_throughput.csv maps, plans and stays under its bound; the kept-out estimates meet the goal."""

from __future__ import annotations

import pytest

from explorer.bench.throughput import close, comparisons
from explorer.errors import CatalogueError
from explorer.plan.throughput_check import parse_throughput
from explorer.speed.published import kept_out


@pytest.fixture(scope="module")
def compared():
    return comparisons()


def test_every_row_is_compared(compared):
    done, skipped = compared
    assert skipped == [] and len(done) >= 66


def test_the_bound_is_never_below_a_measurement(compared):
    done, _ = compared
    assert [c.row.source_id for c in done if c.bound_ratio < 1] == []


def test_kept_out_estimates_within_1_5x_on_at_least_80_percent(compared):
    """The issue's goal, on the rows no constant was fitted on (the load model fits nothing; the speed
    model's constants were fitted with the same hash keeping the same third out)."""
    out = [c for c in compared[0] if kept_out(c.row)]
    assert len(out) >= 22 and sum(map(close, out)) >= 0.8 * len(out)


def test_a_saturated_server_is_capped_by_its_kv_cache(compared):
    """NIM's Llama-3.3-70B on 2 × H100 at 5,000 + 500 tokens: past what the KV cache holds, more requests in
    flight only queue, so the estimate stops growing, as the measurement (917-921 tokens/s) does."""
    nim = {c.row.concurrency: c for c in compared[0] if c.row.source_id.startswith("nim-l33-70b-fp8-tp2-c")
           and c.row.prompt_tokens == 5000}  # fmt: skip
    assert nim[100].capacity < 100
    assert nim[100].estimate_tokens_per_s == nim[250].estimate_tokens_per_s
    assert nim[1].estimate_tokens_per_s < nim[25].estimate_tokens_per_s < nim[100].estimate_tokens_per_s


def test_past_the_kv_cache_the_queue_adds_its_wait_to_the_ttft(compared):
    """NIM at 150 and 250 in flight on a replica that holds 77: 73 and 173 wait. A running request takes
    S = 77 × 500 / 811 tokens a second ≈ 47.5 s, so the wait is S × queued / 77: the TTFT estimate grows by
    S × 100 / 77 from 150 to 250 in flight (measured: 34.8 s → 88.6 s, +53.8 s)."""
    nim = {c.row.concurrency: c for c in compared[0] if c.row.source_id.startswith("nim-l33-70b-fp8-tp2-c")
           and c.row.prompt_tokens == 5000}  # fmt: skip
    assert (nim[150].queued, nim[250].queued, nim[50].queued) == (73, 173, 0)
    running_s = 77 * 500 / nim[250].estimate_tokens_per_s
    growth_s = (nim[250].estimate_ttft_ms - nim[150].estimate_ttft_ms) / 1e3
    assert growth_s == pytest.approx(running_s * 100 / 77)
    assert 1 < nim[250].estimate_ttft_ms / nim[250].row.measured_ttft_ms < 1.5


def test_a_bad_table_is_a_typed_error():
    with pytest.raises(CatalogueError, match="lacks the columns"):
        parse_throughput("source_id,engine\nx,vllm\n")
    head = ("source_id,engine,model,quant,kv_dtype,gpu,n_gpus,tp,concurrency,prompt_tokens,answer_tokens,"
            "measured_output_tokens_per_s,measured_tpot_ms\n")  # fmt: skip
    with pytest.raises(CatalogueError, match="line 2"):
        parse_throughput(head + "x,vllm,m,FP8,auto,H200,eight,8,1,1,1,1.0,\n")
