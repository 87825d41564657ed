"""How long reading an engine log takes as the log grows: the time per MB stays flat (a benchmark, not a test).

Issue 25: the readers searched ``".*" + pattern + ".*"`` over the whole text, with patterns that hold ``.*``
themselves, so a 6 KB paste took about 30 s and a 12 KB one 76 s. Each hostile log below is built to make a
backtracking pattern try every position of a long line; each is read at several sizes, and the report
gives seconds per MB, which stays about the same from 64 KB to 1 MB when reading is linear.

Run: ``python -m explorer.bench.logs [--sizes 65536,262144,1048576]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from explorer.engines.logs.read import read_engine_log
from explorer.errors import EngineLogError

__all__ = ["HOSTILE_LOGS", "hostile_log", "main", "seconds_to_read"]

#: (name, one unit of text repeated up to the size): each makes some pattern backtrack without a bound
HOSTILE_LOGS: tuple[tuple[str, str], ...] = (
    ("one line of a refusal's words", "Free memory on device "),
    ("one line of a lazy pattern's literal", "Load weight end. "),
    ("one line without spaces", "x"),
    ("one line of spaces after a key", "file type =" + " " * 63),
    ("32 kB lines of a lazy pattern's literal", ("KV Cache is allocated. " * 1425)[:32_000] + "\n"),
    ("short real-looking lines", "INFO Model loading took 1.5 GiB memory\nKV Cache is allocated. #tokens: 9\n"),
)


def hostile_log(unit: str, size_bytes: int) -> str:
    """``unit`` repeated to ``size_bytes`` characters, then a vLLM line so that the text is a log."""
    return (unit * (size_bytes // len(unit) + 1))[:size_bytes] + "\nAvailable KV cache memory: 1.0 GiB\n"


def seconds_to_read(text: str, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds :func:`read_engine_log` takes on ``text`` (a typed refusal counts as read)."""
    start = clock()
    try:
        read_engine_log(text)
    except EngineLogError:
        pass
    return clock() - start


def main(argv: list[str] | None = None) -> None:
    """Print seconds and seconds per MB (10^6 bytes) for each hostile log at each size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="65536,262144,1048576", help="log sizes in bytes, comma separated")
    sizes = [int(s) for s in parser.parse_args(argv).sizes.split(",")]
    print(f"{'log':<40} {'bytes':>10} {'seconds':>9} {'s per MB':>9}")
    for name, unit in HOSTILE_LOGS:
        for size in sizes:
            took = seconds_to_read(hostile_log(unit, size))
            print(f"{name:<40} {size:>10,} {took:>9.3f} {took / size * 1e6:>9.3f}")


if __name__ == "__main__":
    main()
