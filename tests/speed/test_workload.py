"""The workload (explorer/speed/workload.py): declared once, read the same by the record and the command line."""

from __future__ import annotations

import argparse

import pytest

from explorer.cli.workload_args import add_workload_arguments, workload_from_args
from explorer.errors import PlanError
from explorer.speed.workload import Workload, parse_lengths


def parsed(*argv: str) -> Workload:
    p = argparse.ArgumentParser()
    add_workload_arguments(p)
    return workload_from_args(p.parse_args(list(argv)))


def test_the_command_line_reads_durations_and_counts():
    w = parsed("--users", "200", "--prompt", "2000", "--answer", "500", "--ttft", "1s", "--tpot", "50ms")
    assert (w.users, w.rate, w.prompt_tokens, w.answer_tokens) == (200, None, 2000, 500)
    assert w.ttft_s == 1.0 and w.tpot_s == pytest.approx(0.050)
    assert parsed("--rate", "5", "--ttft", "0.25").ttft_s == 0.25  # a bare number is seconds
    assert not parsed().given and parsed("--rate", "5").given


@pytest.mark.parametrize(
    "argv",
    [("--ttft", "fast"), ("--tpot", "0ms"), ("--users", "0"), ("--rate", "-1"), ("--prefix-cache", "1"),
     ("--tpot-percentile", "p99")],
)  # fmt: skip
def test_the_command_line_refuses_what_the_record_refuses(argv):
    with pytest.raises(SystemExit):
        parsed(*argv)


def test_users_or_a_rate_not_both():
    with pytest.raises(PlanError, match="not both"):
        Workload(users=10, rate=1.0)
    with pytest.raises(PlanError, match="users"):
        Workload(users=0)


def test_targets_and_lengths():
    """TPOT 50 ms and 25 tokens a second a user (40 ms): the stricter, 40 ms, holds. A prefix cache holding
    30 % of a 2,000-token prompt leaves 1,400 to prefill; the KV cache is planned for 2,500, decode runs
    at 2,250 on average."""
    w = Workload(users=1, prompt_tokens=2000, answer_tokens=500, tpot_s=0.050, user_tokens_per_s=25, prefix_share=0.3)
    assert w.tpot_target_s == pytest.approx(0.040)
    assert (w.prefill_tokens, w.context_tokens, w.decode_context_tokens) == (1400, 2500, 2250)
    assert Workload(users=1).tpot_target_s is None


def test_lengths_from_a_csv_means_and_the_p90_prompt():
    """Prompts 100, 200, … 1,000 (mean 550), answers 10 … 100 (mean 55): the nearest-rank p90 is the
    ⌈0.9 × 10⌉ = 9th smallest prompt, 900."""
    text = "prompt_tokens,answer_tokens\n" + "".join(f"{100 * i},{10 * i}\n" for i in range(10, 0, -1))
    lengths = parse_lengths(text)
    assert (lengths.count, lengths.prompt_mean_tokens, lengths.answer_mean_tokens) == (10, 550, 55)
    assert lengths.prompt_p90_tokens == 900


def test_lengths_keep_ten_deciles_of_each():
    """20 requests, prompts 50, 100 … 1,000 and answers 5 … 100: the nearest-rank 5th percentile is the
    ⌈0.05 × 20⌉ = 1st, the 15th the ⌈3⌉ = 3rd … the 95th the 19th: prompts 50, 150 … 950, answers 5, 15 … 95.
    The prefix cache's share comes off each (30 %: 35, 105 …)."""
    text = "prompt_tokens,answer_tokens\n" + "".join(f"{50 * i},{5 * i}\n" for i in range(1, 21))
    lengths = parse_lengths(text)
    assert lengths.prompt_deciles == tuple(range(50, 1000, 100))
    assert lengths.answer_deciles == tuple(range(5, 100, 10))
    w = Workload(users=1, prompt_deciles=lengths.prompt_deciles, answer_deciles=lengths.answer_deciles,
                 prefix_share=0.3)  # fmt: skip
    assert w.prefill_deciles[:2] == (35, 105) and Workload(users=1, prompt_tokens=900).prefill_deciles == (900,)
    assert w.to_dict()["answer_deciles"] == list(range(5, 100, 10))
    with pytest.raises(PlanError, match="prompt_deciles"):
        Workload(users=1, prompt_deciles=(100, 200))
    with pytest.raises(PlanError, match="answer_deciles"):
        Workload(users=1, answer_deciles=(0,) * 10)


@pytest.mark.parametrize(
    "text, message",
    [
        ("prompt,answer\n1,2\n", "lacks the columns"),
        ("prompt_tokens,answer_tokens\n", "no rows"),
        ("prompt_tokens,answer_tokens\n12,many\n", "line 2: 'many' is not a whole number"),
        ("prompt_tokens,answer_tokens\n0,5\n", "line 2: 0 tokens is outside"),
    ],
)
def test_a_bad_lengths_csv_is_a_typed_error(text, message):
    with pytest.raises(PlanError, match=message):
        parse_lengths(text)


def test_the_ttft_is_checked_at_the_p90_prompt_only_when_asked():
    """A 30 % prefix share of a 3,000-token p90 prompt leaves 2,100 to prefill; p50 keeps the mean's 1,400."""
    w = Workload(users=1, prompt_tokens=2000, prefix_share=0.3, prompt_p90_tokens=3000, ttft_percentile="p90")
    assert (w.prefill_tokens, w.ttft_prefill_tokens) == (1400, 2100)
    assert Workload(users=1, prompt_tokens=2000, prefix_share=0.3, prompt_p90_tokens=3000).ttft_prefill_tokens == 1400


def test_the_command_line_reads_a_lengths_file(tmp_path):
    path = tmp_path / "lengths.csv"
    path.write_text("prompt_tokens,answer_tokens\n1000,100\n3000,300\n")
    w = parsed("--users", "5", "--lengths", str(path), "--ttft", "1s", "--ttft-percentile", "p90")
    assert (w.prompt_tokens, w.answer_tokens, w.prompt_p90_tokens, w.ttft_percentile) == (2000, 200, 3000, "p90")
    assert w.prompt_deciles == (1000,) * 5 + (3000,) * 5 and w.answer_deciles == (100,) * 5 + (300,) * 5
    with pytest.raises(PlanError, match="cannot read the lengths CSV"):
        parsed("--users", "5", "--lengths", str(tmp_path / "missing.csv"))


def test_the_tpot_percentile_is_a_declared_setting():
    """``--tpot-percentile p90`` reaches the record and its JSON; the record refuses what the option refuses."""
    w = parsed("--users", "5", "--tpot", "50ms", "--tpot-percentile", "p90")
    assert w.tpot_percentile == "p90" and w.to_dict()["tpot_percentile"] == "p90"
    assert parsed("--users", "5").tpot_percentile == "p50"
    with pytest.raises(PlanError, match="tpot_percentile"):
        Workload(users=1, tpot_percentile="p99")
