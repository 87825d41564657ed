"""The app's expensive calls off the visitor's thread with a deadline (issue 25): the answer, or a typed error
at the deadline while the call runs on in its worker; inline where there are no threads."""

from __future__ import annotations

import threading
import time

import pytest

from explorer.errors import ActionDeadlineError, ExplorerError
from explorer.safe_text import REDACTED, redact, register_secret, secret_scope
from explorer.ui.deadline import ACTION_WORKERS, within_deadline
from explorer.ui.published import audience


def test_a_call_within_its_deadline_returns_its_value_from_a_worker():
    caller = threading.get_ident()
    assert within_deadline(lambda: (6 * 7, threading.get_ident() != caller), what="x", seconds=10) == (42, True)


def test_a_slow_call_ends_in_the_typed_error_at_the_deadline_while_it_runs_on():
    release, finished = threading.Event(), threading.Event()

    def slow():
        release.wait(30)
        finished.set()
        return "late"

    t0 = time.monotonic()
    with pytest.raises(ActionDeadlineError, match=r"^the plan took longer than 0\.2 s, the most this server gives"):
        within_deadline(slow, what="the plan", seconds=0.2)
    waited = time.monotonic() - t0
    # the caller was answered at the deadline, not when the call ended: the call has not ended yet
    assert not finished.is_set() and waited < 30
    release.set()
    assert finished.wait(10)  # it ran on in its worker to its end


def test_while_every_worker_is_held_the_caller_still_answers_at_its_deadline_and_later_calls_run():
    # every worker stuck in a slow call: another visitor's call waits in the queue, is answered at its own
    # deadline (the session is free again), and is cancelled, never run
    release = threading.Event()
    ran = threading.Event()
    for _ in range(ACTION_WORKERS):
        with pytest.raises(ActionDeadlineError):
            within_deadline(lambda: release.wait(30), what="a hog", seconds=0.05)
    with pytest.raises(ActionDeadlineError, match="the slider's plan took longer than 0.2 s"):
        within_deadline(ran.set, what="the slider's plan", seconds=0.2)
    release.set()
    assert within_deadline(lambda: "answered", what="next", seconds=10) == "answered"
    assert not ran.is_set()  # cancelled in the queue


def test_the_calls_own_errors_reach_the_caller_as_they_are():
    def bad():
        raise ExplorerError("the spec does not parse")

    with pytest.raises(ExplorerError, match="^the spec does not parse$"):
        within_deadline(bad, what="x", seconds=10)


def test_the_visitors_secret_scope_goes_with_the_call():
    # the redaction registered in the visitor's action (a context variable) holds in the worker too
    with secret_scope():
        register_secret("hf_visitorsecret123")
        seen = within_deadline(lambda: redact("token hf_visitorsecret123"), what="x", seconds=10)
    assert seen == f"token {REDACTED}"


def test_without_a_deadline_the_call_runs_inline():
    # the WASM page (no threads) and the owner's app
    caller = threading.get_ident()
    assert within_deadline(threading.get_ident, what="x", seconds=None) == caller


@pytest.mark.parametrize(
    ("mode", "browser", "env", "seconds"),
    [
        ("run", False, {}, 30.0),
        ("run", False, {"EXPLORER_ACTION_DEADLINE_S": "2.5"}, 2.5),
        ("run", False, {"EXPLORER_ACTION_DEADLINE_S": "soon"}, 30.0),  # not a number: the default
        ("run", False, {"EXPLORER_ACTION_DEADLINE_S": "0"}, 30.0),  # below 0.1 s: the default
        ("run", False, {"EXPLORER_ACTION_DEADLINE_S": "nan"}, 30.0),
        (None, True, {}, None),  # the WASM page: no threads, inline
        ("edit", False, {"EXPLORER_ACTION_DEADLINE_S": "2"}, None),  # the owner: inline
    ],
)
def test_the_audience_sets_the_deadline(mode, browser, env, seconds):
    assert audience(mode, in_browser=browser, env=env).deadline_s == seconds
