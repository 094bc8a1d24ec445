"""Reading a dataset file row by row, without holding it: the index pass and the row reader.

    jsonl             one object a line: `prompt` or `messages`, optional `system`,
                      optional `max_tokens` or `output_tokens` (the answer's length),
                      optional `tools` and `tool_choice` (either API's words; any format)
    chat-completions  one OpenAI chat-completions request a line (`messages`, `max_tokens`
                      or `max_completion_tokens`; `model` and the rest ignored), or a Batch
                      API line whose `body` is one
    sharegpt          a JSON array (or JSONL) of `{"conversations": [{"from": "human",
                      "value": ...}, {"from": "gpt", ...}, ...]}`: the first human turn is
                      the prompt, the answer after it sets the output length

The index pass (`scan`) reads the file once, in binary pieces: it hashes it (sha256), checks
every row, and keeps each row's byte span and sizes; nothing else stays in memory, so a
1 GB file costs a few numbers a row. A worker reads the row it sends from its span
(`read_row`). A JSON array is cut into elements with `json.JSONDecoder.raw_decode` over
the bytes decoded as latin-1 (one character a byte, so the offsets are byte offsets); the
row itself is then decoded as UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zqbench.dialects.base import Message, Tools
from zqbench.dialects.tools import ToolsFileError, parse_choice, parse_tools
from zqbench.errors import UsageError
from zqbench.load.bounds import MAX_DATASET_ROWS, MAX_OUTPUT_TOKENS, MAX_ROW_BYTES
from zqbench.load.trace_file import open_rows

_PIECE = 1 << 20  # bytes read at a time
_NESTED = "nested deeper than a JSON reader goes; give one flat object a row"
_ROLES = ("user", "assistant")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}


class DatasetError(UsageError):
    """A dataset that cannot be read or has a bad row: exit 2, before any load."""


@dataclass(frozen=True, slots=True)
class Row:
    """One request of the dataset: the conversation before the prompt, and the prompt."""

    system: str | None
    history: tuple[Message, ...]  # the conversation's messages before the prompt
    prompt: str  # the last user message
    output_tokens: int | None  # the answer's length the row asks for, if it says
    tools: Tools | None = None  # the tools the row offers (`tools`, `tool_choice`)


@dataclass(frozen=True)
class DatasetFile:
    """Which file it was: what shows two runs read the same one."""

    sha256: str
    size: int  # bytes
    format: str  # as read ("auto" resolved)
    rows: int  # rows in the file


@dataclass(frozen=True)
class Index:
    """What the index pass kept: the file, and each row's span and sizes."""

    file: DatasetFile
    offsets: np.ndarray  # int64 byte offset of each row
    lengths: np.ndarray  # int64 byte length of each row
    prompt_bytes: np.ndarray  # int64 UTF-8 bytes of each row's whole prompt (system + turns)
    output_tokens: np.ndarray  # int64 the row's output length; -1 where it gives none
    answer_bytes: np.ndarray  # int64 UTF-8 bytes of a ShareGPT row's answer; -1 where none


def scan(path: Path, fmt: str) -> Index:
    """Read `path` once: hash it, check every row, keep each row's span and sizes."""
    f, size = open_rows(path, "dataset", DatasetError)
    with f:
        digest = hashlib.sha256()
        first = _first_byte(f)
        if fmt == "auto":
            fmt = "sharegpt" if first == b"[" else _sniff_jsonl(path, f)
        is_array = first == b"["
        if is_array and fmt != "sharegpt":
            raise DatasetError(
                f"dataset {path}: a JSON array is read as format sharegpt only; give one "
                f'object a line for format {fmt}, or set format = "sharegpt"'
            )
        spans = _array_spans(f, digest, path) if is_array else _line_spans(f, digest, path)
        # array('q'): 8 bytes an entry, where a list of ints costs about 36
        offsets, lengths, prompt_bytes, outputs, answers = (array("q") for _ in range(5))
        for number, offset, raw in spans:
            where = f"dataset {path} {'element' if is_array else 'line'} {number}"
            if len(offsets) == MAX_DATASET_ROWS:
                raise DatasetError(
                    f"{where}: more than {MAX_DATASET_ROWS:,} rows; give a file of at most "
                    f"{MAX_DATASET_ROWS:,} (a sample of the rows)"
                )
            row = parse_row(raw, fmt, where=where)
            offsets.append(offset)
            lengths.append(len(raw))
            prompt_bytes.append(_prompt_bytes(row, where))
            outputs.append(-1 if row.output_tokens is None else row.output_tokens)
            answer = _sharegpt_answer_bytes(raw) if fmt == "sharegpt" else None
            answers.append(-1 if answer is None else answer)
    if not offsets:
        raise DatasetError(f"dataset {path}: no rows in it; give a file with rows")
    return Index(
        file=DatasetFile(sha256=digest.hexdigest(), size=size, format=fmt, rows=len(offsets)),
        offsets=np.frombuffer(offsets, dtype=np.int64),
        lengths=np.frombuffer(lengths, dtype=np.int64),
        prompt_bytes=np.frombuffer(prompt_bytes, dtype=np.int64),
        output_tokens=np.frombuffer(outputs, dtype=np.int64),
        answer_bytes=np.frombuffer(answers, dtype=np.int64),
    )


