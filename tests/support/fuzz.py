"""The fuzz suite's shared pieces: how many cases, the hostile values, and what every outcome must satisfy.

Three suites use them: GGUF values (``tests/gguf/test_fuzz_values.py``),
config.json mutants (``tests/model/test_fuzz_configs.py``) and CLI arguments
(``tests/cli/test_fuzz_args.py``). Each runs ``cases(default)`` cases from a
seeded ``random.Random``: a few hundred to a few thousand by default (seconds),
``EXPLORER_FUZZ_EXAMPLES`` more in ``.ci/run``; ``EXPLORER_FUZZ_SEED`` picks
the seed (a failure names it, and the case, so it can be replayed).

An outcome passes when it is a typed error (:class:`explorer.errors.ExplorerError`)
or a result whose every figure is a finite number ≥ 0, within the time bound.
PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import math
import os
import random
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from explorer.errors import ExplorerError

#: the seed of every suite's random.Random
SEED = int(os.environ.get("EXPLORER_FUZZ_SEED", "14"))
#: the longest one case may take (seconds); hostile counts must be refused long before
CASE_SECONDS = 5.0
#: the most the process's peak memory may grow over a suite
GROWTH_BYTES = 512 * 1024 * 1024

#: integers at and around every boundary a count can cross
INTS = (
    0, 1, 2, 3, -1, -2, 7, 64, 4095, 4096, 4097, 10**5, 10**7, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
    2**40, 2**53 + 1, 2**63 - 1, -(2**31), -(2**63),
)  # fmt: skip
#: floats that are not numbers, or at the edges of the ones that are
FLOATS = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-300, 0.5, 1.5, -1.5, 1e38, 3.4e38, 1e308, -1e308)
#: strings: empty, huge, control characters and bidirectional overrides, other architectures
STRINGS = (
    "", " ", "x" * 4096, "\x1b[31mred\x1b[0m", "lla\u202ema", "\x00\x07\x08", "rwkv6", "mamba", "gemma3",
    "deepseek2", "qwen3moe", "granitehybrid", "no-such-arch", "hf_FUZZtokenABCDEFGHIJKLMNOPQRSTUV",
)  # fmt: skip


def cases(default: int) -> int:
    """How many cases a suite runs: ``EXPLORER_FUZZ_EXAMPLES`` when set, else ``default``."""
    return int(os.environ.get("EXPLORER_FUZZ_EXAMPLES") or default)


def rng(salt: str) -> random.Random:
    """A generator seeded by SEED and the suite's name (each suite its own stream)."""
    return random.Random(f"{SEED}:{salt}")


def bad_figures(value: Any, where: str = "") -> list[str]:
    """Every number inside ``value`` (dicts, lists, tuples) that is NaN, infinite or negative, with its path."""
    out: list[str] = []
    stack = [(where, value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}", x) for k, x in v.items())
        elif isinstance(v, list | tuple):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
        elif isinstance(v, int | float) and not isinstance(v, bool) and (not math.isfinite(v) or v < 0):
            out.append(f"{path} = {v!r}")
    return out


@dataclass
class Tally:
    """What a suite saw: cases run, typed errors by class, results, the slowest case.

    Attributes:
        failures: (case description, what went wrong) for every case that broke a rule.
    """

    name: str
    runs: int = 0
    results: int = 0
    typed: dict[str, int] = field(default_factory=dict)
    slowest_s: float = 0.0
    slowest: str = ""
    failures: list[tuple[str, str]] = field(default_factory=list)

    def run(self, describe: str, case: Callable[[], Any], check: Callable[[Any], list[str]]) -> None:
        """Run one case: a typed error or a result ``check`` finds nothing wrong with, within CASE_SECONDS."""
        self.runs += 1
        t0 = time.perf_counter()
        try:
            problems = check(case())
            self.results += 1
        except ExplorerError as e:
            self.typed[type(e).__name__] = self.typed.get(type(e).__name__, 0) + 1
            problems = []
        except Exception as e:
            problems = [f"untyped {type(e).__name__}: {str(e)[:300]}"]
        elapsed = time.perf_counter() - t0
        if elapsed > self.slowest_s:
            self.slowest_s, self.slowest = elapsed, describe
        if elapsed > CASE_SECONDS:
            problems.append(f"took {elapsed:.2f} s (bound {CASE_SECONDS} s)")
        if problems:
            self.failures.append((describe, "; ".join(problems)))

    def report(self) -> str:
        head = (
            f"{self.name}: {self.runs} cases (seed {SEED}), {self.results} results, "
            f"typed errors {dict(sorted(self.typed.items()))}, slowest {self.slowest_s * 1000:.0f} ms"
        )
        shown = "\n".join(f"  {d}\n    -> {p}" for d, p in self.failures[:10])
        kinds: dict[str, int] = {}
        for _, problem in self.failures:
            kind = (
                problem.split(":")[0]
                if problem.startswith("untyped")
                else "slow"
                if "took" in problem
                else "absurd figure"
            )
            kinds[kind] = kinds.get(kind, 0) + 1
        return head + (
            f"\n{len(self.failures)} failures {dict(sorted(kinds.items()))}:\n{shown}" if self.failures else ""
        )


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextmanager
def bounded_memory() -> Iterator[None]:
    """Fail when the process's peak memory grows by more than GROWTH_BYTES over the block."""
    before = peak_rss_bytes()
    yield
    grown = peak_rss_bytes() - before
    assert grown <= GROWTH_BYTES, f"peak memory grew by {grown / 2**20:,.0f} MiB (bound {GROWTH_BYTES / 2**20:,.0f})"
