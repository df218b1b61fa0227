"""Jinja rendering with the conventions every template relies on, and the escaping of every value it renders.

Each template writes one syntax, told by its name (``package.xml.j2``: XML, ``*.py.j2``: Python, ``*.yaml.j2``:
YAML, ``*.cfg.j2``: INI, ``*.md.j2``: Markdown). Every ``{{ value }}`` goes through ``finalize``:

- a value one of the syntax filters below made is already safe where the template puts it;
- any other value is escaped in XML and Markdown (autoescape: text content or attribute value, Markdown prose),
  and in Python, YAML and INI rendered only when it is inert in any place of the file (one printable line, no
  quote or backslash that could end a string, no ``%`` in INI); anything else fails the rendering, naming the
  template and the filter to use, so a new template value cannot slip through unescaped.

The filters: ``py`` (a Python literal), ``yaml`` (a YAML scalar), ``xml`` (XML text or attribute value), ``md``
(Markdown prose), ``code`` (a Markdown code span), ``verbatim`` (inside a Markdown code block: refused when it could
end it), ``shell`` (one shell word, for a command in a Markdown code block).
"""

from __future__ import annotations

import json
import re
import shlex
import unicodedata
from functools import cache
from typing import Any

import jinja2

from ..share import share_path

RENDERED_NOTE = "Rendered from vision_factory's templates/{template}: regenerate rather than edit."
SYNTAXES = {".xml.j2": "xml", ".py.j2": "python", ".yaml.j2": "yaml", ".cfg.j2": "ini", ".md.j2": "markdown"}
# Characters that may end the string, comment or line a raw value sits in, per syntax (and any control character).
NOT_INERT = {"python": '"\\', "yaml": '"\\', "ini": '"\\%$'}
# Markdown characters that can start emphasis, code, links, HTML, entities, tables, headings or strikethrough.
MARKDOWN_SPECIAL = re.compile(r"[\\`*\[\]<>|&#~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


class Escaped(str):
    """Text already made safe for the syntax of the file it is rendered into, by one of the filters."""


class RenderError(ValueError):
    """A value that cannot be rendered safely where a template puts it."""


def control_character(text: str) -> str | None:
    """The first character of ``text`` that is not printable on one line (newline, tab, escape, separators...)."""
    for char in text:
        if not char.isprintable() or unicodedata.category(char) in ("Zl", "Zp", "Cs"):
            return char
    return None


def _one_line(text: str, where: str) -> str:
    char = control_character(text)
    if char is not None:
        raise RenderError(f"{where}: {text!r} holds the control character {char!r}; give it on one printable line")
    return text


def python_literal(value: Any) -> Escaped:
    """A Python literal as ruff formats it: strings double-quoted, unless they hold more double quotes than single;
    a tuple of literals on one line."""
    if isinstance(value, str):
        body = json.dumps(value, ensure_ascii=False)[1:-1]  # backslashes, double quotes and control characters escaped
        if value.count('"') > value.count("'"):
            return Escaped("'" + body.replace('\\"', '"').replace("'", "\\'") + "'")
        return Escaped(f'"{body}"')
    if value is None or isinstance(value, bool | int | float):
        return Escaped(repr(value))
    if isinstance(value, tuple):
        items = ", ".join(map(python_literal, value))
        return Escaped(f"({items},)" if len(value) == 1 else f"({items})")
    raise TypeError(f"no literal for {type(value).__name__}")


def yaml_scalar(value: Any) -> Escaped:
    """A YAML scalar that ROS reads back with the same type (1.0 stays a double); strings double-quoted."""
    if isinstance(value, bool):
        return Escaped("true" if value else "false")
    if isinstance(value, str):
        return Escaped(json.dumps(value))  # ASCII only: every other character as a \\u escape YAML reads back
    return Escaped(repr(value))


def xml_text(value: Any) -> Escaped:
    """XML character data or a double-quoted attribute value (as the templates quote them)."""
    text = _one_line(str(value), "XML")
    for old, new in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;")):
        text = text.replace(old, new)
    return Escaped(text)


def markdown_text(value: Any) -> Escaped:
    """Markdown prose that shows ``value`` as it is (nothing it holds can format, link or end a table cell)."""
    return Escaped(MARKDOWN_SPECIAL.sub(lambda match: "\\" + match.group(), _one_line(str(value), "Markdown")))


def markdown_verbatim(value: Any) -> Escaped:
    """``value`` as it is, inside a Markdown code block: one line without backticks (nothing that could end it)."""
    text = _one_line(str(value), "Markdown code")
    if "`" in text:
        raise RenderError(f"Markdown code: {text!r} holds a backtick, which could end the code")
    return Escaped(text)


def markdown_code(value: Any, table: bool = False) -> Escaped:
    """``value`` as a Markdown code span (``table``: in a table cell, where ``|`` is escaped)."""
    text = str(markdown_verbatim(value))
    if table:
        text = text.replace("|", "\\|")
    return Escaped(f"`{text}`")


def shell_word(value: Any) -> Escaped:
    """``value`` as one shell word (quoted when it needs it), for a command in a Markdown code block."""
    return markdown_verbatim(shlex.quote(_one_line(str(value), "shell")))


def syntax(template: str | None) -> str:
    for suffix, name in SYNTAXES.items():
        if template and template.endswith(suffix):
            return name
    raise RenderError(f"templates/{template}: no syntax known for its name (one of {', '.join(SYNTAXES)})")


@jinja2.pass_context
def finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    """Every ``{{ value }}``: escaped for the template's syntax, or refused (see the module's docstring)."""
    if isinstance(value, Escaped) or isinstance(value, bool | int | float) or value is None:
        return value
    kind = syntax(context.name)
    if kind == "xml":
        return xml_text(value)
    if kind == "markdown":
        return markdown_text(value)
    text = _one_line(str(value), f"templates/{context.name}")
    unsafe = [char for char in NOT_INERT[kind] if char in text]
    if unsafe:
        filters = {"python": "py", "yaml": "yaml", "ini": "a value without them"}
        raise RenderError(
            f"templates/{context.name}: {text!r} holds {', '.join(map(repr, unsafe))}, not safe raw in {kind}: "
            f"render it with |{filters[kind]}"
        )
    return value


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(share_path("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=finalize,
        autoescape=False,  # Jinja's own autoescape is HTML's: finalize escapes for each template's syntax
    )
    env.filters["py"] = python_literal
    env.filters["yaml"] = yaml_scalar
    env.filters["xml"] = xml_text
    env.filters["md"] = markdown_text
    env.filters["code"] = markdown_code
    env.filters["verbatim"] = markdown_verbatim
    env.filters["shell"] = shell_word
    return env


def render(template: str, **context: Any) -> str:
    """Render ``template`` (a path under templates/); ``rendered_note`` is provided."""
    note = RENDERED_NOTE.format(template=template)
    return environment().get_template(template).render(rendered_note=note, **context)
