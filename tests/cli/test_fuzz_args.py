"""Fuzz: the command line, every number and every model, cluster and file argument, offline.

Each case builds one command (``shape``, ``plan``, ``place``, ``snapshot list``,
``cache info|export``) with options drawn from pools of boundary and hostile
values (``-1``, ``nan``, ``inf``, ``1e308``, ``2``, text, a 5,000-character
id, an ANSI escape, a right-to-left override, a folder where a file belongs,
a file that is not UTF-8…) and runs it in-process through ``explorer.cli.main``
with the network blocked. Every case must exit with a status (0 answered,
2 refused with a message, 3 nothing fits, 1 a usage line), raise nothing
else, print no raw control character, print JSON whose figures are finite and
≥ 0, and finish within the time bound.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import partial

import pytest
from support.corpus import CONFIGS
from support.fuzz import STRINGS, Tally, bad_figures, bounded_memory, cases, rng
from support.gguf_factory import llama_like, llama_metadata
from support.hub_fixtures import write_gguf

from explorer.cli import main

NUMBERS = (
    "-1", "0", "1", "2", "3", "0.5", "0.9", "1.0", "nan", "inf", "-inf", "1e308", "1e-308", "", "abc", "9" * 30,
    "1_000", "0x10", "4096", "32768", "-0", " 7 ", "1e3", "NaN", "2e9",
)  # fmt: skip
MODELS = (
    "Qwen/Qwen3-8B", "meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "", " ", "a" * 5000, "org/" + "n" * 300,
    "org/name:sub/x-Q4_K_M.gguf", "org/name:../x.gguf", "\x1b[31morg/evil", "org/\u202ename", "nope.json",
    "/nonexistent/config.json", "nobody/unknown-model", "org/name@v1", "org/name@" + "r" * 500,
)  # fmt: skip
CLUSTERS = (
    "1x1xh100-80g", "1x8xh100-80g", "2x8xh100-80g@ib0", "1x4xl40s-48g + 1xcpu-256g", "1xuma-128g", "0x1xh100-80g",
    "1x0xh100-80g", "1x1xnope", "1x1xh100-80g@", "", "1x1xh100-80g,free=nan", "1x1xh100-80g,free=-1",
    "1x1xx:1e400MiB", "1x7xa100-80g-mig-1g.10gb", "nope.json", "1x1xh100-\x1b[2J80g",
)  # fmt: skip
TERMS = ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B:32k", "Qwen/Qwen3-8Bx2@query", "Qwen/Qwen3-8B:-1", "Qwen/Qwen3-8Bx0",
         "Qwen/Qwen3-8B:nan", "Qwen/Qwen3-8Bx99999999999", "x", "")  # fmt: skip
#: a card index of -1 is the unified-memory pool (explorer.fleet.result.POOL_INDEX), an index, not a figure
_POOL_INDEX = re.compile(r"json\.(cards\[\d+\]\.index|instances\[\d+\]\.cards\[\d+\]) = -1")
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def files(tmp_path):
    """Paths a user might pass: a folder, a file that is not UTF-8, deep JSON, a real config, a GGUF."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00{")
    (tmp_path / "deep.json").write_text("[" * 50_000 + "]" * 50_000)
    (tmp_path / "plan.json").write_text(json.dumps({"models": {"Qwen/Qwen3-8B": {"cards": [0]}}}))
    write_gguf(tmp_path / "local-Q4_K_M.gguf", llama_metadata(), llama_like(), file_size=64 << 20)
    return (
        str(tmp_path / "folder"),
        str(tmp_path / "binary.json"),
        str(tmp_path / "deep.json"),
        str(tmp_path / "plan.json"),
        str(tmp_path / "local-Q4_K_M.gguf"),
        str(CONFIGS / "mistralai__Mixtral-8x7B-v0.1.json"),
        str(tmp_path / "missing" / "x.json"),
    )


def pick(r, good: tuple, pool: tuple, p_good: float = 0.6):
    """A value from ``good`` with probability ``p_good``, else from the whole ``pool``."""
    return r.choice(good) if r.random() < p_good else r.choice(pool)


