"""``explorer snapshot list | refresh | seed``: the shipped snapshot of popular models.

``list`` shows the entries (``--search TEXT`` filters them); ``refresh``
re-reads repositories from the Hub (a bounded pool of ``--workers``) and
writes the snapshot; ``checkpoints`` re-reads each model's published quantised
checkpoints from the Hub's model tree into ``data/checkpoints.json``; ``seed`` rebuilds it from a folder of real config.json
files (how the shipped file was made, see ``data/snapshot.md``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from explorer.cli.args import int_range
from explorer.cli.hub_options import add_hub_options, hub_kwargs
from explorer.units import gib, human_count


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``snapshot`` subcommand's arguments and actions."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="the repositories the snapshot knows")
    ls.add_argument("--search", default="", metavar="TEXT", help="only entries matching every word of TEXT")
    ls.add_argument("--limit", type=int_range(0, 1 << 20, "--limit"), default=1000, help="show at most this many")
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    ref = actions.add_parser("refresh", help="re-read repositories from the Hub and write the snapshot")
    ref.add_argument(
        "--repos",
        type=Path,
        default=None,
        metavar="FILE",
        help="repo ids, one a line (# comments); default: every repo in the snapshot",
    )
    ref.add_argument(
        "--out", type=Path, default=None, metavar="PATH", help="where to write (default: over the snapshot)"
    )
    ref.add_argument(
        "--workers",
        type=int_range(1, 64, "--workers"),
        default=4,
        metavar="N",
        help="repositories fetched at once (default 4)",
    )
    add_hub_options(ref)
    ckpt = actions.add_parser(
        "checkpoints", help="re-read each model's published quantised checkpoints (the Hub's model tree)"
    )
    ckpt.add_argument("--repos", type=Path, default=None, metavar="FILE", help="repo ids, one a line; default: all")
    ckpt.add_argument("--out", type=Path, default=None, metavar="PATH", help="default: over data/checkpoints.json")
    add_hub_options(ckpt)
    seed = actions.add_parser("seed", help="rebuild the snapshot from a folder of config.json files")
    seed.add_argument("--configs", type=Path, required=True, metavar="DIR", help="org__name.json config files")
    seed.add_argument("--provenance", type=Path, required=True, metavar="CSV", help="file -> hf_model_id, source")
    seed.add_argument(
        "--indexes",
        type=Path,
        default=None,
        metavar="DIR",
        help="org__name.model.safetensors.index.json files (total_size sizes the weights)",
    )
    seed.add_argument("--out", type=Path, required=True, metavar="PATH", help="the snapshot file to write")


def run(args: argparse.Namespace) -> int:
    """Run one snapshot action."""
    return {"list": _list, "refresh": _refresh, "checkpoints": _checkpoints, "seed": _seed}[args.action](args)


def _list(args: argparse.Namespace) -> int:
    from explorer.sources.snapshot.read import load_snapshot

    snap = load_snapshot()
    entries = snap.search(args.search, args.limit) if args.search else list(snap.entries.values())[: args.limit]
    if args.json:
        print(
            json.dumps(
                {
                    "path": snap.path,
                    "count": len(entries),
                    "entries": [
                        {
                            "repo": e.repo,
                            "family": e.family,
                            "model_type": e.model_type,
                            "params": e.params,
                            "source": e.source,
                            "base_model": e.base_model,
                            "artifacts": list(e.artifacts),
                        }
                        for e in entries
                    ],
                },
                indent=2,
            )
        )
        return 0
    width = max((len(e.repo) for e in entries), default=0)
    for e in entries:
        sizes = ", ".join(f"{a['quant']} {gib(a['size_bytes'])} {a['size_source']}" for a in e.artifacts)
        print(f"{e.repo:<{width}}  {e.family or e.model_type:<12} {human_count(e.params):>8}  {sizes}")
    print(f"{len(entries)} of {len(snap)} entries in {snap.path}")
    return 0


def _repos(args: argparse.Namespace) -> list[str]:
    """The repos named in ``--repos`` (one a line, # comments), else every repo in the snapshot."""
    from explorer.sources.snapshot.read import load_snapshot

    if args.repos is None:
        return list(load_snapshot().repos)
    from explorer.errors import SnapshotError
    from explorer.sources.shipped import read_user_text

    lines = read_user_text(args.repos, "the list of repos", SnapshotError).splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def _checkpoints(args: argparse.Namespace) -> int:
    from explorer.sources.snapshot.build import refresh_checkpoints

    repos = _repos(args)
    report = refresh_checkpoints(repos, settings=hub_kwargs(args)["settings"], out=args.out)
    print(f"read the model tree of {len(report['refreshed'])} of {len(repos)} models; {report['entries']} checkpoints")
    for repo, why in sorted(report["errors"].items()):
        print(f"  {repo}: kept the shipped entries: {why}")
    return 0 if not report["errors"] else 1


def _refresh(args: argparse.Namespace) -> int:
    from explorer.sources.snapshot.build import refresh

    repos = _repos(args)
    report = refresh(repos, settings=hub_kwargs(args)["settings"], max_workers=args.workers, out=args.out)
    print(
        f"refreshed {len(report['refreshed'])} of {len(repos)} repositories; "
        f"{report['entries']} entries written to {report['path']}"
    )
    for repo, why in sorted(report["errors"].items()):
        print(f"  {repo}: kept the old entry: {why}")
    return 0 if not report["errors"] else 1


def _seed(args: argparse.Namespace) -> int:
    from explorer.sources.snapshot.build import seed, write_snapshot

    doc = seed(args.configs, args.provenance, indexes=args.indexes)
    path = write_snapshot(doc, args.out)
    print(f"wrote {len(doc['entries'])} entries to {path} ({path.stat().st_size:,} bytes)")
    return 0
