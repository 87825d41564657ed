"""explorer.cli.request_args: the command line's request options come from the request's declarations, and the
command line, the app and the request accept and refuse the same values (issue 22's drift cases)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.cli import main
from explorer.cli.request_args import CLI_SETTINGS, add_setting_arguments, request_from_args, setting_values
from explorer.engines.request import PlanRequest
from explorer.engines.setting import Setting
from explorer.errors import PlanError
from explorer.ui.app_state import app_defaults
from explorer.ui.engine_settings import SETTINGS_BY_KEY, request_changes

#: every setting but the engine names (the CLI offers the registry's as choices; the request takes any name and
#: the planner refuses an unknown one with the registry's list)
COMPARED = [s for s in CLI_SETTINGS if s.kind != "engines"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_setting_arguments(p)
    return p


PARSER = _parser()
#: the settings the app reads from text: its settings boxes and its main controls but the weights (a menu of the
#: model's artifacts, not a precision's name)
APP_FIELDS = {s.field for s in SETTINGS_BY_KEY.values()} | {"context_tokens", "concurrency", "kv_dtype"}


def _cli(s: Setting, text: str | None) -> PlanRequest | None:
    """The request the command line builds from ``--opt=text`` (a switch: given when text is on), or None."""
    argv = [] if text is None else [s.cli[0]] if s.kind == "bool" else [f"{s.cli[0]}={text}"]
    try:
        return request_from_args(PARSER.parse_args(argv))
    except (argparse.ArgumentError, PlanError):
        return None


def _app(s: Setting, text: str) -> PlanRequest | None:
    """The request the app builds from the text in the setting's box (a main control: from a link), or None."""
    if s.main:
        defaults = app_defaults({s.key: text})
        value = getattr(defaults, s.field)
        same = text.strip().replace(",", "").lower() == str(s.default).lower()  # the default typed again
        changed = value != getattr(app_defaults(), s.field) or same
        return dataclasses.replace(PlanRequest(), **{s.field: value}) if changed else None
    changes, errors = request_changes({s.key: text})
    return None if errors else dataclasses.replace(PlanRequest(), **changes)


def _texts(s: Setting) -> st.SearchStrategy[str]:
    """Texts at the setting's edges and beyond, and junk."""
    junk = st.sampled_from(["x", "nan", "inf", "-inf", "1e999", "1.5", "0x10", "--"])
    if s.kind == "int":
        low, high = int(s.low), int(s.high)
        edges = st.integers(low - 2, low + 2) | st.integers(high - 2, high + 2) | st.integers()
        return edges.map(str) | junk
    if s.kind == "float":
        edges = st.sampled_from([s.low, s.high, s.low - 1e-9, s.high * (1 + 1e-9), -0.0, 1e-308])
        return (edges | st.floats()).map(repr) | junk
    if s.kind == "choice":
        return st.sampled_from(s.choices) | st.sampled_from(s.choices).map(str.upper) | junk
    if s.kind == "floats":
        shares = st.lists(st.sampled_from([0.0, 1.0, 3.0, 1e6, 1e6 + 1, -1.0, math.nan]), min_size=1, max_size=4)
        return shares.map(lambda xs: ",".join(map(repr, xs))) | junk
    # a text of dashes alone is argparse's end of options: ``--quant=--`` cannot name a value on a command line
    return st.text(alphabet="abc019.-_", min_size=1, max_size=8).filter(lambda t: t.strip("-"))


@st.composite
def _cases(draw) -> tuple[Setting, str]:
    s = draw(st.sampled_from(COMPARED))
    return s, draw(st.sampled_from(["on", "off"]) if s.kind == "bool" else _texts(s))


def _raw(s: Setting, text: str):
    """The value the text names before any range check (None: it names none)."""
    try:
        if s.kind == "int":
            return int(text)
        if s.kind == "float":
            return float(text)
        if s.kind == "floats":
            return tuple(float(x) for x in text.split(","))
    except ValueError:
        return None
    if s.kind == "choice":  # a choice is read in any case (``BF16`` is bf16), on the command line as in the app
        return next((c for c in s.choices if c.lower() == text.lower()), text)
    return text if s.kind == "text" else None  # a switch is given or not


