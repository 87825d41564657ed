"""EDGE: the one way explorer opens a file it is given: a regular file only, opened without blocking, read up
to a cap.

Issue 25: ``stat().st_size`` is 0 for a device, a ``/proc`` file or a named pipe, so a size check before
``read_bytes()`` let ``/dev/zero`` fill memory (``explorer shape /dev/zero`` was a ``MemoryError``; the
published app grew from 88 MiB to 6.1 GiB in 10 s), and a named pipe blocked the reading thread for good.
Here the file is opened with ``O_NONBLOCK`` (opening a pipe with no writer returns at once), its kind is
checked on the open descriptor (``fstat``, so no other file can be swapped in between), and at most the
cap + 1 bytes are read, so "over the cap" is known without reading the rest.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from explorer.errors import ExplorerError

__all__ = ["file_kind", "open_regular_file", "read_capped"]

#: the kinds of file that are not regular, as a message names them (``stat.S_IFMT`` → words)
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}
#: open flags: read only, never wait for a writer (a FIFO) nor become a controlling terminal (a tty)
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words (``"a named pipe (FIFO)"``); "a regular file" for one."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular_file(path: str | Path, what: str, error: type[ExplorerError]) -> BinaryIO:
    """``path`` opened for binary reading, when it is a regular file.

    Raises:
        error: it does not exist, cannot be opened (the reason), or is not a regular file (the message names
            its kind: a folder, a named pipe, a device, a socket).
    """
    p = Path(path)
    try:
        fd = os.open(p, _FLAGS)
    except OSError as e:
        raise error(f"cannot read {what} {p}: {e.strerror or e}", hint="check the path") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{what} {p} is {file_kind(mode)}, not a regular file", hint="give the path of a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file's reads never wait; plain reads from here on
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(path: str | Path, cap_bytes: int, what: str, error: type[ExplorerError]) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap_bytes`` of them.

    Raises:
        error: as :func:`open_regular_file`, or the file holds more than ``cap_bytes`` (the message says the cap).
    """
    with open_regular_file(path, what, error) as f:
        try:
            data = f.read(cap_bytes + 1)
        except OSError as e:
            raise error(f"cannot read {what} {path}: {e.strerror or e}", hint="check the path") from None
    if len(data) > cap_bytes:
        raise error(f"{what} {path} is over {cap_bytes:,} bytes; at most that many are read")
    return data
