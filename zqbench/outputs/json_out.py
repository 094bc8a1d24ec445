"""summary.json: written atomically (temp file, fsync, rename), secrets redacted, no NaN."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zqbench.redact import redact


def write_atomic(path: Path, text: str) -> Path:
    """Write text so that readers see the old file or the whole new one, never a part."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def dumps_summary(summary: Mapping[str, Any]) -> str:
    """Redacted, indented JSON; raises ValueError if a NaN or inf slipped through."""
    return json.dumps(redact(dict(summary)), indent=2, allow_nan=False) + "\n"


def write_summary(summary: Mapping[str, Any], path: Path) -> Path:
    """Write summary.json atomically; returns the path."""
    return write_atomic(Path(path), dumps_summary(summary))


def read_summary(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
