"""``explorer check LOGFILE``: an engine's start-up log beside explorer's plan of the same setup.

Reads a vLLM, SGLang or llama.cpp log (or one an engine from another package
reads: :class:`explorer.engines.interface.LogReader`, tried after the built-in
readers), finds the engine, model, card and
settings in it (``--model`` and ``--card`` where it does not say), plans the
same split and prints the engine's figures beside explorer's, part by part.
``--calibrate`` stores what the log measured (the card's total as the engine
saw it, the activation peak, non-torch and CUDA-graph memory) in the cache,
per engine and card class; later plans on that class use them and say so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
from pathlib import Path

from explorer.cli.hub_options import add_hub_options, hub_kwargs
from explorer.errors import EngineLogError
from explorer.units import GiB

#: a start-up log is a few hundred lines; a file past this is cut to its head
MAX_LOG_BYTES = 8 * 1024 * 1024


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``check`` subcommand's arguments."""
    p.add_argument("logfile", metavar="LOGFILE", help="a vLLM, SGLang or llama.cpp start-up log")
    p.add_argument("--model", default=None, metavar="ID", help="the model, where the log names a local path or none")
    p.add_argument("--card", default=None, metavar="CLASS", help="the card class, where the log does not tell it")
    p.add_argument(
        "--engine-version", default=None, metavar="VER", help="the engine's version, where the log does not print it"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting the log does not show, by the engine's name (mem_fraction_static=0.9, max_model_len=32768)",
    )
    p.add_argument("--calibrate", action="store_true", help="store what the log measured for later plans")
    p.add_argument("--cache", default=None, metavar="PATH", help="the cache file --calibrate writes to")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_hub_options(p)


def read_log_file(path: str) -> str:
    """The log's text (undecodable bytes replaced; cut at :data:`MAX_LOG_BYTES`).

    Raises:
        EngineLogError: the file cannot be read (missing, a folder, no permission).
    """
    from explorer.sources.shipped import read_user_text

    return read_user_text(path, "the log", EngineLogError, head_bytes=MAX_LOG_BYTES, lossy=True)


def settings_from_args(pairs: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` pairs as settings (numbers and true/false read as such).

    Raises:
        EngineLogError: a pair is not KEY=VALUE.
    """
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise EngineLogError(f"--set {pair!r} is not KEY=VALUE", hint="e.g. --set mem_fraction_static=0.9")
        text = value.strip()
        try:
            number = int(text) if text.lstrip("-").isdigit() else float(text)
        except ValueError:
            out[key.strip()] = {"true": True, "false": False}.get(text.lower(), text)
            continue
        if not math.isfinite(number):
            raise EngineLogError(
                f"--set {pair!r}: {text} is not a finite number", hint="e.g. --set max_model_len=32768"
            )
        out[key.strip()] = number
    return out


def run(args: argparse.Namespace) -> int:
    """Check the log; with ``--calibrate`` store its measurements. Exit 0 when explorer agrees on the verdict."""
    from explorer.engines.logs.check import calibration_from_check
    from explorer.sources.engine_log import check_log_text
    from explorer.ui.check_rows import comparison_rows

    text = read_log_file(args.logfile)
    overrides = settings_from_args(args.set)
    if args.engine_version:
        overrides["version"] = args.engine_version
    check = check_log_text(text, model=args.model, card=args.card, overrides=overrides, **hub_kwargs(args))
    stored = None
    if args.calibrate:
        calibration = calibration_from_check(check, datetime.date.today().isoformat(), Path(args.logfile).name)
        stored = _store(calibration, args.cache)
    if args.json:
        out = check.to_dict()
        if stored is not None:
            out["calibration"] = {k: v for k, v in stored.items() if v is not None}
        print(json.dumps(out, indent=2))
    else:
        _print(check, comparison_rows(check))
        if stored is not None:
            _print_stored(stored)
    return 0 if check.agrees is not False else 4


def _store(calibration, path: str | None) -> dict:
    import dataclasses

    from explorer.cli.cache import unwritable_hint
    from explorer.errors import CacheError
    from explorer.sources.cache.calibrations import put_calibration
    from explorer.sources.cache.store import FLUSH_WAIT_S, Cache

    with Cache.open(path, lock_wait_s=FLUSH_WAIT_S) as cache:  # another process's write ends within it
        if not put_calibration(cache, calibration):
            raise CacheError(
                f"the cache at {cache.path} is {cache.mode}: the calibration was not stored",
                hint=unwritable_hint(cache),
            )
    return dataclasses.asdict(calibration)


def _print(check, rows: list[dict]) -> None:
    from explorer.engines.names import engine_label

    log, setup = check.log, check.setup
    engine = engine_label(log.engine)  # a built-in accounting (a plugin's reader names one): nothing to discover
    print(
        f"{engine} {log.version or setup.request.vllm_version or '(version not printed)'} · {check.model} · "
        f"{setup.tp * setup.pp} × {setup.gpu.name}"
    )
    shown = ", ".join(f"{k} {v}" for k, v in log.settings.items() if isinstance(v, (str, int, float, bool)))
    if shown:
        print(f"settings: {shown}")
    table = [("part", "log", "explorer", "difference", "%"), *(tuple(map(str, r.values())) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(line, widths, strict=True)).rstrip())
    for note in check.notes:
        print(f"note: {note}")
    for missing in check.unread:
        print(f"not in the log: {missing}")
    print("(GiB = 1024³ bytes; explorer plans the log's split, settings and engine release)")


def _print_stored(stored: dict) -> None:
    parts = []
    if stored.get("torch_memory_bytes"):
        parts.append(f"card total {stored['torch_memory_bytes'] / GiB:.2f} GiB")
    if stored.get("activation_scale"):
        parts.append(f"activation × {stored['activation_scale']:g} of explorer's estimate")
    for key, label in (("non_torch_bytes", "non-torch"), ("graph_bytes", "CUDA graphs"), ("startup_bytes", "start-up")):
        if stored.get(key) is not None:
            parts.append(f"{label} {stored[key] / GiB:.2f} GiB")
    print(
        f"stored calibration for {stored['engine']} on {stored['gpu_class']}: {', '.join(parts)}; later plans on "
        f'{stored["gpu_class"]} use them ("calibrated from your log of {stored["measured_on"]}")'
    )