def read_row(path: str, offset: int, length: int, fmt: str) -> Row:
    """The row at `offset` of `path` (checked by `scan`). The file is opened for each read,
    so no worker holds it open between requests (a few microseconds)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        raw = os.pread(fd, length, offset)
    finally:
        os.close(fd)
    return parse_row(raw, fmt, where=f"dataset {path} at byte {offset}")


def _first_byte(f: Any) -> bytes:
    """The first byte that is not whitespace (or a UTF-8 BOM); the file stays at 0."""
    head = f.read(4096)
    f.seek(0)
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]


def _sniff_jsonl(path: Path, f: Any) -> str:
    """jsonl, sharegpt or chat-completions, from the first row's keys."""
    line = next((ln for ln in _lines(f) if ln.strip()), b"")
    f.seek(0)
    if len(line) > MAX_ROW_BYTES:
        raise _too_long(path, "line 1")
    try:
        obj = json.loads(line)
    except RecursionError:
        return "jsonl"  # parse_row refuses the row, naming it
    except ValueError:
        raise DatasetError(
            f"dataset {path} line 1: not JSON; give one JSON object a line, or a JSON array"
        ) from None
    if isinstance(obj, dict):
        if "conversations" in obj:
            return "sharegpt"
        if "body" in obj or "model" in obj:
            return "chat-completions"
    return "jsonl"


def _lines(f: Any) -> Iterator[bytes]:
    """The file's lines; one longer than MAX_ROW_BYTES comes cut, one byte past it (the caller
    refuses it), and the rest of it is never read."""
    return iter(lambda: f.readline(MAX_ROW_BYTES + 1), b"")


def _too_long(path: Path, where: str) -> DatasetError:
    return DatasetError(
        f"dataset {path} {where}: longer than {MAX_ROW_BYTES >> 20} MiB; give one request a row"
    )


def _line_spans(f: Any, digest: Any, path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, bytes) of each line that is not blank."""
    offset = 0
    for number, line in enumerate(_lines(f), start=1):
        if len(line) > MAX_ROW_BYTES:
            raise _too_long(path, f"line {number}")
        digest.update(line)
        if line.strip():
            yield number, offset, line
        offset += len(line)


def _array_spans(f: Any, digest: Any, path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(element number, byte offset, bytes) of each element of the top-level JSON array."""
    decoder = json.JSONDecoder()
    buf, base, pos, number, done = "", 0, 0, 0, False  # buf[0] is byte `base` of the file
    started = False
    while True:
        # Skip what separates elements: whitespace, the opening bracket, commas.
        while pos < len(buf) and buf[pos] in " \t\r\n,[\ufeff\xef\xbb\xbf":
            started = started or buf[pos] == "["
            pos += 1
        if pos < len(buf) and buf[pos] == "]":
            return
        try:
            if pos >= len(buf):
                raise ValueError("need more")
            _, end = decoder.raw_decode(buf, pos)
        except RecursionError:
            raise DatasetError(f"dataset {path} element {number + 1}: {_NESTED}") from None
        except ValueError:
            if done or len(buf) - pos > MAX_ROW_BYTES:
                raise DatasetError(
                    f"dataset {path} element {number + 1}: not valid JSON, the array is not "
                    f"closed, or longer than {MAX_ROW_BYTES >> 20} MiB; fix the file"
                ) from None
            piece = f.read(_PIECE)
            digest.update(piece)
            done = not piece
            buf, base, pos = buf[pos:] + piece.decode("latin-1"), base + pos, 0
            continue
        if not started:
            raise DatasetError(f"dataset {path}: not a JSON array; check the format")
        number += 1
        yield number, base + pos, buf[pos:end].encode("latin-1")
        pos = end


def parse_row(raw: bytes, fmt: str, *, where: str) -> Row:
    """One row of `fmt`; DatasetError naming `where`, the field and the fix."""
    try:
        obj = json.loads(raw)
    except ValueError:
        raise DatasetError(f"{where}: not JSON; give one JSON object") from None
    except RecursionError:
        raise DatasetError(f"{where}: {_NESTED}") from None
    if not isinstance(obj, dict):
        raise DatasetError(f"{where}: not a JSON object; give one object a row")
    if fmt == "sharegpt":
        return _sharegpt(obj, where)
    if fmt == "chat-completions" and isinstance(obj.get("body"), dict):
        obj, where = obj["body"], f"{where} body"
    system = None if obj.get("system") is None else _text(obj["system"], "system", where)
    if "messages" in obj:
        if "prompt" in obj:
            raise DatasetError(f'{where}: both "prompt" and "messages"; give one of them')
        system, history, prompt = _messages(obj["messages"], system, where)
    elif "prompt" in obj and fmt == "jsonl":
        prompt, history = _text(obj["prompt"], "prompt", where), ()
    else:
        need = '"messages"' if fmt == "chat-completions" else '"prompt" or "messages"'
        raise DatasetError(f"{where}: no {need}; give the request's text there")
    keys = ("max_tokens", "output_tokens", "max_completion_tokens")
    given = [k for k in keys if obj.get(k) is not None]
    output = None
    if given:
        output = obj[given[0]]
        if isinstance(output, bool) or not isinstance(output, int) or output < 1:
            raise DatasetError(
                f'{where}: "{given[0]}" is {json.dumps(output)}, not a positive integer; '
                "fix it or leave it out"
            )
        if output > MAX_OUTPUT_TOKENS:
            raise DatasetError(
                f'{where}: "{given[0]}" is {output}, past {MAX_OUTPUT_TOKENS:,} (longer than '
                "any model answers); fix it or leave it out"
            )
    return Row(system, history, prompt, output, _tools(obj, where))


