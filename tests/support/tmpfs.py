"""A small tmpfs of its own for a test that needs a full or read-only file system (root only, else the test skips)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["mounted_tmpfs"]


@contextlib.contextmanager
def mounted_tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` made and mounted as a tmpfs of ``size`` (``3m``, ``64m``) for the block, unmounted after; the test
    skips when it cannot mount one (not root, or no mount here)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "none", str(folder)], check=False).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
