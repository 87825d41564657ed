"""One copy of Pyodide and marimo's frontend for the whole WASM site.

usage: python .ci/wasm/share_assets.py SITE FOLDER...      (FOLDER: a page's folder in SITE; "." is the root page)

``marimo export html-wasm`` writes a complete page into each folder: its index.html plus the same assets/,
pyodide/, packages/, lockfile/ and icons (about 49 MB a page). For each page folder other than the root, every
file but index.html is moved to the same path under SITE (or dropped when SITE already holds those very bytes),
and the index.html's quoted ``./PATH`` references to such files become ``../PATH``: the page's own scripts,
the Pyodide index and lockfile URLs then resolve to the root's copies. Two different files at one path is an
error (the pages would need their own copies): it stops, naming them.
"""

from __future__ import annotations

import filecmp
import re
import shutil
import sys
from pathlib import Path


def share(site: Path, folder: str) -> int:
    """Move ``folder``'s files to the site root (or drop duplicates) and rewrite its index.html; bytes saved."""
    page = site / folder
    saved = 0
    for path in sorted(p for p in page.rglob("*") if p.is_file() and p != page / "index.html"):
        rel = path.relative_to(page)
        target = site / rel
        if target.exists():
            if not filecmp.cmp(path, target, shallow=False):
                sys.exit(f"share_assets: {page / rel} and {target} differ: the pages cannot share one copy")
            saved += path.stat().st_size
            path.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)
    for empty in sorted((d for d in page.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
        empty.rmdir()
    index = page / "index.html"
    text = index.read_text(encoding="utf-8")

    root = "../" * len(Path(folder).parts)

    def up(match: re.Match) -> str:
        quote, ref = match[1], match[2]
        return f"{quote}{root}{ref}" if (site / ref.split("?")[0].split("#")[0]).exists() else match[0]

    index.write_text(re.sub(r"""(["'])\./([^"'\s]+)""", up, text), encoding="utf-8")
    return saved


def main(argv: list[str]) -> None:
    site, folders = Path(argv[0]), [f for f in argv[1:] if f != "."]
    for folder in folders:
        saved = share(site, folder)
        print(f"wasm: {folder}/ shares the site's assets ({saved / 1e6:,.1f} MB not copied)")


if __name__ == "__main__":
    main(sys.argv[1:])
