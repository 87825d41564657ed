"""marimo's CLI with playwright's chromium pointed at a system chromium ($EXPLORER_CHROMIUM, default /usr/bin/chromium).

``marimo export html-wasm --offline`` resolves the page's packages in a headless chromium that it launches
with no executable path; ``playwright install`` is never run here, so every launch gets the system's.
usage: python .ci/wasm/marimo_pw.py export html-wasm NOTEBOOK -o OUT --mode run --offline ...
"""

import os
import sys

from playwright.async_api import BrowserType

_launch = BrowserType.launch


async def _launch_system(self, *args, **kwargs):
    kwargs.setdefault("executable_path", os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium"))
    return await _launch(self, *args, **kwargs)


BrowserType.launch = _launch_system

if __name__ == "__main__":  # marimo's kernel subprocess (spawn) re-imports this file as __mp_main__
    from marimo._cli.cli import main

    sys.exit(main())
