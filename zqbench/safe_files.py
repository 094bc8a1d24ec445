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

A write the disk refuses (full, over quota, read-only, not ours) is a UsageError naming the
file and the fix, exit 2, with no temporary file left behind: never a traceback.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from zqbench.errors import UsageError

# O_NOFOLLOW where the platform has it: the open itself refuses a link at the last step.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def cannot_write(path: Path, exc: OSError) -> UsageError:
    """The one line for an output the system would not write: the file, why, and the fix."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in reason:
        fix = "free some space on that disk, or write to another folder"
    elif exc.errno == errno.EFBIG:
        fix = "raise the file size limit (ulimit -f), or write to another folder"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = "write to a folder this user can write to"
    else:
        fix = "check that disk, or write to another folder"
    return UsageError(f"cannot write {path}: {reason}; {fix}")


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
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    return path


def write_via(path: Path, write: Callable[[Path], None]) -> Path:
    """`write(tmp)` fills a new file beside `path`, which then replaces `path` (a link there
    is replaced, never followed). The file is 0666 less the umask, as every output."""
    path = Path(path)
    make_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666))
        write(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise cannot_write(path, exc) from None
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
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
    except OSError as exc:
        raise cannot_write(path, exc) from None
    return os.fdopen(fd, "wb")
