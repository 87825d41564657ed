"""The ``explorer`` command line: parse arguments, call the library, print.

Each subcommand lives in its own module, ``explorer.cli.<name>``, with
``add_arguments(parser)`` and ``run(args)``. The table :data:`COMMANDS` below
is all the top-level parser knows of them (name, one-line help, description),
so ``explorer --help`` imports no command: a command's module is imported
only when its parser is used (its arguments are added then) and run.
Library errors (:class:`explorer.errors.ExplorerError`) become a one-line
message on stderr and exit status 2; nothing here computes a figure.

Everything a command prints passes through :func:`explorer.safe_text.safe_text`
on its way out (:class:`SafeStream`): a token-shaped string is redacted, and a
control character read from a file (an ANSI escape, a right-to-left override
in a GGUF's ``general.architecture``) is written as a visible escape, never
sent to the terminal. Standard error is redacted too (its progress bars keep
their carriage returns).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from explorer import __version__
from explorer.errors import ExplorerError
from explorer.safe_text import redact, safe_text


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """A subcommand as the top-level parser lists it.

    Attributes:
        name: the word typed, and the module ``explorer.cli.<name>`` that implements it.
        help: one line for ``explorer --help``.
        description: the paragraph atop ``explorer <name> --help``, or None.
    """

    name: str
    help: str
    description: str | None = None

    @property
    def module(self) -> str:
        return f"explorer.cli.{self.name}"


#: the subcommands, in the order ``explorer --help`` lists them
COMMANDS: tuple[Command, ...] = (
    Command(
        name="shape",
        help="show a model's shape, parameters and KV cache per token",
        description="Show a model's shape: parameters, layers, attention, experts, context limit, "
        "weight bytes and KV cache bytes per token.",
    ),
    Command(
        name="plan",
        help="list every way a model can run on a cluster, best first",
        description="List every way a model can run on a cluster with vLLM, SGLang and llama.cpp, "
        "best first, with what each card holds and why other ways do not work.",
    ),
    Command(
        name="size",
        help="size a cluster for a workload: card classes and counts, cheapest an hour first",
        description="Size for a workload (--users or --rate, --prompt, --answer, --ttft, --tpot): every priced "
        "card class and count that serves it, cheapest an hour first, with the way each runs, its replicas and "
        "batch, and what binds (the KV cache, the latency targets); a workload no class meets says by how much.",
    ),
    Command(
        name="fit",
        help="list every known model with its best option on a cluster",
        description="Hardware first: every model explorer knows (the shipped snapshot, and the local cache "
        "read-only) with its best option on the cluster: tier, engine, precision, longest context, tok/s, "
        "replicas; models that do not fit come last with their best suggestion.",
    ),
    Command(
        name="place",
        help="place several models on one fleet (swap groups, replicas, manual plans)",
        description="Place several models on a cluster's cards: co-location, splits, swap groups for "
        "models that never run in the same phase, replicas, and checks of a manual plan.",
    ),
    Command(
        name="check",
        help="put an engine's start-up log beside explorer's plan of it (and calibrate from it)",
        description="Read a vLLM, SGLang or llama.cpp start-up log, plan the same setup, and show the "
        "engine's figures beside explorer's, part by part; --calibrate stores what it measured.",
    ),
    Command(
        name="cache",
        help="show, clear or export the local cache of Hub facts and calibrations",
        description="The local DuckDB cache of Hub listings, configs and weight headers.",
    ),
    Command(
        name="snapshot",
        help="list or refresh the shipped snapshot of popular models",
        description="The snapshot lets explorer plan popular models with no network.",
    ),
    Command(name="bench", help="time plan() on 8-, 64- and 1,000-GPU clusters"),
)


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser that gets its arguments from the command's module on first use.

    ``command`` names the module; parsing with this parser, or printing its
    help or usage, imports the module and calls its ``add_arguments(self)``
    once. Parsers made below it (a command's actions) are complete at once.
    """

    def __init__(self, *args, command: Command | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._command = command

    def _add_command_arguments(self) -> None:
        if self._command is not None:
            command, self._command = self._command, None
            importlib.import_module(command.module).add_arguments(self)

    def parse_known_args(self, args=None, namespace=None):
        self._add_command_arguments()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._add_command_arguments()
        return super().format_help()

    def format_usage(self) -> str:
        self._add_command_arguments()
        return super().format_usage()


class SafeStream(io.TextIOBase):
    """A text stream that redacts tokens (and, with ``escape``, escapes control characters) in what is written.

    Newlines and tabs pass; everything else goes to the wrapped stream. Each
    ``write`` is cleaned whole, and ``print`` writes a value in one call, so a
    token in one value is always caught.
    """

    def __init__(self, stream: TextIO, *, escape: bool) -> None:
        self._stream = stream
        self._escape = escape

    def write(self, text: str) -> int:
        self._stream.write(safe_text(text, multiline=True) if self._escape else redact(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")


@contextmanager
def safe_output() -> Iterator[None]:
    """Standard output escaped and redacted, standard error redacted, for the block."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out, escape=True), SafeStream(err, escape=False)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; each subcommand's own arguments are added when it is used."""
    parser = argparse.ArgumentParser(
        prog="explorer",
        description="Will it fit? Plan where and how a large language model can be served.",
    )
    parser.add_argument("--version", action="version", version=f"explorer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    for c in COMMANDS:
        sub.add_parser(c.name, help=c.help, description=c.description, command=c)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 1
    run = importlib.import_module(f"explorer.cli.{args.command}").run
    try:
        with safe_output():
            return int(run(args) or 0)
    except ExplorerError as err:
        print(f"explorer {args.command}: {safe_text(err, multiline=True)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head, less...
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"explorer {args.command}: interrupted", file=sys.stderr)
        return 130


def console() -> None:
    """The ``explorer`` program (the console script, ``python -m explorer``): :func:`main`, then the end of the
    process without the interpreter's teardown.

    The teardown (every module cleared, a last garbage collection) took 40 to 90 ms of CPU after a cold
    ``explorer shape ORG/NAME``, a sixth of the command, and serves nothing in a process about to end. What a
    normal end does for the user is done first: the atexit handlers run and the output is flushed. While a
    thread that is not a daemon still runs (its owner expects it to finish), the process ends as usual.
    """
    status = main()
    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        raise SystemExit(status)
    atexit._run_exitfuncs()  # what the interpreter would run at exit (logging's flush, tqdm's...)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # piped into head, or closed after a broken pipe: as main() says, not an error
            pass
    os._exit(status)
