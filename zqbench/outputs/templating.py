"""The jinja2 environments of the templates in outputs/templates/ (shipped as package data).

    html_environment()       autoescape on: every value is HTML-escaped unless marked safe
    markdown_environment()   every value shown as text (`markdown_text`); table cells pass
                             through the `cell` filter, inline code through `code`

Both raise on an undefined name (StrictUndefined), so a template that asks the view for a
field it lacks fails loudly instead of printing nothing. trim_blocks / lstrip_blocks let
block tags stand on their own lines without leaving blank lines in the output.
"""

from __future__ import annotations

import re
from functools import cache

import jinja2
from markupsafe import Markup

from zqbench.metrics.sections import SECTIONS
from zqbench.metrics.sections.text import FILTERS
from zqbench.outputs import view
from zqbench.printable import escaped, escaped_lines

# Where Markdown would start raw HTML (CommonMark: `<` then a tag name, `/`, `!` or `?`);
# a renderer passes such HTML through, so a scenario named `<script>` would run in a page.
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")


def _environment(*, autoescape: bool, **options: object) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("zqbench.outputs", "templates"),
        autoescape=autoescape,
        **options,  # type: ignore[arg-type]
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # A section's partial formats summary.json's values itself, with the view's functions.
    env.filters.update(FILTERS)
    env.filters.update(view.FILTERS)
    for section in SECTIONS:
        env.filters.update(section.filters)
    return env


@cache
def html_environment() -> jinja2.Environment:
    return _environment(autoescape=True, finalize=html_text)


@cache
def markdown_environment() -> jinja2.Environment:
    # finalize: every {{ value }} is shown as text; escaping is idempotent, so a value that
    # went through `code` or `cell` first is not changed twice.
    env = _environment(autoescape=False, finalize=markdown_text)
    env.filters["cell"] = table_cell
    env.filters["code"] = code
    return env


def table_cell(text: object) -> str:
    """Text that stays inside one Markdown table cell: a pipe would end the cell, a newline
    the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_text(text: object) -> str:
    """Text that Markdown shows as written, never as HTML: a `<` that would open a tag
    becomes `&lt;` (rendered `<`); `a < b` is left alone. An unprintable character (a
    target's ESC or bidi override) is shown escaped, never obeyed; newlines stay, as the
    partials lay out their lines (a target's text in a line is escaped where it enters:
    zqbench.printable.shown)."""
    return _HTML_START.sub("&lt;", escaped_lines(str(text)))


def html_text(value: object) -> object:
    """A value for the page: markup the template marked safe (a figure) as it is, any other
    text with its unprintable characters escaped (then HTML-escaped by autoescape)."""
    return value if isinstance(value, Markup) else escaped(str(value))


def code(text: object) -> str:
    """Inline code in Markdown. A code span shows its text literally, so one that holds a
    backtick (which would end the span) or something tag-like is written as escaped text."""
    value = str(text)
    if "`" in value or _HTML_START.search(value):
        return markdown_text(value).replace("`", "\\`")
    return f"`{value}`"