def _tools(obj: dict[str, Any], where: str) -> Tools | None:
    """A row's `tools` (in either API's words) and its `tool_choice` (default auto)."""
    if obj.get("tools") is None:
        if obj.get("tool_choice") is not None:
            raise DatasetError(f'{where}: "tool_choice" without "tools"; give both or neither')
        return None
    try:
        offered = parse_tools(obj["tools"])
        choice, named = parse_choice(obj.get("tool_choice", "auto"), [t.name for t in offered])
    except ToolsFileError as exc:
        raise DatasetError(f'{where}: "tools" {exc}') from None
    return Tools(offered, choice, named)


def _text(value: Any, field: str, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise DatasetError(f'{where}: "{field}" is not a non-empty string; give the text')
    return value


def _content(value: Any, field: str, where: str) -> str:
    """A message's content: a string, or a list of text parts (joined)."""
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type") == "text"]
        if parts and all(isinstance(p, str) for p in parts):
            value = "".join(parts)  # type: ignore[arg-type]
    return _text(value, field, where)


def _messages(
    messages: Any, system: str | None, where: str
) -> tuple[str | None, tuple[Message, ...], str]:
    """(system, earlier turns, last user message) of a chat `messages` list."""
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f'{where}: "messages" is not a non-empty list; give the messages')
    turns: list[Message] = []
    for i, m in enumerate(messages):
        field = f"messages[{i}]"
        role = m.get("role") if isinstance(m, dict) else None
        if role in ("system", "developer") and not turns and system is None:
            system = _content(m.get("content"), f"{field}.content", where)
            continue
        if role not in _ROLES:
            raise DatasetError(
                f'{where}: "{field}.role" is {json.dumps(role)}; give user or assistant '
                "(a system message only first)"
            )
        turns.append(Message(role, _content(m.get("content"), f"{field}.content", where)))
    if not turns or turns[-1].role != "user":
        raise DatasetError(f'{where}: "messages" does not end with a user message; end it so')
    return system, tuple(turns[:-1]), turns[-1].text


def _sharegpt(obj: dict[str, Any], where: str) -> Row:
    turns = obj.get("conversations")
    if not isinstance(turns, list) or not turns:
        raise DatasetError(f'{where}: "conversations" is not a non-empty list; give the turns')
    system = None
    for i, turn in enumerate(turns):
        role = _SHAREGPT_ROLES.get(str(turn.get("from"))) if isinstance(turn, dict) else None
        if isinstance(turn, dict) and turn.get("from") == "system" and i == 0:
            system = _text(turn.get("value"), "conversations[0].value", where)
            continue
        if role == "user":
            prompt = _text(turn.get("value"), f"conversations[{i}].value", where)
            return Row(system, (), prompt, None)
        if role is None:
            raise DatasetError(
                f'{where}: "conversations[{i}].from" is {json.dumps(turn.get("from"))}; '
                "give human or gpt"
            )
    raise DatasetError(f'{where}: "conversations" has no human turn; give one')


def _sharegpt_answer_bytes(raw: bytes) -> int | None:
    """The length, in UTF-8 bytes, of the answer after the first human turn."""
    turns = json.loads(raw)["conversations"]
    seen_prompt = False
    for turn in turns:
        role = _SHAREGPT_ROLES.get(str(turn.get("from")))
        if role == "user":
            seen_prompt = True
        elif role == "assistant" and seen_prompt and isinstance(turn.get("value"), str):
            # Only measured, never sent: a lone surrogate counts as the 3 bytes it takes.
            return len(turn["value"].encode("utf-8", "surrogatepass"))
    return None


def _prompt_bytes(row: Row, where: str) -> int:
    texts = [row.system or "", *(m.text for m in row.history), row.prompt]
    try:
        return sum(len(t.encode()) for t in texts)
    except UnicodeEncodeError as e:  # JSON's "\\ud800" without its pair: no UTF-8 for it
        raise DatasetError(
            f"{where}: the text holds a lone UTF-16 surrogate ({e.object[e.start]!a}), which "
            "no request can carry; fix the text"
        ) from None
