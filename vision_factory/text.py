"""Text in and out, with no ROS import: untrusted text (from messages and model files) made safe to log, and sizes."""

from __future__ import annotations

DEFAULT_LIMIT = 200  # characters of untrusted text kept in one log line
PATH_LIMIT = 1000  # characters of a path kept in one line: a deep path stays whole, a hostile one stays bounded


def untrusted(text: object, limit: int = DEFAULT_LIMIT) -> str:
    """``text`` as one printable line of at most about ``limit`` characters.

    Every character that is not printable (newlines, carriage returns, ANSI escape sequences'
    ESC, other control and format characters, line and paragraph separators) and the backslash
    itself are written as Python escapes, so the result can never start a new log line, move the
    cursor or recolour a terminal, and an escape in the original stays distinguishable. Text
    beyond ``limit`` is cut and the cut is said.
    """
    text = str(text)
    escaped = "".join(char if char.isprintable() and char != "\\" else _escape(char) for char in text[:limit])
    if len(text) > limit:
        escaped += f"... ({len(text) - limit} more characters)"
    return escaped


def _escape(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def printable(text: object) -> str:
    """``text`` (the tool's own, which quotes files and messages through ``untrusted``) for the terminal: every
    character that is neither printable nor a newline written as a Python escape, so that a quote that escaped
    ``untrusted`` can still not move the cursor or recolour the screen. The tool's lines, backslashes and length are
    kept (text already escaped passes unchanged)."""
    return "".join(char if char.isprintable() or char == "\n" else _escape(char) for char in str(text))


def shown_path(path: object) -> str:
    """A file's path (from the command line, a file or a message: a newline or ESC in a name is possible) as one
    printable line: ``untrusted`` with room for a deep path."""
    return untrusted(path, PATH_LIMIT)


def markdown_cell(text: object) -> str:
    """``text`` (already made printable, e.g. by ``untrusted``) as the cell of a Markdown table: on one line, and
    each ``|``, which would end the cell and shift the row's columns, escaped as ``\\|``."""
    return " ".join(str(text).splitlines()).replace("|", "\\|")


def parse_size(text: str, name: str = "", example: str = "1280x720") -> tuple[int, int]:
    """'1280x720' (width x height) -> (width, height), both positive; else an error naming ``name``."""
    width, separator, height = text.lower().partition("x")
    if not (separator and width.isdigit() and height.isdigit() and int(width) > 0 and int(height) > 0):
        raise ValueError(f"{name + ' ' if name else ''}{text!r} is not WIDTHxHEIGHT, e.g. {example}")
    return int(width), int(height)
