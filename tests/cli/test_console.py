"""explorer.cli.console: the program ends without the interpreter's teardown, and loses nothing by it.

Each case runs a real interpreter whose ``main`` is replaced by a small program (the explorer under test
first on its path), so that what ``console`` must keep (the exit status, the whole output, the atexit
handlers, a thread that is still working) is seen from outside, as a user's shell sees it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from support.corpus import ROOT


def _console(program: str, tmp_path) -> subprocess.CompletedProcess:
    """Run ``console()`` with ``main`` replaced by ``program``'s ``main`` (it may use ``OUT``, a path)."""
    code = f"""
import atexit, sys, threading, time
OUT = {str(tmp_path / "out.txt")!r}
{program}
import explorer.cli as cli
cli.main = main
cli.console()
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_status_the_whole_output_and_the_atexit_handlers_are_kept(tmp_path):
    program = """
def main():
    atexit.register(lambda: open(OUT, "w").write("atexit ran"))
    sys.stdout.write("x" * 200_000)  # more than any pipe buffer: the rest waits in Python's buffer
    print("to stderr", file=sys.stderr)
    return 3
"""
    done = _console(program, tmp_path)
    assert done.returncode == 3 and len(done.stdout) == 200_000 and done.stderr == "to stderr\n"
    assert (tmp_path / "out.txt").read_text() == "atexit ran"


def test_a_thread_still_working_ends_before_the_process(tmp_path):
    program = """
def main():
    threading.Thread(target=lambda: (time.sleep(0.3), open(OUT, "w").write("finished"))).start()
    return 0
"""
    done = _console(program, tmp_path)
    assert done.returncode == 0 and (tmp_path / "out.txt").read_text() == "finished"
