"""summary.json on disk: written atomically (temp file, fsync, rename) with secrets
redacted and no NaN; read back validated, a bad file being one UsageError.

    write_summary(summary, out_dir / SUMMARY_JSON)
    summary = load_summary(out_dir / SUMMARY_JSON)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from zqbench.errors import UsageError
from zqbench.redact import redact
from zqbench.safe_files import write_bytes
from zqbench.summary import SCHEMA, Summary


def write_atomic(path: Path, text: str) -> Path:
    """Write text so that readers see the old file or the whole new one, never a part, and
    never through a link (zqbench.safe_files).

    The file is created 0666 less the umask, as every other output (docs/design.md, "The
    run folder"): a temp file from `tempfile` would be 0600 beside 0644 siblings."""
    return write_bytes(Path(path), text.encode("utf-8"))


def redacted(summary: Summary) -> Summary:
    """The summary with every secret replaced by "<redacted>", as every output shows it."""
    return Summary.model_validate(redact(summary.model_dump(mode="json")))


def dumps_summary(summary: Summary) -> str:
    """summary.json's text: the redacted summary. Raises ValueError if a NaN or infinity
    slipped through (JSON has neither)."""
    return redacted(summary).to_json()


def write_summary(summary: Summary, path: Path) -> Path:
    """Write summary.json atomically; returns the path, and leaves no file on ValueError."""
    return write_atomic(Path(path), dumps_summary(summary))


def upgrade_summary(data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a parsed summary.json) with an old load section rewritten; else unchanged.

    Saved summaries from before the executor protocol: their load section said
    `"open_loop": true|false`; it now says `"loop": "open"|"closed"`, the executor's own
    word. Read-side only: zqbench writes the new key, and `zqbench report`, `gate` and
    `compare` still read runs saved earlier."""
    load = data.get("load")
    if isinstance(load, dict) and "open_loop" in load and "loop" not in load:
        old = load.pop("open_loop")
        upgraded = {"loop": "open" if old is True else "closed" if old is False else old}
        data["load"] = {**upgraded, **load}
    return data


def load_summary(path: Path) -> Summary:
    """Read a summary.json. Raises UsageError (one line, exit 2) when the file is
    unreadable, of another schema version, or does not match the schema."""
    path = Path(path)
    if path.is_symlink():
        raise UsageError(f"{path}: a symbolic link; a run's summary is a plain file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise UsageError(f"{path}: not a summary (JSON nested too deeply to read)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a summary (a JSON {type(data).__name__}, not an object)")
    data = upgrade_summary(data)
    found = data.get("schema")
    if found != SCHEMA:
        raise UsageError(f"{path}: schema {found!r}, expected {SCHEMA!r}")
    try:
        return Summary.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: not a valid {SCHEMA} file: {_first_problem(exc)}") from None


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    more = exc.error_count() - 1
    return f"{where}: {first['msg']}" + (f" (and {more} more)" if more else "")