def command(r, files: tuple[str, ...], out_dir: str) -> list[str]:
    """One random command line: a command, its arguments, and 0 to 3 options with hostile or ordinary values."""
    number = partial(pick, r, ("1", "2", "0.5", "0.9", "4096", "32768"), NUMBERS, 0.4)
    which = r.choice(("shape", "plan", "plan", "plan", "place", "snapshot", "cache"))
    if which == "shape":
        argv = ["shape", pick(r, (*MODELS[:3], *files[4:6]), MODELS + files), "--offline"]
        options = {"--context": number, "--timeout": number, "--token": partial(r.choice, STRINGS)}
    elif which == "plan":
        argv = ["plan", pick(r, (*MODELS[:3], *files[4:6]), MODELS + files), "--offline",
                "--cluster", pick(r, CLUSTERS[:5], CLUSTERS + files, 0.7)]  # fmt: skip
        options = {
            **dict.fromkeys(("--context", "--concurrency", "--gpu-memory-utilization", "--mem-fraction-static",
                             "--ngl", "--batch", "--ubatch", "--parallel", "--efficiency", "--top"), number),
            "--tensor-split": partial(r.choice, ("1e308,1e308", "3,1", "0,0", "nan,1", "-1,2", "1," * 5000 + "1")),
            "--engine": partial(r.choice, ("vllm", "sglang", "llamacpp")),
            "--quant": partial(r.choice, ("fp8", "Q4_K_M", "int4-awq", "zz")),
        }  # fmt: skip
    elif which == "place":
        argv = ["place", "--offline", "--cluster", r.choice(CLUSTERS[:5])]
        for _ in range(r.choice((1, 2))):
            argv += ["--model", pick(r, TERMS[:3], TERMS)]
        options = {"--usable-fraction": number, "--plan": partial(r.choice, files)}
    elif which == "snapshot":
        argv = ["snapshot", "list"]
        options = {"--limit": number, "--search": partial(r.choice, STRINGS)}
    else:
        target = r.choice((*files, f"{out_dir}/export.json"))
        argv, options = r.choice((["cache", "info"], ["cache", "export", target])), {}
    for flag in r.sample(sorted(options), k=min(len(options), r.choice((0, 0, 1, 1, 2, 3)))):
        argv.append(f"{flag}={options[flag]()}")  # the = form: a value that starts with '-' stays a value
    if which in ("shape", "plan", "place", "snapshot") and r.random() < 0.4:
        argv.append("--json")
    return argv


def run_cli(capsys, argv: list[str]) -> dict:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse refused an argument: usage and a message, status 2
        code = e.code
    captured = capsys.readouterr()
    return {"argv": argv, "code": code, "out": captured.out, "err": captured.err}


def check(got: dict) -> list[str]:
    problems = []
    if got["code"] not in (0, 1, 2, 3):
        problems.append(f"exit status {got['code']!r}")
    if _RAW_CONTROL.search(got["out"]):
        problems.append(f"raw control character in the output: {_RAW_CONTROL.search(got['out']).group()!r}")
    if "Traceback" in got["err"]:
        problems.append("a traceback on stderr")
    if got["code"] == 0 and "--json" in got["argv"]:
        problems += [p for p in bad_figures(json.loads(got["out"]), "json") if not _POOL_INDEX.fullmatch(p)]
    if got["code"] == 2 and not got["err"].strip():
        problems.append("refused without a message")
    return problems


def test_cli_arguments_end_in_a_status_and_a_message(offline, capsys, files, tmp_path):
    r, tally, statuses = rng("cli-args"), Tally("CLI arguments"), Counter()

    def counted(argv: list[str]) -> dict:
        got = run_cli(capsys, argv)
        statuses[(argv[0], got["code"])] += 1
        return got

    with bounded_memory():
        for i in range(cases(200)):
            argv = command(r, files, str(tmp_path))
            tally.run(f"case {i}: {[a[:60] for a in argv]}", partial(counted, argv), check)
    print(tally.report(), "\nexit statuses by command:", dict(sorted(statuses.items())))
    assert not tally.failures, tally.report()
    assert tally.results == tally.runs  # main() always returns or exits: nothing escapes
    answered = sum(n for (cmd, code), n in statuses.items() if code in (0, 3) and cmd in ("shape", "plan", "place"))
    assert answered >= tally.runs // 10  # the pools reach the planner, not only argparse


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["shape", "Qwen/Qwen3-8B", "--context", "-1"], "argument --context: -1 is out of range: the context must be 1"),
        (["plan", "Qwen/Qwen3-8B", "--cluster", "1x1xh100-80g", "--mem-fraction-static", "nan"], "not a finite number"),
        (["plan", "Qwen/Qwen3-8B", "--cluster", "1x1xh100-80g", "--mem-fraction-static", "2"],
         "2 is out of range: it must be a finite number from 0.01 to 1"),
        # the 5,000-case CI fuzz's find: SGLang's "all cards need static / share" overflowed a float
        (["plan", "Qwen/Qwen3-8B", "--cluster", "1x8xh100-80g", "--mem-fraction-static=1e-308"],
         "1e-308 is out of range: it must be a finite number from 0.01 to 1"),
        (["plan", "Qwen/Qwen3-8B", "--cluster", "1x2xh100-80g", "--tensor-split", "1e308,1e308"],
         "finite shares from 0 to 1,000,000"),
        (["shape", "Qwen/Qwen3-8B", "--timeout", "nan"], "argument --timeout: 'nan' is not a finite number"),
        (["shape", "Qwen/Qwen3-8B", "--timeout", "-1"], "seconds must be above 0"),
        (["shape", "Qwen/Qwen3-8B", "--timeout", "inf"], "'inf' is not a finite number"),
    ],
)  # fmt: skip
def test_each_reported_number_is_refused_naming_the_value_and_the_range(offline, capsys, argv, says):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--offline"])
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_a_bad_endpoint_is_a_typed_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:99999")
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "c.duckdb"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["shape", "nobody/model"]) == 2
    err = capsys.readouterr().err
    assert "the Hub endpoint 'http://127.0.0.1:99999' is not a URL (Port out of range" in err and "HF_ENDPOINT" in err
