"""A serving workload: how many users or requests, how long their prompts and answers, and the latency they expect.

Each field is a setting declared once (:func:`explorer.engines.setting.setting`): its range, its command-line
option and its help come from the declaration, so ``explorer plan``, ``explorer size`` and the JSON read the
same values and refuse the same ones. Sizing (:mod:`explorer.speed.load`, :mod:`explorer.plan.size`) reads it.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any

from explorer.engines.setting import declared_settings, setting
from explorer.errors import PlanError
from explorer.limits import MAX_CONCURRENCY, MAX_CONTEXT_TOKENS

__all__ = ["DECILES", "MAX_LENGTH_ROWS", "MAX_RATE", "MAX_SECONDS", "Lengths", "Workload", "parse_lengths"]

#: the most requests a second a workload may ask for
MAX_RATE = 1e7
#: the longest latency target, seconds (a day)
MAX_SECONDS = 86_400.0
#: the most rows a lengths CSV may hold
MAX_LENGTH_ROWS = 1_000_000
#: lengths a distribution is kept as: the middles of ten equal shares of the requests (5th, 15th … 95th percentile)
DECILES = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """What a deployment must serve.

    Attributes:
        users: users with a request in flight at once (a closed loop: each sends its next request when its
            answer ends); None with ``rate``.
        rate: requests a second arriving (an open loop); None with ``users``.
        prompt_tokens: tokens of a prompt (the mean).
        answer_tokens: tokens of an answer (the mean).
        prefix_share: the share of a prompt found in the prefix cache (not prefilled again), 0 to 0.99.
        ttft_s: the time to first token a request may take (the mean; None: no target).
        tpot_s: the time per output token a user may see (None: no target).
        user_tokens_per_s: the answer speed a user must see, tokens a second (a TPOT of 1 / it; the stricter
            of the two targets holds).
        ttft_percentile: ``p50``: the TTFT target holds for the mean prompt; ``p90``: for the prompt 90 % of
            requests stay within (``prompt_p90_tokens``, from a lengths CSV; else the mean).
        tpot_percentile: ``p50``: the TPOT target holds for the mean user; ``p90``: for 90 % of them
            (:mod:`explorer.speed.load`: the prefill chunks interleaved with a user's decode steps vary).
        prompt_p90_tokens: the 90th percentile of the prompt lengths (None: no distribution given).
        prompt_deciles: ten prompt lengths of equal weight that stand for the distribution (:data:`DECILES`;
            None: every prompt is the mean); the chunks a prompt is prefilled in vary with them.
        answer_deciles: the same for the answers (None: every answer is the mean); a short answer meets fewer
            steps, so its TPOT spreads more.
    """

    # fmt: off
    users: int | None = setting(
        kind="int", optional=True, low=1, high=MAX_CONCURRENCY, cli=("--users",), launch="none",
        help="users with a request in flight at once (or --rate)")
    rate: float | None = setting(
        kind="float", optional=True, low=0, low_open=True, high=MAX_RATE, cli=("--rate",), launch="none",
        help="requests a second (or --users)")
    prompt_tokens: int = setting(
        2000, kind="int", low=1, high=MAX_CONTEXT_TOKENS, cli=("--prompt",), launch="none",
        help="prompt tokens a request (the mean)")
    answer_tokens: int = setting(
        500, kind="int", low=1, high=MAX_CONTEXT_TOKENS, cli=("--answer",), launch="none",
        help="answer tokens a request (the mean)")
    prefix_share: float = setting(
        0.0, kind="float", low=0, high=0.99, cli=("--prefix-cache",), launch="none",
        help="share of a prompt the prefix cache already holds")
    ttft_s: float | None = setting(
        kind="seconds", optional=True, low=0, low_open=True, high=MAX_SECONDS, cli=("--ttft",), launch="none",
        help="time to first token target, the mean (1s, 500ms)")
    tpot_s: float | None = setting(
        kind="seconds", optional=True, low=0, low_open=True, high=MAX_SECONDS, cli=("--tpot",), launch="none",
        help="time per output token target (50ms)")
    user_tokens_per_s: float | None = setting(
        kind="float", optional=True, low=0, low_open=True, high=1e6, cli=("--user-tps",), launch="none",
        help="answer tokens a second each user must see (a TPOT target of 1 / it)")
    ttft_percentile: str = setting(
        "p50", kind="choice", choices=("p50", "p90"), cli=("--ttft-percentile",), launch="none",
        help="the TTFT target holds for the mean prompt (p50) or the 90th-percentile one (p90, with --lengths)")
    tpot_percentile: str = setting(
        "p50", kind="choice", choices=("p50", "p90"), cli=("--tpot-percentile",), launch="none",
        help="the TPOT target holds for the mean user (p50) or for nine users in ten (p90: the prefill chunks a "
        "user's answer meets vary)")
    # fmt: on
    prompt_p90_tokens: int | None = None
    prompt_deciles: tuple[int, ...] | None = None
    answer_deciles: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        """Every setting a value of its declaration, and users or a rate (not both), or PlanError naming it."""
        for declared in declared_settings(self):
            declared.check(getattr(self, declared.field))
        if self.users is not None and self.rate is not None:
            raise PlanError("a workload is users (--users) or a request rate (--rate), not both; give one")
        p90 = self.prompt_p90_tokens
        if p90 is not None and not _whole_tokens(p90):
            raise PlanError(f"prompt_p90_tokens is {p90!r}; it must be a whole number from 1 to {MAX_CONTEXT_TOKENS:,}")
        for name in ("prompt_deciles", "answer_deciles"):
            _check_deciles(name, getattr(self, name))

    @property
    def given(self) -> bool:
        """Users or a rate was asked (otherwise there is nothing to size)."""
        return self.users is not None or self.rate is not None

    @property
    def tpot_target_s(self) -> float | None:
        """The time per output token a user may see: the stricter of ``tpot_s`` and 1 / ``user_tokens_per_s``."""
        targets = [t for t in (self.tpot_s, 1 / self.user_tokens_per_s if self.user_tokens_per_s else None) if t]
        return min(targets) if targets else None

    @property
    def prefill_tokens(self) -> int:
        """Prompt tokens a request prefills: those the prefix cache does not hold (at least one)."""
        return max(1, round(self.prompt_tokens * (1 - self.prefix_share)))

    @property
    def ttft_prefill_tokens(self) -> int:
        """The prompt tokens the TTFT target is checked at: the p90 prompt's (``p90`` with a distribution), else
        the mean's, less the prefix cache's share."""
        prompt = self.prompt_p90_tokens if self.ttft_percentile == "p90" and self.prompt_p90_tokens else None
        return self.prefill_tokens if prompt is None else max(1, round(prompt * (1 - self.prefix_share)))

    @property
    def prefill_deciles(self) -> tuple[int, ...]:
        """The prompt tokens each tenth of the requests prefills (the mean's alone without a distribution)."""
        if self.prompt_deciles is None:
            return (self.prefill_tokens,)
        return tuple(max(1, round(p * (1 - self.prefix_share))) for p in self.prompt_deciles)

    @property
    def context_tokens(self) -> int:
        """The context a sequence reaches: prompt + answer (the KV cache is planned for it)."""
        return self.prompt_tokens + self.answer_tokens

    @property
    def decode_context_tokens(self) -> int:
        """The mean context while a sequence decodes: prompt + half the answer."""
        return self.prompt_tokens + self.answer_tokens // 2

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (seconds as given; None where not asked)."""
        return {
            "users": self.users,
            "rate": self.rate,
            "prompt_tokens": self.prompt_tokens,
            "answer_tokens": self.answer_tokens,
            "prefix_share": self.prefix_share,
            "ttft_s": self.ttft_s,
            "ttft_percentile": self.ttft_percentile,
            "prompt_p90_tokens": self.prompt_p90_tokens,
            "prompt_deciles": None if self.prompt_deciles is None else list(self.prompt_deciles),
            "answer_deciles": None if self.answer_deciles is None else list(self.answer_deciles),
            "tpot_s": self.tpot_target_s,
            "tpot_percentile": self.tpot_percentile,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Lengths:
    """Request lengths read from a CSV of real requests.

    Attributes:
        count: requests read.
        prompt_mean_tokens: the mean prompt, rounded.
        answer_mean_tokens: the mean answer, rounded.
        prompt_p90_tokens: the prompt 90 % of the requests stay within (nearest rank).
        prompt_deciles: the 5th, 15th … 95th percentile prompts (nearest rank): ten of equal weight.
        answer_deciles: the same for the answers.
    """

    count: int
    prompt_mean_tokens: int
    answer_mean_tokens: int
    prompt_p90_tokens: int
    prompt_deciles: tuple[int, ...]
    answer_deciles: tuple[int, ...]


def parse_lengths(text: str, *, source: str = "lengths CSV") -> Lengths:
    """The lengths of a CSV with ``prompt_tokens`` and ``answer_tokens`` columns, one request a row.

    Nearest-rank p90: the ⌈0.9 n⌉-th smallest prompt (10 prompts of 100 … 1,000 tokens: the 9th, 900); the
    deciles likewise at 5 %, 15 % … 95 % (there: 100, 200 … 1,000).

    Raises:
        PlanError: a column is missing, a length is not a whole number from 1 to the context limit, there are
            no rows, or more than :data:`MAX_LENGTH_ROWS`.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in ("prompt_tokens", "answer_tokens") if c not in (reader.fieldnames or ())]
    if missing:
        raise PlanError(f"{source} lacks the columns {', '.join(missing)}", hint="columns: prompt_tokens,answer_tokens")
    prompts, answers = [], []
    try:
        for line, row in enumerate(reader, start=2):
            if len(prompts) >= MAX_LENGTH_ROWS:
                raise PlanError(f"{source} has more than {MAX_LENGTH_ROWS:,} rows; give a sample")
            prompts.append(_length(row.get("prompt_tokens"), source, line))
            answers.append(_length(row.get("answer_tokens"), source, line))
    except csv.Error as e:
        raise PlanError(f"{source} is not a CSV table: {e}") from None
    if not prompts:
        raise PlanError(f"{source} has no rows", hint="one request a row: prompt_tokens,answer_tokens")
    ranked = sorted(prompts)
    return Lengths(
        count=len(prompts),
        prompt_mean_tokens=round(sum(prompts) / len(prompts)),
        answer_mean_tokens=max(1, round(sum(answers) / len(answers))),
        prompt_p90_tokens=_nearest_rank(ranked, 0.9),
        prompt_deciles=_deciles(ranked),
        answer_deciles=_deciles(sorted(answers)),
    )


def _nearest_rank(ranked: list[int], q: float) -> int:
    """The ⌈q n⌉-th smallest (at least the first)."""
    return ranked[max(1, math.ceil(q * len(ranked))) - 1]


def _deciles(ranked: list[int]) -> tuple[int, ...]:
    """The nearest-rank 5th, 15th … 95th percentiles: ten lengths of equal weight."""
    return tuple(_nearest_rank(ranked, (i + 0.5) / DECILES) for i in range(DECILES))


def _check_deciles(name: str, deciles: tuple[int, ...] | None) -> None:
    """None, or :data:`DECILES` whole numbers of tokens in range; else PlanError naming the field."""
    if deciles is None:
        return
    lengths = isinstance(deciles, tuple) and len(deciles) == DECILES
    if not lengths or any(not _whole_tokens(v) for v in deciles):
        raise PlanError(f"{name} is {deciles!r}; it must be {DECILES} whole numbers of tokens from 1 to "
                        f"{MAX_CONTEXT_TOKENS:,}")  # fmt: skip


def _whole_tokens(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONTEXT_TOKENS


def _length(text: str | None, source: str, line: int) -> int:
    try:
        value = int((text or "").strip())
    except ValueError:
        raise PlanError(f"{source} line {line}: {text!r} is not a whole number of tokens") from None
    if not 1 <= value <= MAX_CONTEXT_TOKENS:
        raise PlanError(f"{source} line {line}: {value:,} tokens is outside 1 to {MAX_CONTEXT_TOKENS:,}")
    return value
