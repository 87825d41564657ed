"""Check a printed launch line against the engine's own argument table (``tests/data/engine_args/``).

A launch line is what a user copies: ``[WHERE: ][VAR=value …] PROGRAM ARGS``. :func:`parse_line` splits it
as a shell would and reads its arguments as the engine's parser does: each option must exist at the pinned
release (vLLM's parser also takes ``--x=value``), a value of the option's type, among its choices, inside its
range; a flag takes no value, nothing is given twice, and options the engine refuses together are not
combined (argparse's mutually exclusive groups, and :data:`CONFLICTS`, the checks the engines make after
parsing). The result is a :class:`Parsed` line, whose options a test compares with what the plan assumed.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from support.corpus import DATA

TABLES = DATA / "engine_args"

#: the program a line starts with → (the engine's table, the words before the arguments)
PROGRAMS = {
    "vllm": ("vllm", ("vllm", "serve")),
    "sglang": ("sglang", ("python", "-m", "sglang.launch_server")),
    "llama-server": ("llamacpp", ("llama-server",)),
    "rpc-server": ("rpc-server", ("rpc-server",)),
}

#: options that the engine refuses together after parsing (engine, option, option, why)
CONFLICTS = (
    # vllm/config/parallel.py (0.26.0): "nnodes > 1 can only be set when distributed executor backend is mp, uni
    # or external_launcher"
    ("vllm", "--nnodes", "--distributed-executor-backend", "nnodes > 1 needs the mp backend, not ray"),
    # llama.cpp common/arg.cpp: the model comes from one place, a file (-m) or a Hub repository (-hf)
    ("llamacpp", "-m", "-hf", "a model file and a Hub repository at once"),
)


@cache
def table(engine: str) -> dict[str, dict[str, Any]]:
    """The engine's options by every name (``rpc-server``: llama.cpp's ``rpc_server_flags``)."""
    if engine == "rpc-server":
        rows = json.loads((TABLES / "llamacpp.json").read_text())["rpc_server_flags"]
    else:
        rows = json.loads((TABLES / f"{engine}.json").read_text())["flags"]
    return {name: row for row in rows for name in row["names"]}


@cache
def exclusive_groups(engine: str) -> list[list[str]]:
    """argparse's mutually exclusive groups of the engine's parser."""
    if engine == "rpc-server":
        return []
    return json.loads((TABLES / f"{engine}.json").read_text())["exclusive_groups"]


@dataclass
class Parsed:
    """A launch line as its engine reads it.

    Attributes:
        where: the ``WHERE:`` prefix (a node, ``each of …``), empty when none.
        env: the environment it sets (``CUDA_VISIBLE_DEVICES``).
        engine: ``vllm``, ``sglang``, ``llamacpp`` or ``rpc-server``.
        positional: arguments that are not options (vLLM's model).
        options: each option's canonical name (its first) → its value (``True`` for a flag).
        problems: what the engine's parser would refuse, or the line lacks.
    """

    where: str = ""
    env: dict[str, str] = field(default_factory=dict)
    engine: str = ""
    positional: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def value(self, name: str) -> Any:
        """The value given for the option of that name (any of its spellings), else None."""
        row = table(self.engine).get(name)
        return self.options.get(row["names"][0]) if row else None


_WHERE = re.compile(r"^(?P<where>[^=\s][^\s]*?|each of .*?\)|.+? GPUs [\d,]+(?: \+ .+? GPUs [\d,]+)*): (?=\S)")


def parse_line(line: str) -> Parsed:
    """Read one launch line (see the module docstring); problems go into ``Parsed.problems``."""
    out = Parsed()
    match = _WHERE.match(line)
    if match and not match.group("where").startswith(("CUDA_", "vllm", "python", "llama", "rpc")):
        out.where, line = match.group("where"), line[match.end() :]
    # a visible placeholder (``<Org/Name converted to a Q4_K_M GGUF (…)>``) is one word the user replaces
    line = re.sub(r"<[^<>]*>", lambda m: shlex.quote(m.group(0)), line)
    try:
        words = shlex.split(line)
    except ValueError as err:
        out.problems.append(f"not a shell line: {err}")
        return out
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        key, _, value = words.pop(0).partition("=")
        out.env[key] = value
    for engine, lead in PROGRAMS.values():
        if tuple(words[: len(lead)]) == lead:
            out.engine = engine
            _read_args(out, words[len(lead) :])
            break
    else:
        out.problems.append(f"unknown program: {' '.join(words[:3])!r}")
        return out
    _check_combinations(out)
    return out


def _read_args(out: Parsed, args: list[str]) -> None:
    options = table(out.engine)
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or re.fullmatch(r"-\d+(\.\d+)?", word):
            out.positional.append(word)
            continue
        name, eq, inline = word.partition("=")
        row = options.get(name)
        if row is None:
            out.problems.append(f"{name}: no such option at the pinned release")
            continue
        canonical = row["names"][0]
        if canonical in out.options:
            out.problems.append(f"{name}: given twice")
        if row["type"] == "flag":
            if eq:
                out.problems.append(f"{name}: a flag takes no value")
            out.options[canonical] = True
            continue
        if row.get("nargs") == "?" and not eq and (i >= len(args) or args[i].startswith("-")):
            out.options[canonical] = True
            continue
        if eq:
            value = inline
        elif i < len(args):
            value = args[i]
            i += 1
        else:
            out.problems.append(f"{name}: a value is missing")
            continue
        problem = value_problem(row, value)
        if problem:
            out.problems.append(f"{name} {value}: {problem}")
        out.options[canonical] = value


def value_problem(row: dict[str, Any], value: str) -> str:
    """Why the engine's parser refuses ``value`` for the option ``row`` (empty: it takes it)."""
    if (value.startswith("<") and value.endswith(">")) or re.fullmatch(r"<[^>]+>:\d+", value):
        return ""  # a visible placeholder the user fills in
    kind = row["type"]
    if row.get("choices") is not None and value not in [str(c) for c in row["choices"]]:
        return f"not one of {row['choices']}"
    if value in row.get("words", ()):
        return ""
    number: float
    try:
        if kind == "int":
            number = int(value)
        elif kind == "float":
            number = float(value)
        elif kind == "float_list":
            [float(x) for x in re.split(r"[,/]+", value)]
            return ""
        else:
            return ""
    except ValueError:
        return f"not {'an int' if kind == 'int' else 'a number'}"
    if "min" in row and (number <= row["min"] if row.get("min_exclusive") else number < row["min"]):
        return f"below the least allowed ({row['min']})"
    if "max" in row and (number >= row["max"] if row.get("max_exclusive") else number > row["max"]):
        return f"above the most allowed ({row['max']})"
    return ""


def _check_combinations(out: Parsed) -> None:
    for group in exclusive_groups(out.engine):
        given = [g for g in group if out.value(g) is not None]
        if len(given) > 1:
            out.problems.append(f"mutually exclusive: {', '.join(given)}")
    for engine, a, b, why in CONFLICTS:
        both = engine == out.engine and out.value(a) is not None and out.value(b) is not None
        if both and not (a == "--nnodes" and str(out.value(a)) == "1"):
            out.problems.append(f"{a} with {b}: {why}")


def model_of(parsed: Parsed) -> str | None:
    """The model a line loads: vLLM's positional, SGLang's ``--model-path``, llama.cpp's ``-m`` or ``-hf``."""
    if parsed.engine == "vllm":
        return parsed.positional[0] if parsed.positional else parsed.value("--model")
    if parsed.engine == "sglang":
        return parsed.value("--model-path")
    if parsed.engine == "llamacpp":
        return parsed.value("-m") or parsed.value("-hf")
    return None