@given(_cases())
def test_the_cli_the_app_and_the_request_accept_and_refuse_the_same_values(case):
    s, text = case
    # a switch: given on the command line, "on" in the app's box and a link
    cli = _cli(s, (text if text == "on" else None) if s.kind == "bool" else text)
    app = _app(s, text) if s.field in APP_FIELDS else cli
    assert (cli is None) == (app is None), (s.field, text)
    if cli is not None:
        assert getattr(cli, s.field) == getattr(app, s.field)
        if s.implies:
            assert getattr(cli, s.implies) == getattr(app, s.implies)
    raw = _raw(s, text)
    if raw is not None:
        try:
            PlanRequest(**{s.field: raw})
            request_ok = True
        except PlanError:
            request_ok = False
        assert request_ok == (cli is not None), (s.field, text, raw)


def test_every_request_setting_with_an_option_is_on_the_command_line():
    fields = {s.field for s in CLI_SETTINGS}
    assert fields == {f.name for f in dataclasses.fields(PlanRequest)} - {"calibrations"}
    assert set(SETTINGS_BY_KEY) <= {s.key for s in CLI_SETTINGS}  # the app's boxes are CLI options too


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--ngl=-1"], "n_gpu_layers", -1),  # llama.cpp's every layer, in the CLI as in the app
        (["--max-num-seqs", "100000"], "max_num_seqs", 100_000),
        (["--tp", "70000"], "tensor_parallel_size", 70_000),
        (["--enable-mixed-chunk"], "enable_mixed_chunk", True),
        (["--host-fraction", "0.5"], "host_fraction", 0.5),
        (["--parallel", "3"], "concurrency", 3),  # llama.cpp's -np, the same setting as --concurrency
        (["--hicache-size", "10"], "hierarchical_cache", True),  # a host pool's size turns the host pool on
    ],
)
def test_the_issue_drift_cases_reach_the_request(argv, field, value):
    assert getattr(request_from_args(PARSER.parse_args(argv)), field) == value
    key = next(s.key for s in CLI_SETTINGS if argv[0].split("=")[0] in s.cli)
    if key in SETTINGS_BY_KEY:  # the app's box reads the same text the same way
        text = "on" if len(argv) == 1 and "=" not in argv[0] else argv[-1].split("=")[-1]
        changes, errors = request_changes({key: text})
        assert errors == [] and dataclasses.replace(PlanRequest(), **changes).__getattribute__(field) == value


def test_swap_space_is_in_the_printed_vllm_command_once(capsys, monkeypatch, tmp_path):
    """At vLLM 0.17.1, the last release that takes --swap-space, the command carries it once (vllm.py writes it by
    the release's rule; the declaration's launch_flags leave it to the engine)."""
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "none.duckdb"))
    argv = ["plan", "meta-llama/Llama-3.2-3B", "--cluster", "1x1xh100-80g", "--engine", "vllm", "--swap-space", "8"]
    assert main([*argv, "--vllm-version", "0.17.1", "--offline", "--json"]) == 0
    command = json.loads(capsys.readouterr().out)["options"][0]["command"]
    assert command.startswith("vllm serve ") and " --swap-space 8" in command
    assert command.count("--swap-space") == 1


@pytest.mark.parametrize("command", ["fit", "plan", "shape", "place", "check"])
def test_the_commands_take_the_common_flags_and_say_so(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--offline" in text and "--json" in text
    if command != "fit":  # fit never asks the Hub; the others take the Hub's options
        assert "--token TOKEN" in text and "--revision REV" in text and "--timeout SECONDS" in text
    else:
        assert "fit never asks the Hub" in text


def test_fit_takes_offline_and_the_request_flags(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("EXPLORER_CACHE", str(tmp_path / "none.duckdb"))
    argv = ["fit", "--cluster", "1x1xh100-80g", "--offline", "--json", "--top", "1", "--engine", "llamacpp"]
    assert main([*argv, "--ngl=-1", "--no-mmap"]) == 0
    assert json.loads(capsys.readouterr().out)["request"]["context"] == 4096


def test_values_keep_the_parser_defaults():
    values = setting_values(PARSER.parse_args([]))
    assert PlanRequest(**values) == PlanRequest()  # no option given: the request's own defaults
