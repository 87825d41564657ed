"""largest_fitting: the interpolating search gives what brute force gives, in fewer probes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.engines.fit_search import largest_fitting

#: a room and capped linear terms (full and sliding-window layers), drawn for :func:`_capped_slack`
SLACKS = {
    "room": st.integers(-(10**6), 10**9),
    "slopes": st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
    "caps": st.lists(st.integers(1, 5000), min_size=1, max_size=4),
    "hi": st.integers(1, 5000),
}


def _capped_slack(room: int, slopes: list[int], caps: list[int]):
    """The room left at ``k``: ``room`` minus capped linear terms, like full and sliding-window layers."""
    return lambda k: room - sum(s * min(k, c) for s, c in zip(slopes, caps, strict=False))  # lists of any lengths


@settings(max_examples=300, deadline=None)
@given(**SLACKS)
def test_matches_brute_force_on_monotone_slack(room, slopes, caps, hi):
    slack = _capped_slack(room, slopes, caps)
    brute = max((k for k in range(1, hi + 1) if slack(k) >= 0), default=None)
    assert largest_fitting(slack, 1, hi) == brute


def test_few_probes_on_linear_memory():
    calls = []

    def slack(k: int) -> int:
        calls.append(k)
        return 40_000 * 131_072 - k * 256 * 131_072  # 40k tokens of KV at 256-token steps

    assert largest_fitting(slack, 1, 512) == 156
    assert len(calls) <= 5


@settings(max_examples=300, deadline=None)
@given(**SLACKS, guess=st.integers(-10, 5010))
def test_a_guess_never_changes_the_answer(room, slopes, caps, hi, guess):
    slack = _capped_slack(room, slopes, caps)
    assert largest_fitting(slack, 1, hi, guess=guess) == largest_fitting(slack, 1, hi)


def test_a_right_guess_settles_it_in_two_probes():
    calls = []

    def slack(k: int) -> int:
        calls.append(k)
        return 40_000 * 131_072 - k * 256 * 131_072  # as above: 156 steps fit

    assert largest_fitting(slack, 1, 512, guess=156) == 156
    assert calls == [1, 157, 156]  # lo (a caller's known allocation), the step above the guess, the guess
    calls.clear()
    assert largest_fitting(slack, 1, 512, guess=150) == 156  # too low: the search goes on above it
