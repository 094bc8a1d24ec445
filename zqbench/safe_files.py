"""Files zqbench writes never follow a symbolic link (#25).

A run folder may be downloaded or shared, and zqbench may run as root: a link planted at
`plots/histograms.png` must not make `zqbench report DIR` overwrite the file it points to.
So every output is written to a new temporary file (created exclusively, never through a
link) and renamed over its name, which replaces a link instead of following it; a folder
that is a link is refused.

    write_bytes(path, data)        atomic: readers see the old file or the whole new one
    write_via(path, write)         the same for a writer that wants a path (pyarrow)
    open_new(path)                 a stream written as it goes (the samples' Arrow file)
    make_dir(path)                 a folder to write in, refused when it is a link
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from zqbench.errors import UsageError

# O_NOFOLLOW where the platform has it: the open itself refuses a link at the last step.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def make_dir(path: Path) -> Path:
    """`path` as a folder (made with its parents when missing); UsageError when it is a link."""
    path = Path(path)
    if path.is_symlink():
        raise UsageError(
            f"{path} is a symbolic link; zqbench writes no output through a link: "
            "remove it, or choose another --out"
        )
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path} exists and is not a folder; choose another --out")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _temp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


def write_via(path: Path, write: Callable[[Path], None]) -> Path:
    """`write(tmp)` fills a new file beside `path`, which then replaces `path` (a link there
    is replaced, never followed). The file is 0666 less the umask, as every output."""
    path = Path(path)
    make_dir(path.parent)
    tmp = _temp_beside(path)
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666))
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    """Write `data` atomically and durably (fsync before the rename)."""

    def write(tmp: Path) -> None:
        with open(tmp, "r+b") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    return write_via(path, write)


def open_new(path: Path) -> BinaryIO:
    """A new file at `path` for writing as one goes; a link already there is removed first
    (the file is created exclusively, so no link can take its place meanwhile)."""
    path = Path(path)
    make_dir(path.parent)
    if path.is_symlink() or path.is_file():
        path.unlink()  # a stale file would be truncated anyway; a link is never followed
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
    return os.fdopen(fd, "wb")
