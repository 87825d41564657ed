"""A serving workload: how many users or requests, how long their prompts and answers, and the latency they expect.

Each field is a setting declared once (:func:`explorer.engines.setting.setting`): its range, its command-line
option and its help come from the declaration, so ``explorer plan``, ``explorer size`` and the JSON read the
same values and refuse the same ones. Sizing (:mod:`explorer.speed.load`, :mod:`explorer.plan.size`) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from explorer.engines.setting import declared_settings, setting
from explorer.errors import PlanError
from explorer.limits import MAX_CONCURRENCY, MAX_CONTEXT_TOKENS

__all__ = ["MAX_RATE", "MAX_SECONDS", "Workload"]

#: the most requests a second a workload may ask for
MAX_RATE = 1e7
#: the longest latency target, seconds (a day)
MAX_SECONDS = 86_400.0


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
    # fmt: on

    def __post_init__(self) -> None:
        """Every setting a value of its declaration, and users or a rate (not both), or PlanError naming it."""
        for declared in declared_settings(self):
            declared.check(getattr(self, declared.field))
        if self.users is not None and self.rate is not None:
            raise PlanError("a workload is users (--users) or a request rate (--rate), not both; give one")

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
            "tpot_s": self.tpot_target_s,
        }
