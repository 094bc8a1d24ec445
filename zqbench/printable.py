"""Text from outside (a target's answers, a peer's messages) made safe to show.

A target chooses its model ids, its error bodies and its headers. Written raw to a terminal
or a CI log, such text can clear the screen (ESC), hide itself (NUL, U+202E, the
right-to-left override) or start a line of its own that reads like zqbench's: a target
could print `verdict: PASS` into a CI job's log. And one 100 kB model id held the
terminal's highlighter for minutes. So every line zqbench writes for people goes through
`one_line`, and every piece of outside text put into a message through `shown`:

    shown("tiny\\x1b[2J\\nverdict: PASS")  -> 'tiny\\x1b[2J\\x0averdict: PASS'
    shown("m" * 300)                       -> 'mmm...m... (100 more characters)'

A character that is not printable (str.isprintable: controls, format characters such as
the bidi overrides, line and paragraph separators, surrogates, unassigned code points) is
written as its Python escape, so the reader still sees what the target sent; letters of
every script stay as they are.
"""

from __future__ import annotations

MAX_SHOWN = 200  # characters of one piece of outside text in a message
MAX_LINE = 4000  # characters of one line for people, whatever it holds


def shown(text: str, limit: int = MAX_SHOWN) -> str:
    """`text` with every unprintable character escaped, cut after `limit` characters."""
    cut = escaped(text[:limit])
    if len(text) > limit:
        cut += f"... ({len(text) - limit} more characters)"
    return cut


def escaped(text: str) -> str:
    """`text` with every unprintable character escaped, whatever its length."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def escaped_lines(text: str) -> str:
    """`text` escaped line by line: its newlines kept, every other unprintable character
    escaped (a block the template or writer laid out in lines, each line of which may
    quote a target)."""
    return "\n".join(escaped(line) for line in text.split("\n"))


def one_line(message: str) -> str:
    """A message as one line for a terminal or a log: a newline inside it is escaped, never
    a line of its own."""
    return shown(message, MAX_LINE)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
