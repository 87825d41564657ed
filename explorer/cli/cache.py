"""``explorer cache info | clear | export PATH``: look at, empty or dump the local Hub cache.

The file is ``--cache PATH``, else ``$EXPLORER_CACHE``, else the XDG default
(see :mod:`explorer.sources.cache.store`). ``info`` and ``export`` open it read-only and
never create it; ``clear`` deletes every cached row without asking and says
how many it removed. The calibrations ``explorer check --calibrate`` stored
are the user's own: ``info`` lists them, ``clear`` keeps them and ``clear
--calibrations`` drops them (and only them).
"""

from __future__ import annotations

import argparse
import json
import os

from explorer.units import mib


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``cache`` subcommand's arguments and actions."""
    p.add_argument(
        "--cache",
        default=None,
        metavar="PATH",
        help="the cache file (default: $EXPLORER_CACHE or ~/.cache/explorer/cache.duckdb)",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    info = actions.add_parser("info", help="path, mode, size and rows per table")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    clear = actions.add_parser("clear", help="delete every cached row (no confirmation)")
    clear.add_argument(
        "--calibrations", action="store_true", help="drop the stored calibrations instead (explorer check --calibrate)"
    )
    export = actions.add_parser("export", help="write every table to one JSON file")
    export.add_argument("path", metavar="PATH", help="the JSON file to write")
    for q in (info, clear, export):
        q.add_argument("--cache", default=argparse.SUPPRESS, metavar="PATH", help="the cache file")


def _path(args: argparse.Namespace) -> str:
    from explorer.sources.cache.store import default_cache_path

    return args.cache or default_cache_path()


def run(args: argparse.Namespace) -> int:
    """Run one cache action."""
    from explorer.sources.cache.journal import present
    from explorer.sources.cache.store import Cache

    path = _path(args)
    if args.action in ("info", "export") and path != ":memory:" and not present(path):
        if args.action == "export":
            from explorer.errors import CacheError

            raise CacheError(f"no cache at {path} to export", hint="resolve a Hub model first, or pass --cache PATH")
        if args.json:
            print(json.dumps({"path": path, "mode": "absent", "size_bytes": 0, "counts": {}}))
        else:
            print(f"path    {path}\nmode    absent (nothing cached yet)")
        return 0
    if args.action == "clear":
        _set_aside_unusable(path)
    with Cache.open(path, read_only=args.action != "clear") as cache:
        if args.action == "info":
            return _info(cache, as_json=args.json)
        if args.action == "export":
            out = cache.export(args.path)
            counts = cache.info()["counts"]
            print(f"exported {sum(counts.values()):,} rows ({_counts(counts)}) from {cache.path} to {out}")
            return 0
        if args.calibrations:
            return _clear_calibrations(cache)
        before = cache.info()["counts"]
        if not cache.clear():
            from explorer.errors import CacheError

            raise CacheError(f"the cache at {cache.path} is {cache.mode}: nothing removed", hint=unwritable_hint(cache))
        print(f"removed {sum(before.values()):,} rows ({_counts(before)}) from {cache.path}")
    return 0


def _set_aside_unusable(path: str) -> None:
    """Before a clear: a cache file of a newer explorer's schema, or one DuckDB cannot read, is renamed aside
    (kept, not deleted) so that the clear starts an empty cache and succeeds."""
    import warnings

    from explorer.sources.cache.file import move_aside
    from explorer.sources.cache.store import Cache, CacheWarning

    if path == ":memory:" or not os.path.exists(path):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        with Cache.open(path, read_only=True) as probe:
            why = probe.why
    if why.startswith("a newer schema") or why == "damaged":
        aside = move_aside(path, "newer" if why.startswith("a newer") else "corrupt")
        print(f"the cache at {path} was {why}: kept as {aside}; a new cache starts empty")


def _clear_calibrations(cache) -> int:
    from explorer.errors import CacheError
    from explorer.sources.cache.calibrations import clear_calibrations, load_calibrations

    count = len(load_calibrations(cache))
    if count and not clear_calibrations(cache):
        raise CacheError(
            f"the cache at {cache.path} is {cache.mode}: no calibration removed", hint=unwritable_hint(cache)
        )
    print(f"removed {count} calibration{'' if count == 1 else 's'} from {cache.path}")
    return 0


def _calibration_line(c) -> str:
    figures = [
        f"{label} {getattr(c, key) / 2**30:.2f} GiB"
        for key, label in (
            ("torch_memory_bytes", "total"),
            ("non_torch_bytes", "non-torch"),
            ("graph_bytes", "graphs"),
            ("startup_bytes", "start-up"),
        )
        if getattr(c, key) is not None
    ]
    if c.activation_scale is not None:
        figures.append(f"activation × {c.activation_scale:g}")
    return f"  {c.engine} on {c.gpu_class}: {', '.join(figures)} (from {c.source or 'a log'} of {c.measured_on})"


def unwritable_hint(cache) -> str:
    """What to do about a cache that cannot be written, by why it cannot."""
    if cache.why == "locked":
        return "another explorer process is using it: let it finish, then try again"
    if cache.why == "read-only file system":
        return "it is on a read-only file system: delete it by other means, or set EXPLORER_CACHE to a writable path"
    if cache.why == "no permission to write it":
        return "you may not write it: delete it by other means, or set EXPLORER_CACHE to a writable path"
    return f"it could not be opened ({cache.why}): delete the file, or set EXPLORER_CACHE to another path"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{t} {n:,}" for t, n in counts.items())


def _info(cache, *, as_json: bool) -> int:
    import dataclasses

    from explorer.sources.cache.calibrations import load_calibrations

    info = cache.info()
    calibrations = load_calibrations(cache)
    info["calibrations"] = [dataclasses.asdict(c) for c in calibrations]
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"path    {info['path']}")
    print(f"mode    {info['mode']}")
    print(f"size    {mib(info['size_bytes'])} ({info['size_bytes']:,} bytes)")
    print(f"schema  version {info['schema_version']}")
    width = max(len(t) for t in info["counts"]) if info["counts"] else 0
    for table, n in info["counts"].items():
        print(f"  {table:<{width}}  {n:,} rows")
    print(f"calibrations  {len(calibrations)}")
    for c in calibrations:
        print(_calibration_line(c))
    return 0
